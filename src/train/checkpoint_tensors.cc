#include "train/checkpoint_tensors.h"

namespace anneal {

CheckpointTensors TensorsOf(const DecoderModel& model, const AdamW* opt) {
  CheckpointTensors t;
  t.model = &model.config();
  t.layout = &model.layout();
  t.backend = &model.backend();
  t.stream = model.stream();
  // Master weights are read as the whole vector: the trainer allows them only for a whole-vector
  // optimizer (train.dtype = bf16 runs at ZeRO 0 without tensor or pipeline parallelism).
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

CheckpointTensors TensorsOf(DecoderModel& model, AdamW* opt) {
  CheckpointTensors t = TensorsOf(static_cast<const DecoderModel&>(model), static_cast<const AdamW*>(opt));
  if (opt) {
    t.loaded = [&model, opt] { opt->WriteWorking(model.params_ptr() + opt->begin()); };
    t.set_updates = [opt](int updates) { opt->set_updates(updates); };
  }
  return t;
}

}  // namespace anneal
