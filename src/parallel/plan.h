// ParallelPlan: how one training job is split over its ranks — data (dp), tensor (tp) and pipeline
// (pp) parallelism, ZeRO, the pipeline's stages and schedule. parallelize() in DESIGN.md's sense:
// made once from the model's shape and the layout, validated in one place (exit 2 naming the factor
// and the fix), then each rank asks it for its ModelShard. Pure: no communication, so every rank
// (and a checkpoint writer describing the others) computes the same plan.
//
// Stages are balanced by an estimate of forward FLOPs per token: 24C^2 + 4TC per layer (the four
// projections and the attention scores), plus 2CV for the LM head on the last stage; the embedding
// lookup is free. The partition minimizes the most expensive stage (each stage at least one layer).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "model/config.h"

namespace anneal {

struct ParallelDims {
  int dp = 1, tp = 1, pp = 1;
  int zero = 0;
  int shard_group = 0;          // ZeRO shards within groups of this many dp ranks (0 = dp: no replication)
  int micro_batches = 1;        // per step and data-parallel rank (train.grad_accum)
  std::string schedule = "1f1b";  // 1f1b | gpipe
  int seq_len = 1024;           // T, for the cost estimate
  int batch = 1;                // B per micro-batch
  bool sequence_parallel = false;  // with tp > 1 (model/config.h ModelShard::sp)
};

class ParallelPlan {
 public:
  // Validates the combination against the model (tp divides the heads, pp at most the layers, no
  // ZeRO-2 with pipelining, a known schedule). `model` is returned padded for tp (PaddedFor).
  static Result<ParallelPlan> Make(const ModelConfig& model, const ParallelDims& dims);

  const ModelConfig& model() const { return model_; }
  const ParallelDims& dims() const { return dims_; }
  // Layers [first, second) of each stage.
  const std::vector<std::pair<int, int>>& stages() const { return stages_; }
  ModelShard ShardOf(int pp_rank, int tp_rank) const;
  // The data-parallel ranks ZeRO shards over (dist.shard_group, or dp); the first group's ranks hold
  // every shard once (shard r = dp_rank r), the other groups replicas of them.
  int zero_shards() const { return dims_.shard_group > 0 ? dims_.shard_group : dims_.dp; }
  // ZeRO's shard of data-parallel rank r over a flat vector of `total` values: [begin, begin + count),
  // ceil(total / dp) each, the last ones shorter or empty. Data parallelism shards by it, and
  // checkpoints ask it which ranges each rank wrote.
  static size_t ZeroShardBegin(size_t total, int dp, int r) {
    const size_t per = (total + dp - 1) / dp;
    return std::min(total, per * static_cast<size_t>(r));
  }
  static size_t ZeroShardCount(size_t total, int dp, int r) {
    const size_t b = ZeroShardBegin(total, dp, r);
    return std::min(total, b + (total + dp - 1) / dp) - b;
  }
  // Estimated forward FLOPs per token of each stage (the balancer's costs).
  std::vector<double> StageCosts() const;
  // "stage 0: layers 0-2 (cost 41%), stage 1: layers 3-3 + LM head (59%); slowest/mean 1.18"
  std::string DescribeStages() const;

  // Estimated forward FLOPs per token of one layer and of the LM head.
  // 2 FLOPs per weight of the layer's matrices (GPT-2: 12 C^2 of them) plus attention's 4 T C.
  static double LayerCost(const ModelConfig& c, int T) {
    const double C = c.n_embd, Ckv = c.kv_dim(), F = c.intermediate_size;
    const double mlp = (c.blocks.mlp == MlpKind::kSwiGlu ? 3.0 : 2.0) * C * F;
    return 2.0 * (2.0 * C * C + 2.0 * C * Ckv + mlp) + 4.0 * T * c.n_embd;
  }
  static double HeadCost(const ModelConfig& c) { return 2.0 * c.n_embd * c.vocab_size; }
  // Korthikanti et al. (2022), "Reducing Activation Recomputation in Large Transformer Models": bytes
  // of activations per layer per micro-batch with 16-bit activations and tensor parallelism t without
  // sequence parallelism, sbh(10 + 24/t + 5as/(ht)); their selective recomputation (the attention
  // core) drops the 5as/(ht) term; full recomputation keeps the layer input, 2sbh. With sequence
  // parallelism everything is divided by t: sbh(34/t + 5as/(ht)), 34sbh/t, 2sbh/t. Times `layers`
  // local layers and `slots` micro-batches in flight. For the memory table beside our exact count.
  static double KorthikantiBytes(const ModelConfig& c, int B, int T, int tp, int layers, int slots, Recompute r,
                                 bool sp = false);
  // Contiguous partition of n_layer layers into pp stages minimizing the largest stage cost.
  static std::vector<std::pair<int, int>> Balance(const ModelConfig& c, int T, int pp);

 private:
  ModelConfig model_;
  ParallelDims dims_;
  std::vector<std::pair<int, int>> stages_;
};

}  // namespace anneal
