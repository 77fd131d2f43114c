// The named tensors a checkpoint of this model (and optimizer, when given) saves and loads
// (ckpt/checkpoint_tensors.h): the model's layout and parameters (the optimizer's fp32 masters where
// it keeps them), the optimizer's moments of its shard and its schedule. The model and optimizer
// must outlive the result.
#pragma once

#include "ckpt/checkpoint_tensors.h"
#include "model/decoder.h"
#include "optim/adamw.h"
#include "parallel/data_parallel.h"

namespace anneal {

// par: the run's data parallelism, when it shards fp32 masters (bf16 with ZeRO 1, 2, 3) or the
// parameters themselves (ZeRO 3): the parameters are then its whole fp32 copy (gathered by
// GatherFullParams before a save) and a load scatters it back into the masters and the working copy.
CheckpointTensors TensorsOf(DecoderModel& model, AdamW* opt, DataParallel* par = nullptr);
// The whole fp32 parameter vector (what checkpoints and the state hash read): the optimizer's masters
// or the fp32 working copy — or, with sharded masters, every rank's shard gathered into par's copy
// (a collective: every data-parallel rank calls it).
Result<DevPtr> GatherFullParams(const DecoderModel& model, const AdamW& opt, DataParallel* par);
// Saving only (no load hooks): the same from const references.
CheckpointTensors TensorsOf(const DecoderModel& model, const AdamW* opt);

}  // namespace anneal
