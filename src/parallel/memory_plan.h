// MemoryPlan: what one rank of a training layout holds in its device's memory, in bytes, from the
// shapes alone — the formula the trainer prints beside its allocator's measured high-water mark, and
// `anneal plan` prints before anything runs (with the largest preset of the family that fits).
//
// Terms (N: the rank's local parameters — its tensor slice and pipeline stage; S: the ranks ZeRO
// shards over, dp or dist.shard_group; e: the compute dtype's bytes, 4 or 2):
//   params       working parameters: e N, with ZeRO-3 e N/S (its shard)
//   gathered     ZeRO-3: the parameter ranges gathered at once, from the model's own gather order
//                (the embeddings and head held through the pass, a layer and the next one prefetched)
//   masters      bf16: the optimizer's fp32 masters, 4 N (ZeRO 0) or 4 N/S
//   grads        ZeRO 0, 1: the model's gradient buffer, e N
//   accumulator  ZeRO 2, 3: the fp32 gradient shard, 4 N/S
//   grad_ranges  ZeRO 2, 3: the gradient range buffers alive at once during backward (as the
//                GradSink hands them out and retires them, kMaxInflight released ranges in flight;
//                a bf16 range is widened into an fp32 one when released — or, reduced as bf16, kept
//                until retired, its shard part widened then), pooled per size
//   fp32_copy    bf16 at ZeRO 0, 1: DataParallel's fp32 copy of the flat vector, 4 N; bf16 at ZeRO 2:
//                one bucket of masters being gathered, 4 min(bucket, N); a bf16 pipeline's first and
//                last stage: the tied embedding's gradient summed in fp32
//   moments      Adam m and v: 8 N, or 8 N/S with ZeRO
//   activations  ModelConfig::ActivationFloats in the compute dtype, its statistics and losses in
//                fp32, token ids, the pipeline's stage buffers, rotary tables
//   checkpoint   extra while a checkpoint or the state hash is taken: bf16 at ZeRO 2 gathers the whole
//                fp32 vector, 4 N; ZeRO-3 saves each rank's range and streams the state hash through
//                one bucket, 4 min(bucket, N); freed after
// Counts the rank with the largest shard (data-parallel rank 0).
#pragma once

#include <cstddef>
#include <string>

#include "model/config.h"
#include "parallel/plan.h"
#include "tensor/dtype.h"

namespace anneal {

struct MemoryTerms {
  double params = 0, gathered = 0, masters = 0, grads = 0, accumulator = 0, grad_ranges = 0, fp32_copy = 0,
         moments = 0, activations = 0, checkpoint = 0;
  // Everything held while training (the checkpoint term excluded).
  double Training() const {
    return params + gathered + masters + grads + accumulator + grad_ranges + fp32_copy + moments + activations;
  }
  // "params 6.5 + gathered 0.4 + ... = 21.3 MB"
  std::string Describe() const;
};

struct MemoryInputs {
  DType dtype = DType::kF32;
  Recompute recompute = Recompute::kNone;
  size_t bucket_floats = 1 << 20;  // dist.bucket_mb in floats
  bool reduce_bf16 = false;        // dist.reduce_dtype = bf16
  bool offload = false;            // train.offload_activations
};

// Rank (pp_rank, tp_rank) of data-parallel rank 0 in `plan`.
MemoryTerms RankMemory(const ParallelPlan& plan, const MemoryInputs& in, int pp_rank = 0, int tp_rank = 0);

}  // namespace anneal
