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
// bf16 masters sharded at ZeRO 1 and 2: a checkpoint gathers them into the whole fp32 vector.
// (ZeRO 3 saves and loads each rank's range of the parameters instead: ShardedParams.)
bool ShardedMasters(const AdamW* opt, const DataParallel* par) {
  return opt && par && opt->master() && (par->zero() == 1 || par->zero() == 2) && par->narrow_model();
}
bool ShardedParams(const AdamW* opt, const DataParallel* par) { return opt && par && par->zero() == 3; }
}  // namespace

CheckpointTensors TensorsOf(DecoderModel& model, AdamW* opt, DataParallel* par) {
  CheckpointTensors t = TensorsOf(static_cast<const DecoderModel&>(model), static_cast<const AdamW*>(opt));
  if (ShardedParams(opt, par)) {  // the fp32 values of this rank's range: the masters, or the fp32 working shard
    t.params_sharded = true;
    t.params = opt->MasterOr(par->OptimizerParams({}));
    t.loaded = [opt, par] {
      if (opt->master()) opt->WriteWorking(par->OptimizerParams({}));
    };
  } else if (ShardedMasters(opt, par)) {
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
  ANNEAL_RETURN_IF_ERROR(par->GatherMasters(opt.master()));
  return par->wide();
}

}  // namespace anneal
