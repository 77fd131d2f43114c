#include "parallel/plan.h"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace anneal {

std::vector<std::pair<int, int>> ParallelPlan::Balance(const ModelConfig& c, int T, int pp) {
  const int L = c.n_layer;
  const double layer = LayerCost(c, T), head = HeadCost(c);
  // best[s][l]: the smallest possible largest-stage cost putting layers [0, l) on stages [0, s).
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(pp + 1, std::vector<double>(L + 1, inf));
  std::vector<std::vector<int>> cut(pp + 1, std::vector<int>(L + 1, 0));
  best[0][0] = 0;
  for (int s = 1; s <= pp; ++s) {
    for (int l = s; l <= L; ++l) {
      for (int b = s - 1; b < l; ++b) {  // stage s-1 holds layers [b, l)
        if (best[s - 1][b] == inf) continue;
        const double cost = (l - b) * layer + (s == pp && l == L ? head : 0.0);
        const double worst = std::max(best[s - 1][b], cost);
        if (worst < best[s][l]) {  // ties keep the earliest cut: later stages get more layers
          best[s][l] = worst;
          cut[s][l] = b;
        }
      }
    }
  }
  std::vector<std::pair<int, int>> out(pp);
  for (int s = pp, l = L; s >= 1; --s) {
    out[s - 1] = {cut[s][l], l};
    l = cut[s][l];
  }
  return out;
}

Result<ParallelPlan> ParallelPlan::Make(const ModelConfig& model, const ParallelDims& d) {
  auto bad = [](const std::string& m) { return InvalidInput(m); };
  if (d.dp < 1 || d.tp < 1 || d.pp < 1) return bad("dist.dp, dist.tp and dist.pp must each be at least 1");
  if (model.n_head % d.tp != 0) {
    std::string fits;
    for (int t = 1; t <= model.n_head; ++t) {
      if (model.n_head % t == 0) fits += (fits.empty() ? "" : ", ") + std::to_string(t);
    }
    return bad("dist.tp = " + std::to_string(d.tp) + " does not divide model.n_head = " + std::to_string(model.n_head) +
               ": tensor parallelism gives each rank whole attention heads; use dist.tp in {" + fits + "}");
  }
  if (model.n_kv_head % d.tp != 0 && d.tp % model.n_kv_head != 0) {
    return bad("dist.tp = " + std::to_string(d.tp) + " neither divides model.n_kv_head = " +
               std::to_string(model.n_kv_head) + " nor is a multiple of it: tensor parallelism gives each rank whole "
               "key/value heads, or (tp a multiple of n_kv_head) every head to every rank, each using one; choose "
               "such a dist.tp");
  }
  if (model.intermediate_size % d.tp != 0) {
    return bad("dist.tp = " + std::to_string(d.tp) + " does not divide model.intermediate_size = " +
               std::to_string(model.intermediate_size) + ": choose an intermediate_size divisible by dist.tp");
  }
  if (d.pp > model.n_layer) {
    return bad("dist.pp = " + std::to_string(d.pp) + " is more than model.n_layer = " + std::to_string(model.n_layer) +
               ": each pipeline stage needs at least one layer; use dist.pp <= " + std::to_string(model.n_layer));
  }
  if (d.zero >= 2 && d.pp > 1) {
    return bad("dist.zero = " + std::to_string(d.zero) + " with dist.pp = " + std::to_string(d.pp) +
               ": ZeRO-2 and 3 reduce-scatter each micro-batch's gradients while backward produces them (ZeRO-3 "
               "also gathers every layer per micro-batch), but a pipeline "
               "interleaves micro-batches and must first add the tied embedding's gradient across its first and last "
               "stages, so gradients would be communicated once per micro-batch for nothing; use dist.zero = 1 "
               "(optimizer state sharded) with pipeline parallelism");
  }
  if (d.shard_group != 0 && (d.shard_group < 0 || d.dp % d.shard_group != 0)) {
    return bad("dist.shard_group = " + std::to_string(d.shard_group) + " does not divide dp = " + std::to_string(d.dp) +
               ": choose a shard group size that divides the data-parallel ranks (or 0: shard over all of them)");
  }
  if (d.shard_group != 0 && d.shard_group < d.dp && d.zero == 0) {
    return bad("dist.shard_group = " + std::to_string(d.shard_group) +
               " shards ZeRO state within groups, but dist.zero = 0 shards nothing: set dist.zero to 1, 2 or 3");
  }
  if (d.schedule != "1f1b" && d.schedule != "gpipe") {
    return bad("dist.schedule = '" + d.schedule + "' must be 1f1b or gpipe");
  }
  if (d.micro_batches < 1) return bad("train.grad_accum (the micro-batches) must be at least 1");
  if (d.sequence_parallel && d.tp > 1 && (static_cast<int64_t>(d.batch) * d.seq_len) % d.tp != 0) {
    return bad("dist.sequence_parallel with dist.tp = " + std::to_string(d.tp) + " splits the " +
               std::to_string(d.batch) + " x " + std::to_string(d.seq_len) + " positions of a micro-batch into " +
               std::to_string(d.tp) + " equal parts: choose data.batch_size x data.seq_len divisible by dist.tp");
  }
  ParallelPlan p;
  p.model_ = model.PaddedFor(d.tp);
  p.dims_ = d;
  p.stages_ = Balance(p.model_, d.seq_len, d.pp);
  return p;
}

ModelShard ParallelPlan::ShardOf(int pp_rank, int tp_rank) const {
  ModelShard s;
  s.tp = dims_.tp;
  s.tp_rank = tp_rank;
  s.sp = dims_.sequence_parallel;
  s.layer_begin = stages_[pp_rank].first;
  s.layer_end = stages_[pp_rank].second;
  return s;
}

double ParallelPlan::KorthikantiBytes(const ModelConfig& c, int B, int T, int tp, int layers, int slots, Recompute r,
                                      bool sp) {
  const double s = T, b = B, h = c.n_embd, a = c.n_head, t = tp;
  double per_layer = s * b * h * ((sp ? 10.0 / t : 10.0) + 24.0 / t + 5.0 * a * s / (h * t));
  if (r == Recompute::kSelective) per_layer = s * b * h * ((sp ? 10.0 / t : 10.0) + 24.0 / t);
  if (r == Recompute::kFull) per_layer = 2.0 * s * b * h / (sp ? t : 1.0);
  return per_layer * layers * slots;
}

std::vector<double> ParallelPlan::StageCosts() const {
  std::vector<double> out;
  for (size_t s = 0; s < stages_.size(); ++s) {
    out.push_back((stages_[s].second - stages_[s].first) * LayerCost(model_, dims_.seq_len) +
                  (s + 1 == stages_.size() ? HeadCost(model_) : 0.0));
  }
  return out;
}

std::string ParallelPlan::DescribeStages() const {
  const std::vector<double> cost = StageCosts();
  double total = 0, worst = 0;
  for (double c : cost) total += c, worst = std::max(worst, c);
  std::string out;
  for (size_t s = 0; s < stages_.size(); ++s) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%sstage %zu: layers %d-%d%s (%.0f%%)", s ? ", " : "", s, stages_[s].first,
                  stages_[s].second - 1, s + 1 == stages_.size() ? " + LM head" : "", 100.0 * cost[s] / total);
    out += buf;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "; slowest/mean %.2f", worst / (total / cost.size()));
  return out + buf;
}

}  // namespace anneal
