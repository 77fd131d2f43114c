#include "parallel/memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

#include "parallel/pipeline.h"

namespace anneal {

namespace {

// Buffers taken from and returned to per-size pools, as DataParallel's TakeBuffer does: bytes
// allocated in all (a pool never frees) and bytes alive at once.
class PoolModel {
 public:
  void Take(size_t bytes) {
    if (pool_[bytes] > 0) {
      --pool_[bytes];
    } else {
      allocated_ += bytes;
    }
    live_ += bytes;
    peak_live_ = std::max(peak_live_, live_);
  }
  void Give(size_t bytes) {
    ++pool_[bytes];
    live_ -= bytes;
  }
  double allocated() const { return static_cast<double>(allocated_); }

 private:
  std::map<size_t, int> pool_;
  size_t allocated_ = 0, live_ = 0, peak_live_ = 0;
};

struct Ranges {
  size_t emb_lo, emb_hi, head_lo, head_hi;
  std::vector<size_t> layer;  // layer i = [layer[i], layer[i+1]); layer[nl] = head_lo
  size_t Layer(int i) const { return layer[i + 1] - layer[i]; }
};

Ranges RangesOf(const ParamLayout& layout, int layer_begin, int nl) {
  Ranges r;
  for (int i = 0; i <= nl; ++i) r.layer.push_back(layout.LayerOffset(layer_begin + i));
  r.emb_lo = 0;
  r.emb_hi = r.layer[0];
  r.head_lo = r.layer[nl];
  r.head_hi = layout.total_floats();
  return r;
}

// ZeRO-3: the model's gathers of one micro-step (decoder.cc ForwardStage / BackwardStage), each
// range's buffer pooled by size (DataParallel's param_pool_).
double GatheredBytes(const Ranges& r, int nl, size_t e) {
  PoolModel pool;
  std::map<size_t, size_t> held;  // range begin -> bytes
  auto gather = [&](size_t lo, size_t hi) {
    if (lo >= hi || held.count(lo)) return;
    held[lo] = (hi - lo) * e;
    pool.Take((hi - lo) * e);
  };
  auto free = [&](size_t lo) {
    auto it = held.find(lo);
    if (it == held.end()) return;
    pool.Give(it->second);
    held.erase(it);
  };
  auto end_of = [&](int i) { return i < nl ? r.layer[i + 1] : r.head_hi; };
  gather(r.emb_lo, r.emb_hi);
  gather(r.layer[0], end_of(0));  // the prefetch of layer 0 (or the head)
  for (int i = 0; i < nl; ++i) {
    gather(r.layer[i], end_of(i));
    gather(r.layer[i + 1], end_of(i + 1));
    free(r.layer[i]);
  }
  gather(r.head_lo, r.head_hi);
  if (nl > 0) gather(r.layer[nl - 1], end_of(nl - 1));
  for (int i = nl - 1; i >= 0; --i) {
    gather(r.layer[i], end_of(i));
    if (i > 0) gather(r.layer[i - 1], end_of(i - 1));
    free(r.layer[i]);
  }
  return pool.allocated();
}

// ZeRO 2, 3: the GradSink's range buffers in one backward (DataParallel::Acquire / Release /
// RetireOldest with kMaxInflight = 2 released ranges in flight).
double GradRangeBytes(const Ranges& r, int nl, bool narrow, bool reduce_narrow, size_t shard_lo, size_t shard_hi) {
  constexpr size_t kMaxInflight = 2;
  PoolModel f32, bf16;
  std::map<size_t, size_t> acquired;  // begin -> floats
  std::vector<std::pair<size_t, size_t>> inflight;  // (begin, floats), oldest first
  auto retire = [&]() {
    const auto [lo0, n] = inflight.front();
    inflight.erase(inflight.begin());
    if (reduce_narrow) {  // this rank's part widened into a pooled fp32 buffer, added, given back
      const size_t lo = std::max(lo0, shard_lo), hi = std::min(lo0 + n, shard_hi);
      if (lo < hi) {
        f32.Take((hi - lo) * 4);
        f32.Give((hi - lo) * 4);
      }
      bf16.Give(n * 2);
      return;
    }
    f32.Give(n * 4);
  };
  auto acquire = [&](size_t lo, size_t hi) {
    if (lo >= hi) return;
    acquired[lo] = hi - lo;
    (narrow ? bf16 : f32).Take((hi - lo) * (narrow ? 2 : 4));
  };
  auto release = [&](size_t lo) {
    auto it = acquired.find(lo);
    if (it == acquired.end()) return;
    const size_t n = it->second;
    acquired.erase(it);
    if (narrow && !reduce_narrow) {
      f32.Take(n * 4);
      bf16.Give(n * 2);
    }
    inflight.push_back({lo, n});
    while (inflight.size() > kMaxInflight) retire();
  };
  acquire(r.emb_lo, r.emb_hi);
  acquire(r.head_lo, r.head_hi);
  release(r.head_lo);
  for (int i = nl - 1; i >= 0; --i) {
    acquire(r.layer[i], r.layer[i + 1]);
    release(r.layer[i]);
  }
  release(r.emb_lo);
  while (!inflight.empty()) retire();  // EndBackward
  return f32.allocated() + bf16.allocated();
}

// Activations in bytes: ActivationFloats in the compute dtype except the elements that stay fp32 or
// wider whatever it is (norm statistics, attention log-sum-exp, losses, the vocabulary-parallel
// loss's f64 statistics), plus token ids, the pipeline's stage buffers and rotary tables.
double ActivationBytes(const ModelConfig& c, const ModelShard& s, int B, int T, Recompute rc, int slots, size_t e,
                       int stage, int stages, bool offload) {
  const double all = static_cast<double>(c.ActivationFloats(B, T, rc, s, slots, offload));
  const size_t N = static_cast<size_t>(B) * T, R = s.seq_parallel() ? N / s.tp : N;
  const size_t L = static_cast<size_t>(s.end(c) - s.layer_begin), H = c.n_head / s.tp;
  const size_t stats = c.blocks.norm == NormKind::kRmsNorm ? 1 : 2;
  const size_t per_layer = 2 * stats * R + N * H;
  const size_t layers = rc == Recompute::kFull ? 1 : static_cast<size_t>(slots) * L;
  double wide = static_cast<double>(layers * per_layer);
  if (s.last(c)) wide += static_cast<double>(slots) * (stats * R + N);
  if (s.tp > 1 && s.last(c)) wide += 2.0 * (2 * N + 2 * N * s.tp);
  double bytes = (all - wide) * static_cast<double>(e) + wide * 4;
  bytes += 8.0 * N * slots;  // token ids and targets (i32)
  const double NC = static_cast<double>(R) * c.n_embd;
  if (stage > 0) bytes += 2 * NC * e;          // the input-gradient send buffers (compute dtype)
  if (stage < stages - 1) bytes += NC * e;     // the output-gradient receive buffer
  if (c.blocks.rotary) bytes += 4.0 * c.max_seq_len * c.head_size();  // cos and sin (maxT, hs/2) each
  return bytes;
}

}  // namespace

std::string MemoryTerms::Describe() const {
  std::string out;
  auto add = [&](const char* name, double v) {
    if (v <= 0) return;
    char b[64];
    std::snprintf(b, sizeof b, "%s%s %.1f", out.empty() ? "" : " + ", name, v / 1e6);
    out += b;
  };
  add("params", params);
  add("gathered", gathered);
  add("masters", masters);
  add("grads", grads);
  add("grad shard", accumulator);
  add("grad ranges", grad_ranges);
  add("fp32 copy", fp32_copy);
  add("moments", moments);
  add("activations", activations);
  char b[96];
  std::snprintf(b, sizeof b, " = %.1f MB", Training() / 1e6);
  out += b;
  if (checkpoint > 0) {
    std::snprintf(b, sizeof b, " (+ %.1f MB while checkpointing)", checkpoint / 1e6);
    out += b;
  }
  return out;
}

MemoryTerms RankMemory(const ParallelPlan& plan, const MemoryInputs& in, int pp_rank, int tp_rank) {
  const ParallelDims& d = plan.dims();
  const ModelConfig& c = plan.model();
  const ModelShard shard = plan.ShardOf(pp_rank, tp_rank);
  const ParamLayout layout(c, shard);
  const int nl = shard.end(c) - shard.layer_begin;
  const Ranges r = RangesOf(layout, shard.layer_begin, nl);
  const size_t N = layout.total_floats(), e = SizeOf(in.dtype);
  const bool bf16 = in.dtype != DType::kF32;
  const bool par = d.dp > 1 || d.zero > 0;  // a DataParallel exists (train/setup.cc)
  const int S = plan.zero_shards();
  const double n = static_cast<double>(N);
  const double shard_n = static_cast<double>(d.zero > 0 ? ParallelPlan::ZeroShardCount(N, S, 0) : N);
  MemoryTerms m;
  m.params = (d.zero == 3 ? shard_n : n) * e;
  if (d.zero == 3) m.gathered = GatheredBytes(r, nl, e);
  if (bf16) m.masters = shard_n * 4;
  if (d.zero < 2) m.grads = n * e;
  if (d.zero >= 2) {
    m.accumulator = shard_n * 4;
    m.grad_ranges = GradRangeBytes(r, nl, bf16, bf16 && in.reduce_bf16, 0, static_cast<size_t>(shard_n));
  }
  if (bf16 && par && d.zero < 2) m.fp32_copy = n * 4;
  if (bf16 && d.zero == 2 && S > 1) m.fp32_copy = static_cast<double>(std::min(in.bucket_floats, N)) * 4;
  if (bf16 && d.pp > 1 && c.tie_embeddings && (shard.first() || shard.last(c))) {  // the tied wte's gradient, summed in fp32
    m.fp32_copy += static_cast<double>(c.padded_vocab / d.tp) * c.n_embd * 4;
  }
  m.moments = shard_n * 8;
  const int slots = PipelineSlots(d.schedule, pp_rank, d.pp, d.micro_batches);
  m.activations = ActivationBytes(c, shard, d.batch, d.seq_len, in.recompute, slots, e, pp_rank, d.pp, in.offload);
  // A checkpoint of sharded bf16 masters (ZeRO 2) gathers the whole fp32 vector; at ZeRO 3 each rank
  // saves its range and the state hash streams the vector through one bucket.
  if (bf16 && d.zero == 2) m.checkpoint = n * 4;
  if (d.zero == 3) m.checkpoint = static_cast<double>(std::min(in.bucket_floats, N)) * 4;
  return m;
}

}  // namespace anneal
