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

// par: the run's data parallelism. When it shards bf16 masters (ZeRO 1, 2) the parameters are its
// whole fp32 copy (gathered by GatherFullParams before a save) and a load scatters it back into the
// masters and the working copy; at ZeRO 3 they are this rank's range of the fp32 values (the masters,
// or the fp32 working shard), saved and loaded as ranges (CheckpointTensors::params_sharded).
CheckpointTensors TensorsOf(DecoderModel& model, AdamW* opt, DataParallel* par = nullptr);
// The whole fp32 parameter vector (what checkpoints and the state hash read below ZeRO 3): the
// optimizer's masters or the fp32 working copy — or, with sharded bf16 masters, every rank's shard
// gathered into par's copy (a collective: every data-parallel rank calls it). Not at ZeRO 3 (no rank
// holds the whole vector there: the state hash streams it, StateHash in train/report.h).
Result<DevPtr> GatherFullParams(const DecoderModel& model, const AdamW& opt, DataParallel* par);
// Saving only (no load hooks): the same from const references.
CheckpointTensors TensorsOf(const DecoderModel& model, const AdamW* opt);

}  // namespace anneal
