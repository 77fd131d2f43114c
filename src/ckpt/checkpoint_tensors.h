// CheckpointTensors: what a checkpoint saves and loads on one rank — a set of named tensors, not a
// model and an optimizer. The model's layout (canonical names; each tensor's box of the whole
// tensor and its place in one flat buffer) over buffers in a backend's memory: the canonical fp32
// parameters and, when there is optimizer state, the moments of a range [begin, end) of that flat
// buffer. ckpt/ sees nothing else of the model or the optimizer; train/checkpoint_tensors.h builds
// one from them.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>

#include "model/config.h"
#include "tensor/backend.h"
#include "tensor/device_array.h"

namespace anneal {

struct CheckpointTensors {
  const ModelConfig* model = nullptr;  // the manifest's "model" section (a load checks it matches)
  const ParamLayout* layout = nullptr;
  Backend* backend = nullptr;
  Stream stream;
  DevPtr params;  // layout->total_floats() fp32 values: the canonical parameters (masters where kept)
  // Optimizer state, absent when m is null: the moments of [begin, end) of the flat buffer.
  DevPtr m, v;
  size_t begin = 0, end = 0;
  // ZeRO-3: params holds [begin, end) of the flat buffer only (this rank's shard, like the moments);
  // each rank saves and loads its range of the parameters and no rank holds the whole vector.
  bool params_sharded = false;
  // The learning-rate schedule, recorded in the manifest beside the optimizer state.
  struct Schedule {
    float lr = 0, min_lr = 0;
    int warmup_steps = 0, decay_steps = 0;
  };
  std::optional<Schedule> schedule;
  // After a load: the working parameters from the canonical values (bf16 working copies), and the
  // optimizer's update count from the trainer state. Empty: nothing to do.
  std::function<void()> loaded;
  std::function<void(int updates)> set_updates;

  bool has_optimizer() const { return m.p != nullptr; }
  size_t num_floats() const { return layout->total_floats(); }
  // The elements params holds: the whole flat buffer, or [begin, end).
  size_t param_floats() const { return params_sharded ? end - begin : num_floats(); }
  size_t param_begin() const { return params_sharded ? begin : 0; }
  size_t moment_floats() const { return has_optimizer() ? end - begin : 0; }
};

}  // namespace anneal
