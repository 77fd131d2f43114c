#include "train/checkpoint_tensors.h"

namespace anneal {

CheckpointTensors TensorsOf(const DecoderModel& model, const AdamW* opt) {
  CheckpointTensors t;
  t.model = &model.config();
  t.layout = &model.layout();
  t.backend = &model.backend();
  t.stream = model.stream();
  // Master weights are read as the whole vector here: a sharded optimizer's (bf16 with ZeRO 1) come
  // through the mutable TensorsOf with its DataParallel.
  t.params = opt ? opt->MasterOr(model.params_ptr()) : model.params_ptr();
  if (opt) {
    t.m = opt->m().ptr();
    t.v = opt->v().ptr();
    t.begin = opt->begin();
    t.end = opt->end();
    const AdamWOptions& o = opt->options();
    t.schedule = CheckpointTensors::Schedule{o.lr, o.min_lr, o.warmup_steps, o.decay_steps};
  }
  return t;
}

namespace {
// The whole fp32 vector exists nowhere during training: bf16 masters sharded (ZeRO 1, 2, 3), or
// every parameter sharded (ZeRO 3).
bool ShardedMasters(const AdamW* opt, const DataParallel* par) {
  if (!opt || !par) return false;
  return par->zero() == 3 || (opt->master() && par->zero() > 0 && par->narrow_model());
}
}  // namespace

CheckpointTensors TensorsOf(DecoderModel& model, AdamW* opt, DataParallel* par) {
  CheckpointTensors t = TensorsOf(static_cast<const DecoderModel&>(model), static_cast<const AdamW*>(opt));
  if (ShardedMasters(opt, par)) {
    t.params = par->wide();
    t.loaded = [&model, opt, par] { par->ScatterMasters(opt->master(), model.params_ptr()); };
  } else if (opt) {
    t.loaded = [&model, opt] { opt->WriteWorking(model.params_ptr() + opt->begin()); };
  }
  if (opt) t.set_updates = [opt](int updates) { opt->set_updates(updates); };
  return t;
}

Result<DevPtr> GatherFullParams(const DecoderModel& model, const AdamW& opt, DataParallel* par) {
  if (!ShardedMasters(&opt, par)) return opt.MasterOr(model.params_ptr());
  ANNEAL_RETURN_IF_ERROR(par->GatherMasters(opt.MasterOr(par->OptimizerParams(model.params_ptr()))));
  return par->wide();
}

}  // namespace anneal
