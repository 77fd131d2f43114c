// The named tensors a checkpoint of this model (and optimizer, when given) saves and loads
// (ckpt/checkpoint_tensors.h): the model's layout and parameters (the optimizer's fp32 masters where
// it keeps them), the optimizer's moments of its shard and its schedule. The model and optimizer
// must outlive the result.
#pragma once

#include "ckpt/checkpoint_tensors.h"
#include "model/decoder.h"
#include "optim/adamw.h"

namespace anneal {

CheckpointTensors TensorsOf(DecoderModel& model, AdamW* opt);
// Saving only (no load hooks): the same from const references.
CheckpointTensors TensorsOf(const DecoderModel& model, const AdamW* opt);

}  // namespace anneal
