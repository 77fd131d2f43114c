#include "model/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>

#include "core/check.h"
#include "model/box.h"
#include "model/rope.h"
#include "tensor/device_trace.h"
#include "tensor/host_copy.h"

namespace anneal {


DecoderModel::DecoderModel(const ModelConfig& config, Backend& backend, DType compute)
    : DecoderModel(config, backend, ModelShard::Whole(), nullptr, compute) {}

DecoderModel::DecoderModel(const ModelConfig& config, Backend& backend, const ModelShard& shard, LayerParallel* layers,
                           DType compute, FlatBuffers flat)
    : config_(config),
      cd_(compute),
      shard_(shard),
      layout_(config, shard),
      be_(backend),
      st_(backend.DefaultStream()),
      store_(layout_, backend, compute) {
  ANNEAL_CHECK(shard.tp <= 1 || (layers && config.n_head % shard.tp == 0 &&
                                   (config.n_kv_head % shard.tp == 0 || shard.tp % config.n_kv_head == 0) &&
                                   config.intermediate_size % shard.tp == 0 && config.padded_vocab % shard.tp == 0),
               "a tensor-parallel shape ParallelPlan should have refused");
  if (!layers) whole_ = std::make_unique<WholeModelLayers>(config, backend);
  layers_ = layers ? layers : whole_.get();
  nl_ = shard.end(config) - shard.layer_begin;
  Cl_ = config.n_embd / shard.tp;
  // Key/value heads: tp slices of them, or — when tp does not divide n_kv_head (a multiple of it) —
  // every rank holds them all (replicated) and uses the one head its query heads read.
  kv_replicated_ = shard.tp > 1 && config.n_kv_head % shard.tp != 0;
  Ckvl_ = kv_replicated_ ? config.head_size() : config.kv_dim() / shard.tp;
  kv_row0_ = kv_replicated_ ? static_cast<size_t>(shard.tp_rank * config.n_kv_head / shard.tp) * config.head_size() : 0;
  Fl_ = config.intermediate_size / shard.tp;
  Hl_ = config.n_head / shard.tp;
  Vl_ = config.padded_vocab / shard.tp;
  // Each tensor's place, by role, resolved once.
  LayerParams none;
  std::fill(std::begin(none.at), std::end(none.at), kNone);
  lp_.assign(nl_, none);
  for (const ParamInfo& p : layout_.params()) {
    if (p.layer >= 0) {
      lp_[p.layer - shard.layer_begin].at[static_cast<size_t>(p.role)] = p.offset;
      continue;
    }
    switch (p.role) {
      case Role::kEmbedding: wte_ = p.offset; break;
      case Role::kPositions: wpe_ = p.offset; break;
      case Role::kNormFW: normf_w_ = p.offset; break;
      case Role::kNormFB: normf_b_ = p.offset; break;
      case Role::kLmHead: lm_head_ = p.offset; break;
      default: ANNEAL_FAIL("a family's tensor with a layer role outside a layer");
    }
  }
  Status st = flat == FlatBuffers::kBoth ? store_.Allocate()
              : flat == FlatBuffers::kParamsOnly ? store_.AllocateParams()
                                                 : Status::Ok();
  if (!st.ok()) status_ = st;
  if (config.blocks.rotary && status_.ok()) {
    std::vector<float> c, sn;
    RopeTables(config, &c, &sn);
    Alloc(rope_cos_, c.size(), "the rotary cos table (maxT, head size / 2)", DType::kF32);
    Alloc(rope_sin_, sn.size(), "the rotary sin table (maxT, head size / 2)", DType::kF32);
    if (status_.ok()) {
      be_.CopyFromHost(rope_cos_.View(), c.data(), st_);
      be_.CopyFromHost(rope_sin_.View(), sn.data(), st_);
      be_.Synchronize(st_);  // the host tables go out of scope
    }
  }
  slots_.resize(1);
}

DevPtr DecoderModel::ParamPtr(const std::string& name) const {
  const ParamInfo* p = layout_.Find(name);
  ANNEAL_CHECK(p && !source_, "ParamPtr of an unknown parameter, or of a model whose parameters are gathered");
  return store_.params() + p->offset;
}

DevPtr DecoderModel::GradPtr(const std::string& name) {
  const ParamInfo* p = layout_.Find(name);
  ANNEAL_CHECK(p, "GradPtr of an unknown parameter");
  return G(p->offset);
}

DevPtr DecoderModel::G(size_t off) {
  if (!sink_) return store_.grads() + off;
  for (const ActiveRange& r : active_) {
    if (off >= r.begin && off < r.end) return r.data + (off - r.begin);
  }
  ANNEAL_FAIL("a gradient written outside an acquired range: a bug in Backward's ranges");
}

DevPtr DecoderModel::P(size_t off) const {
  if (!source_) return store_.params() + off;
  for (const ActiveRange& r : gathered_) {
    if (off >= r.begin && off < r.end) return r.data + (off - r.begin);
  }
  ANNEAL_FAIL("a parameter read outside a gathered range: a bug in the passes' ranges");
}

void DecoderModel::set_offload(bool on) {
  offload_.reset(on ? new ActivationOffload(be_, st_) : nullptr);
  for (Slot& s : slots_) s.B = s.T = 0;  // reallocate on the next Forward
}

DevPtr DecoderModel::LayerOut(const Slot& s, int i) const {
  const size_t RC = StageFloats(s.B, s.T);
  return s.resid3.ptr() + static_cast<size_t>(offload_ ? i % ModelConfig::kOffloadRing : i) * RC;
}

TensorView DecoderModel::LayerOutView(const Slot& s, int i) const { return M(LayerOut(s, i), StageFloats(s.B, s.T)); }

void DecoderModel::set_param_source(ParamSource* source) {
  source_ = source;
  if (source_) store_.DropParams();
}

void DecoderModel::GatherRange(size_t begin, size_t end) {
  if (!source_ || begin >= end) return;
  for (const ActiveRange& r : gathered_) {
    if (r.begin == begin) return;
  }
  gathered_.push_back({begin, end, source_->Gather(begin, end)});
}

void DecoderModel::PrefetchRange(size_t begin, size_t end) {
  if (!source_ || begin >= end) return;
  for (const ActiveRange& r : gathered_) {
    if (r.begin == begin) return;
  }
  source_->Prefetch(begin, end);
}

void DecoderModel::FreeRange(size_t begin, size_t end) {
  if (!source_ || begin >= end) return;
  std::erase_if(gathered_, [&](const ActiveRange& r) { return r.begin == begin; });
  source_->Free(begin, end);
}

void DecoderModel::FreeRootRanges() {
  FreeRange(0, LayerStart(0));
  FreeRange(LayerStart(nl_), layout_.total_floats());
}

void DecoderModel::set_grad_sink(GradSink* sink) {
  sink_ = sink;
  if (sink_) {
    store_.DropGrads();
  } else if (Status st = store_.AllocateGrads(); !st.ok() && status_.ok()) {
    status_ = st;
  }
}

void DecoderModel::InitWeights(uint64_t seed) { InitWeights(seed, store_.params(), 0, store_.size()); }

void DecoderModel::InitWeights(uint64_t seed, DevPtr dst, size_t begin, size_t end) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float proj_std = 0.02f / std::sqrt(2.0f * static_cast<float>(config_.n_layer));
  HostWrite host(be_, dst, end - begin);
  std::fill(host.data(), host.data() + (end - begin), 0.0f);
  std::vector<float> local;  // one tensor's box, when only part of it is in [begin, end)
  // The whole model's values in canonical order (every rank draws the same stream), each rank
  // keeping its box of each tensor it holds.
  const ParamLayout whole(config_);
  std::vector<float> buf;
  for (const ParamInfo& cp : whole.params()) {
    const ParamInfo* mine = layout_.Find(cp.name);
    const Role r = cp.role;
    const bool is_norm = r == Role::kNorm1W || r == Role::kNorm2W || r == Role::kNormFW;
    const bool is_bias = r == Role::kNorm1B || r == Role::kNorm2B || r == Role::kNormFB || r == Role::kQB ||
                         r == Role::kKB || r == Role::kVB || r == Role::kProjB || r == Role::kFcB || r == Role::kDownB;
    if (is_bias) continue;
    buf.resize(cp.size);
    if (is_norm) {
      std::fill(buf.begin(), buf.end(), 1.0f);
    } else {
      const bool resid_proj = r == Role::kProjW || r == Role::kDownW;
      const float sd = resid_proj ? proj_std : 0.02f;
      for (size_t i = 0; i < cp.size; ++i) buf[i] = sd * normal(rng);  // canonical rows only: padding stays 0
    }
    if (!mine) continue;
    const size_t lo = std::max(begin, mine->offset), hi = std::min(end, mine->offset + mine->stored_size);
    if (lo >= hi) continue;
    const BoxPart whole_box = MakeBoxPart(std::vector<int64_t>(cp.shape.size(), 0), cp.shape);
    const BoxPart my_box = MakeBoxPart(mine->box_offset, mine->box_length);
    if (lo == mine->offset && hi == mine->offset + mine->stored_size) {  // the whole tensor is in range
      CopyOverlap(whole_box, buf.data(), my_box, host.data() + (mine->offset - begin));
      continue;
    }
    local.assign(mine->stored_size, 0.0f);  // padding rows stay 0
    CopyOverlap(whole_box, buf.data(), my_box, local.data());
    std::copy(local.begin() + (lo - mine->offset), local.begin() + (hi - mine->offset), host.data() + (lo - begin));
  }
  host.Commit();
}

void DecoderModel::Alloc(DeviceArray& a, size_t n, const char* what, DType t) {
  Status st = a.Assign(be_, n, what, t);
  if (!st.ok() && status_.ok()) status_ = st;
}

void DecoderModel::AllocLayers(LayerActs* a, size_t n, size_t N, bool own_gelu) {
  const size_t C = config_.n_embd, R = shard_.seq_parallel() ? N / shard_.tp : N, NCl = N * Cl_, NFl = N * Fl_;
  const bool ln = config_.blocks.norm == NormKind::kLayerNorm;
  a->n = n;
  for (auto* v : {&a->ln1, &a->attproj, &a->resid2, &a->ln2, &a->fcproj}) Alloc(*v, n * R * C, "activations (B,T,C)");
  for (auto* v : {&a->q, &a->atty}) Alloc(*v, n * NCl, "attention activations (B,T,C/tp)");
  for (auto* v : {&a->k, &a->v}) Alloc(*v, n * N * Ckvl_, "attention keys and values (B,T,Ckv/tp)");
  for (auto* v : {&a->ln1_rstd, &a->ln2_rstd}) Alloc(*v, n * R, "norm statistics", DType::kF32);
  for (auto* v : {&a->ln1_mean, &a->ln2_mean}) {
    if (ln) Alloc(*v, n * R, "LayerNorm statistics", DType::kF32);
    else v->Reset();
  }
  Alloc(a->lse, n * N * Hl_, "attention log-sum-exp", DType::kF32);
  Alloc(a->fch, n * NFl, "MLP activations (B,T,F/tp)");
  if (config_.blocks.mlp == MlpKind::kSwiGlu) Alloc(a->up, n * NFl, "SwiGLU up activations (B,T,F/tp)");
  else a->up.Reset();
  if (own_gelu) Alloc(a->fch_gelu, n * NFl, "MLP activation outputs (B,T,F/tp)");
  else a->fch_gelu.Reset();
}

void DecoderModel::EnsureSlot(int slot, int B, int T) {
  Slot& s = slots_.at(slot);
  const size_t N = static_cast<size_t>(B) * T, C = config_.n_embd, NC = N * C;
  const size_t R = shard_.seq_parallel() ? N / shard_.tp : N, RC = R * C;  // rows of the residual stream
  ANNEAL_CHECK(!shard_.seq_parallel() || N % shard_.tp == 0, "B*T not a multiple of tp (ParallelPlan checks it)");
  if (s.B != B || s.T != T) {
    s.B = B;
    s.T = T;
    Alloc(s.input, RC, "the stage input (B,T,C)");
    const size_t kept = offload_ ? std::min(nl_, ModelConfig::kOffloadRing) : nl_;
    Alloc(s.resid3, kept * RC, offload_ ? "the device ring of layer outputs (3,B,T,C)" : "the layers' outputs (L,B,T,C)");
    if (offload_) {
      Status st = offload_->Reserve(nl_, RC * SizeOf(cd_));
      if (!st.ok() && status_.ok()) status_ = st;
    }
    Alloc(s.tokens, N, "tokens", DType::kI32);
    Alloc(s.targets, N, "targets", DType::kI32);
    if (recompute_ == Recompute::kFull) s.layers = LayerActs();
    else AllocLayers(&s.layers, nl_, N, recompute_ == Recompute::kNone);
    if (shard_.last(config_)) {
      Alloc(s.lnf, RC, "ln_f output (B,T,C)");
      if (config_.blocks.norm == NormKind::kLayerNorm) Alloc(s.lnf_mean, R, "ln_f statistics", DType::kF32);
      Alloc(s.lnf_rstd, R, "ln_f statistics", DType::kF32);
      Alloc(s.logits, N * Vl_, "the logits (B,T,Vp/tp)");
      Alloc(s.losses, N, "the losses (B,T)", DType::kF32);
    }
  }
  // Buffers shared by the slots: sized for the latest shape.
  if (scratch_.N != N) {
    Scratch& d = scratch_;
    d.N = N;
    Alloc(d.dresidual, RC, "gradient scratch (B,T,C)");
    Alloc(d.dln, NC, "gradient scratch (B,T,C)");
    if (Status st = layers_->Prepare(N); !st.ok() && status_.ok()) status_ = st;
    for (auto* v : {&d.dq, &d.datty}) Alloc(*v, N * Cl_, "attention gradient scratch");
    for (auto* v : {&d.dk, &d.dv}) Alloc(*v, N * Ckvl_, "attention gradient scratch");
    // replicated key/value heads: this micro-batch's k and v weight gradients, summed over the group
    if (kv_replicated_) Alloc(d.dkv_w, 2 * KvWeightFloats(), "replicated key/value weight gradients");
    else d.dkv_w.Reset();
    for (auto* v : {&d.dfch, &d.dfch_gelu}) Alloc(*v, N * Fl_, "MLP gradient scratch");
    if (config_.blocks.mlp == MlpKind::kSwiGlu) Alloc(d.dup, N * Fl_, "SwiGLU gradient scratch");
    else d.dup.Reset();
    if (recompute_ == Recompute::kFull) AllocLayers(&shared_, 1, N, true);
    else shared_ = LayerActs();
    if (recompute_ == Recompute::kSelective) Alloc(gelu_shared_, N * Fl_, "the shared MLP activation buffer");
    else gelu_shared_.Reset();
  }
}


Status KvCache::Allocate(Backend& b, const ModelConfig& c, DType t, int want) {
  rows = want > 0 && want < c.max_seq_len ? want : c.max_seq_len;
  const size_t n = static_cast<size_t>(c.n_layer) * rows * c.kv_dim();
  ANNEAL_RETURN_IF_ERROR(k.Assign(b, n, "the key cache (L, maxT, Ckv)", t));
  ANNEAL_RETURN_IF_ERROR(v.Assign(b, n, "the value cache (L, maxT, Ckv)", t));
  return scores.Assign(b, rows, "decode attention scores");
}

void DecoderModel::LayerForward(Slot& sl, int i, LayerActs& a, int li, KvCache* kv, int pos) {
  const int B = sl.B, T = sl.T, C = config_.n_embd, Ckv = config_.kv_dim();
  const int N = B * T;
  const int R = shard_.seq_parallel() ? N / shard_.tp : N;  // rows of the residual stream this rank holds
  const size_t NC = static_cast<size_t>(R) * C, NCl = static_cast<size_t>(N) * Cl_, NFl = static_cast<size_t>(N) * Fl_;
  const size_t NCkvl = static_cast<size_t>(N) * Ckvl_;
  const LayerParams& w = lp_[i];
  DevPtr residual = i == 0 ? sl.input.ptr() : LayerOut(sl, i - 1);  // (R,C)
  DevPtr ln1 = L(a.ln1, li, NC);
  DevPtr q = L(a.q, li, NCl);
  const size_t cache_layer = kv ? static_cast<size_t>(kv->rows) * Ckv : 0;  // one layer of the decode cache
  DevPtr kc = kv ? L(kv->k, shard_.layer_begin + i, cache_layer) : DevPtr{};
  DevPtr vc = kv ? L(kv->v, shard_.layer_begin + i, cache_layer) : DevPtr{};
  DevPtr kk = kv ? kc + static_cast<size_t>(pos) * Ckv : L(a.k, li, NCkvl);  // decoding: the cache's row pos
  DevPtr v = kv ? vc + static_cast<size_t>(pos) * Ckv : L(a.v, li, NCkvl);
  DevPtr atty = L(a.atty, li, NCl);
  DevPtr attproj = L(a.attproj, li, NC);
  DevPtr resid2 = L(a.resid2, li, NC);
  DevPtr ln2 = L(a.ln2, li, NC);
  DevPtr fch = L(a.fch, li, NFl);
  DevPtr fch_gelu = recompute_ == Recompute::kSelective ? gelu_shared_.ptr() : L(a.fch_gelu, li, NFl);
  DevPtr fcproj = L(a.fcproj, li, NC);
  DevPtr resid3 = LayerOut(sl, i);
  // ln1 (B,T,C) = norm(residual)
  NormForward(ln1, L(a.ln1_mean, li, R), L(a.ln1_rstd, li, R), residual, w[Role::kNorm1W], w[Role::kNorm1B], R);
  // q (B,T,Cl), k, v (B,T,Ckv/tp) = ln1 @ W^T (+ b): this rank's heads (column-parallel; every row, gathered)
  DevPtr ln1_all = layers_->ColumnInput(ln1, N);
  for (const auto& [out, wr, br, width, r0] :
       {std::tuple{q, Role::kQW, Role::kQB, Cl_, size_t{0}}, {kk, Role::kKW, Role::kKB, Ckvl_, kv_row0_},
        {v, Role::kVW, Role::kVB, Ckvl_, kv_row0_}}) {
    be_.LinearForward(st_, M(out, N, width), M(ln1_all, N, C), M(P(w[wr]) + r0 * C, width, C),
                      Bias(w[br] == kNone ? kNone : w[br] + r0, width));
  }
  if (config_.blocks.rotary) RotateQK(q, kk, B, T, kv ? pos : 0, false);
  // atty (B,T,Cl) = causal attention over the Hl local heads; lse (B,Hl,T)
  if (kv) {  // decoding: this position's query against the cached positions 0..pos
    be_.AttentionDecode(st_, M(atty, C), M(q, C), M(kc, pos + 1, Ckv), M(vc, pos + 1, Ckv),
                        M(kv->scores.ptr(), kv->rows), Hl_);
  } else {
    be_.AttentionForward(st_, M3(atty, B, T, Cl_),
                         M(L(a.lse, li, static_cast<size_t>(N) * Hl_), static_cast<int64_t>(N) * Hl_), M3(q, B, T, Cl_),
                         M3(kk, B, T, Ckvl_), M3(v, B, T, Ckvl_), Hl_);
  }
  // attproj (B,T,C) = atty @ Wproj^T + b (row-parallel: partial sums added across the group, then b)
  RowParallelLinear(attproj, atty, w[Role::kProjW], w[Role::kProjB], N, Cl_);
  // resid2 = residual + attproj; ln2 (B,T,C) = norm(resid2)
  ResidualNormForward(resid2, ln2, L(a.ln2_mean, li, R), L(a.ln2_rstd, li, R), residual, attproj, w[Role::kNorm2W],
                      w[Role::kNorm2B], R);
  // fch (B,T,Fl) = ln2 @ Wfc^T + b (SwiGLU: the gate, and up beside it); fch_gelu = the activation
  DevPtr ln2_all = layers_->ColumnInput(ln2, N);
  if (config_.blocks.mlp == MlpKind::kGelu) {
    be_.LinearForward(st_, M(fch, N, Fl_), M(ln2_all, N, C), M(P(w[Role::kFcW]), Fl_, C), Bias(w[Role::kFcB], Fl_),
                      M(fch_gelu, N, Fl_));
  } else {
    DevPtr up = L(a.up, li, NFl);
    be_.LinearForward(st_, M(fch, N, Fl_), M(ln2_all, N, C), M(P(w[Role::kFcW]), Fl_, C), Bias(w[Role::kFcB], Fl_));
    be_.LinearForward(st_, M(up, N, Fl_), M(ln2_all, N, C), M(P(w[Role::kUpW]), Fl_, C), TV());
    MlpActivation(fch_gelu, fch, up, NFl);
  }
  // fcproj (B,T,C) = fch_gelu @ Wproj^T + b (row-parallel); resid3 = resid2 + fcproj
  RowParallelLinear(fcproj, fch_gelu, w[Role::kDownW], w[Role::kDownB], N, Fl_);
  be_.ResidualForward(st_, M(resid3, NC), M(resid2, NC), M(fcproj, NC));
}

void DecoderModel::RowParallelLinear(DevPtr out, DevPtr inp, size_t w, size_t b, int N, int K) {
  layers_->RowLinear(out, inp, P(w), b == kNone ? DevPtr{} : P(b), N, K, scratch_.dln.ptr());
}

void DecoderModel::NormForward(DevPtr out, DevPtr mean, DevPtr rstd, DevPtr inp, size_t w, size_t b, int rows) {
  const int C = config_.n_embd;
  if (config_.blocks.norm == NormKind::kLayerNorm) {
    be_.LayerNormForward(st_, M(out, rows, C), M(mean, rows), M(rstd, rows), M(inp, rows, C), M(P(w), C), M(P(b), C));
  } else {
    be_.RmsNormForward(st_, M(out, rows, C), M(rstd, rows), M(inp, rows, C), M(P(w), C), config_.norm_eps);
  }
}

void DecoderModel::ResidualNormForward(DevPtr resid, DevPtr out, DevPtr mean, DevPtr rstd, DevPtr a, DevPtr b,
                                       size_t w, size_t bias, int rows) {
  const int C = config_.n_embd;
  if (config_.blocks.norm == NormKind::kLayerNorm) {
    be_.ResidualLayerNormForward(st_, M(resid, rows, C), M(out, rows, C), M(mean, rows), M(rstd, rows), M(a, rows, C),
                                 M(b, rows, C), M(P(w), C), M(P(bias), C));
  } else {
    be_.ResidualForward(st_, M(resid, static_cast<int64_t>(rows) * C), M(a, static_cast<int64_t>(rows) * C),
                        M(b, static_cast<int64_t>(rows) * C));
    be_.RmsNormForward(st_, M(out, rows, C), M(rstd, rows), M(resid, rows, C), M(P(w), C), config_.norm_eps);
  }
}

void DecoderModel::NormBackward(DevPtr dinp, size_t w, size_t b, DevPtr dout, DevPtr inp, DevPtr mean, DevPtr rstd,
                                int rows) {
  layers_->NormBackward(config_.blocks.norm, dinp, G(w), b == kNone ? DevPtr{} : G(b), dout, inp, P(w), mean, rstd, rows);
}

void DecoderModel::RotateQK(DevPtr q, DevPtr k, int B, int T, int pos0, bool inverse) {
  const int64_t half = config_.head_size() / 2;
  const TensorView cos = M(rope_cos_.ptr() + static_cast<size_t>(pos0) * half, T, half);
  const TensorView sin = M(rope_sin_.ptr() + static_cast<size_t>(pos0) * half, T, half);
  be_.Rotary(st_, M3(q, B, T, Cl_), cos, sin, Hl_, inverse);
  be_.Rotary(st_, M3(k, B, T, Ckvl_), cos, sin, Ckvl_ / config_.head_size(), inverse);
}

void DecoderModel::MlpActivation(DevPtr out, DevPtr fch, DevPtr up, size_t n) {
  if (config_.blocks.mlp == MlpKind::kGelu) be_.GeluForward(st_, M(out, n), M(fch, n));
  else be_.SwiGluForward(st_, M(out, n), M(fch, n), M(up, n));
}

DevPtr DecoderModel::DecodeStep(int32_t token, int pos, KvCache& cache) {
  ANNEAL_CHECK(!source_, "decoding reads the whole parameter vector");
  ANNEAL_CHECK(shard_.first() && shard_.last(config_) && shard_.tp <= 1 && pos >= 0 && pos < cache.rows,
               "DecodeStep on a shard, or at a position outside the cache");
  EnsureSlot(0, 1, 1);
  if (!status_.ok()) return DevPtr{};
  Slot& s = slots_[0];
  const int C = config_.n_embd;
  // input (1,C) = wte[token] (+ wpe[pos])
  be_.CopyFromHost(s.tokens.View(), &token, st_);
  layers_->EmbeddingForward(s.input.ptr(), s.tokens.i32(), P(wte_),
                         wpe_ == kNone ? DevPtr{} : P(wpe_) + static_cast<size_t>(pos) * C, 1, 1, scratch_.dln.ptr());
  for (int i = 0; i < nl_; ++i) LayerForward(s, i, ActsOf(s), recompute_ == Recompute::kFull ? 0 : i, &cache, pos);
  NormForward(s.lnf.ptr(), s.lnf_mean.ptr(), s.lnf_rstd.ptr(), OutputOf(0), normf_w_, normf_b_, 1);
  be_.LinearForward(st_, M(s.logits.ptr(), 1, Vl_), M(s.lnf.ptr(), 1, C), M(P(HeadWeight()), Vl_, C), TV());
  return s.logits.ptr();
}

DevPtr DecoderModel::StageInput(int slot, int B, int T) {
  EnsureSlot(slot, B, T);
  return slots_[slot].input.ptr();
}

DevPtr DecoderModel::OutputOf(int slot) const {
  const Slot& s = slots_.at(slot);
  return nl_ > 0 ? LayerOut(s, nl_ - 1) : s.input.ptr();
}


double DecoderModel::Forward(const int32_t* tokens, const int32_t* targets, int B, int T, float grad_scale) {
  ANNEAL_CHECK(shard_.first() && shard_.last(config_), "a pipeline stage uses ForwardStage");
  return ForwardStage(0, tokens, targets, B, T, grad_scale);
}

double DecoderModel::ForwardStage(int slot, const int32_t* tokens, const int32_t* targets, int B, int T,
                              float grad_scale) {
  EnsureSlot(slot, B, T);
  if (!status_.ok()) return 0;  // an allocation failed: the caller reports status()
  Slot& s = slots_[slot];
  const int C = config_.n_embd;
  const int N = B * T;
  const int R = shard_.seq_parallel() ? N / shard_.tp : N;  // rows of the residual stream this rank holds
  GatherRange(0, LayerStart(0));  // source mode: the embeddings (and a tied head) for the whole pass
  PrefetchRange(LayerStart(0), RangeEnd(0));
  if (shard_.first()) {
    device_trace::Span span(be_.timing_marks(), st_, "forward", "embedding");
    // input (R,C) = wte[tokens] + wpe[t] (the vocabulary-parallel form: this slice's rows, summed)
    be_.CopyFromHost(s.tokens.View(), tokens, st_);
    layers_->EmbeddingForward(s.input.ptr(), s.tokens.i32(), P(wte_), wpe_ == kNone ? DevPtr{} : P(wpe_), B, T,
                           scratch_.dln.ptr());
  }
  for (int i = 0; i < nl_; ++i) {
    GatherRange(LayerStart(i), RangeEnd(i));
    PrefetchRange(LayerStart(i + 1), RangeEnd(i + 1));  // the next layer, or the head
    device_trace::Span span(be_.timing_marks(), st_, "forward", "h.", shard_.layer_begin + i);
    if (offload_) offload_->BeforeWrite(i);
    LayerForward(s, i, ActsOf(s), recompute_ == Recompute::kFull ? 0 : i);
    if (offload_ && grad_scale != 0.0f) offload_->CopyOut(i, LayerOutView(s, i));  // for the backward
    FreeRange(LayerStart(i), RangeEnd(i));
  }
  GatherRange(LayerStart(nl_), RangeEnd(nl_));
  if (!shard_.last(config_)) {
    if (grad_scale == 0.0f) FreeRootRanges();
    return 0;
  }
  device_trace::Span span(be_.timing_marks(), st_, "forward", "lm head + loss");
  be_.CopyFromHost(s.targets.View(), targets, st_);
  const DevPtr last = OutputOf(slot);
  NormForward(s.lnf.ptr(), s.lnf_mean.ptr(), s.lnf_rstd.ptr(), last, normf_w_, normf_b_, R);
  // logits (B,T,Vl) = lnf @ head^T (wte when tied; this rank's vocabulary slice; every row); padded rows are zero
  be_.LinearForward(st_, M(s.logits.ptr(), N, Vl_), M(layers_->ColumnInput(s.lnf.ptr(), N), N, C),
                    M(P(HeadWeight()), Vl_, C), TV());
  // losses (B,T); with grad_scale the logits become their gradient in place
  const double total = layers_->Loss(s.logits.ptr(), s.losses.ptr(), s.targets.i32(), N, grad_scale);
  s.have_grad_logits = grad_scale != 0.0f;
  if (grad_scale == 0.0f) FreeRootRanges();  // else Backward frees them
  return total / N;
}

size_t DecoderModel::ActivationFloatsAllocated() const {
  size_t n = 0;
  auto layers = [&](const LayerActs& a) {
    for (const auto* v : {&a.ln1, &a.ln1_mean, &a.ln1_rstd, &a.q, &a.k, &a.v, &a.atty, &a.lse, &a.attproj, &a.resid2,
                          &a.ln2, &a.ln2_mean, &a.ln2_rstd, &a.fch, &a.up, &a.fch_gelu, &a.fcproj}) {
      n += v->size();
    }
  };
  for (const Slot& s : slots_) {
    for (const auto* v : {&s.input, &s.resid3, &s.lnf, &s.lnf_mean, &s.lnf_rstd, &s.logits, &s.losses}) n += v->size();
    layers(s.layers);
  }
  layers(shared_);
  n += gelu_shared_.size();
  const Scratch& d = scratch_;
  for (const auto* v : {&d.dresidual, &d.dln, &d.dq, &d.dk, &d.dv, &d.datty, &d.dfch, &d.dfch_gelu, &d.dup, &d.dkv_w}) {
    n += v->size();
  }
  return n + layers_->ScratchFloats();  // the tensor-parallel layers' gathers and statistics
}

void DecoderModel::ZeroGrad() {
  store_.ZeroGrads(st_);
}

void DecoderModel::Backward() {
  ANNEAL_CHECK(shard_.first() && shard_.last(config_), "a pipeline stage uses BackwardStage");
  BackwardStage(0, DevPtr{});
}

// Where local layer i's parameters start (i == nl_: ln_f, or the end): the ranges backward hands to
// the grad-ready hook or the GradSink.
size_t DecoderModel::LayerStart(int i) const { return layout_.LayerOffset(shard_.layer_begin + i); }

void DecoderModel::AcquireRange(size_t begin, size_t end) {
  if (sink_ && begin < end) active_.push_back({begin, end, sink_->Acquire(begin, end)});
}

void DecoderModel::RangeReady(size_t begin, size_t end) {
  if (begin >= end) return;
  if (grad_ready_) grad_ready_(begin, end);
  if (sink_) {
    std::erase_if(active_, [&](const ActiveRange& r) { return r.begin == begin; });
    sink_->Release(begin, end);
  }
}

void DecoderModel::BackwardStage(int slot, DevPtr dout) {
  if (!status_.ok()) return;
  Slot& s = slots_.at(slot);
  const bool last = shard_.last(config_);
  ANNEAL_CHECK(!last || s.have_grad_logits, "ForwardStage(..., grad_scale != 0) must come first");
  s.have_grad_logits = false;
  const int N = s.B * s.T;
  const int R = shard_.seq_parallel() ? N / shard_.tp : N;  // rows of the residual stream this rank holds
  const size_t NC = static_cast<size_t>(R) * config_.n_embd;
  // Sink mode: the embeddings' and ln_f's ranges first (wte takes the LM head's gradient now and the
  // encoder's at the very end), then each layer's just before its backward.
  AcquireRange(0, LayerStart(0));
  AcquireRange(LayerStart(nl_), layout_.total_floats());
  GatherRange(0, LayerStart(0));  // source mode: held since the forward
  GatherRange(LayerStart(nl_), RangeEnd(nl_));
  if (nl_ > 0) PrefetchRange(LayerStart(nl_ - 1), RangeEnd(nl_ - 1));
  if (last) {
    device_trace::Span span(be_.timing_marks(), st_, "backward", "lm head + ln_f");
    HeadBackward(s, slot);
  } else {
    be_.Copy(st_, M(scratch_.dresidual.ptr(), NC), M(dout, NC));
  }
  RangeReady(LayerStart(nl_), layout_.total_floats());
  for (int i = nl_ - 1; i >= 0; --i) {
    AcquireRange(LayerStart(i), LayerStart(i + 1));
    GatherRange(LayerStart(i), RangeEnd(i));
    if (i > 0) PrefetchRange(LayerStart(i - 1), RangeEnd(i - 1));
    device_trace::Span span(be_.timing_marks(), st_, "backward", "h.", shard_.layer_begin + i);
    LayerBackward(s, i);
    FreeRange(LayerStart(i), RangeEnd(i));
    RangeReady(LayerStart(i), LayerStart(i + 1));
  }
  if (shard_.first()) {
    device_trace::Span span(be_.timing_marks(), st_, "backward", "embedding");
    layers_->EmbeddingBackward(G(wte_), wpe_ == kNone ? DevPtr{} : G(wpe_), scratch_.dresidual.ptr(), s.tokens.i32(), s.B,
                            s.T);
  }
  FreeRootRanges();
  RangeReady(0, LayerStart(0));
}

void DecoderModel::ZeroScratch(const DeviceArray& v) {
  be_.Zero(st_, M(v.ptr(), static_cast<int64_t>(v.size())));
}

// The LM head and the final norm: dlnf (B,T,C) = dlogits @ head (summed over the vocabulary slices),
// dhead += dlogits^T @ lnf; then dresidual (R,C) = d(the last layer's output) through the norm.
void DecoderModel::HeadBackward(Slot& s, int slot) {
  Scratch& d = scratch_;
  const int N = s.B * s.T, C = config_.n_embd;
  const int R = shard_.seq_parallel() ? N / shard_.tp : N;
  DevPtr lnf_all = layers_->ColumnInput(s.lnf.ptr(), N);
  be_.LinearBackwardWrite(st_, M(d.dln.ptr(), N, C), M(G(HeadWeight()), Vl_, C), TV(), M(s.logits.ptr(), N, Vl_),
                     M(lnf_all, N, C), M(P(HeadWeight()), Vl_, C));
  // The input gradient of a column-parallel layer: d.dln (N,C) holds this rank's columns' part;
  // ColumnInputGrad sums it over the group into this rank's rows (R,C).
  DevPtr dln_rows = layers_->ColumnInputGrad(d.dln.ptr(), N);
  ZeroScratch(d.dresidual);
  NormBackward(d.dresidual.ptr(), normf_w_, normf_b_, dln_rows, OutputOf(slot), s.lnf_mean.ptr(), s.lnf_rstd.ptr(), R);
}

// Local layer i's backward: scratch_.dresidual holds d(its output) and then d(its input).
void DecoderModel::LayerBackward(Slot& s, int i) {
  Scratch& d = scratch_;
  const int B = s.B, T = s.T, C = config_.n_embd, N = B * T;
  const int R = shard_.seq_parallel() ? N / shard_.tp : N;
  const size_t NC = static_cast<size_t>(R) * C, NFl = static_cast<size_t>(N) * Fl_;
  const LayerParams& w = lp_[i];
  if (offload_) {  // its input back from host memory; the next one's on its way; its output rewritten
    if (i > 0) offload_->EnsureResident(i - 1, LayerOutView(s, i - 1));
    if (i > 1) offload_->Prefetch(i - 2, LayerOutView(s, i - 2));
    offload_->BeforeWrite(i);
  }
  DevPtr residual = i == 0 ? s.input.ptr() : LayerOut(s, i - 1);
  // The layer's activations: kept (index i), or recomputed now into the shared one-layer buffers.
  const int li = recompute_ == Recompute::kFull ? 0 : i;
  LayerActs& a = ActsOf(s);
  if (recompute_ == Recompute::kFull) LayerForward(s, i, shared_, 0);
  const bool swiglu = config_.blocks.mlp == MlpKind::kSwiGlu;
  DevPtr fch = L(a.fch, li, NFl), up = swiglu ? L(a.up, li, NFl) : DevPtr{};
  // resid3 = resid2 + fcproj: d(fcproj) = dresidual
  DevPtr fch_gelu = recompute_ == Recompute::kSelective ? gelu_shared_.ptr() : L(a.fch_gelu, li, NFl);
  if (recompute_ == Recompute::kSelective) MlpActivation(fch_gelu, fch, up, NFl);  // this layer's activation
  // (sequence parallel: the row-parallel layer needs every row's output gradient)
  const TV down_dout = M(layers_->ColumnInput(d.dresidual.ptr(), N), N, C);
  // dfch (B,T,Fl) (and SwiGLU's dup): through the down projection, then the activation
  if (swiglu) {
    be_.LinearBackwardWrite(st_, M(d.dfch_gelu.ptr(), N, Fl_), M(G(w[Role::kDownW]), C, Fl_),
                            BiasGrad(w[Role::kDownB], C), down_dout, M(fch_gelu, N, Fl_), M(P(w[Role::kDownW]), C, Fl_));
    be_.SwiGluBackward(st_, M(d.dfch.ptr(), NFl), M(d.dup.ptr(), NFl), M(fch, NFl), M(up, NFl), M(d.dfch_gelu.ptr(), NFl));
  } else {  // GELU: in the GEMM's epilogue where the backend can
    be_.LinearBackwardGelu(st_, M(d.dfch.ptr(), N, Fl_), M(G(w[Role::kDownW]), C, Fl_), BiasGrad(w[Role::kDownB], C),
                           down_dout, M(fch_gelu, N, Fl_), M(P(w[Role::kDownW]), C, Fl_), M(fch, N, Fl_));
  }
  DevPtr ln2_all = layers_->ColumnInput(L(a.ln2, li, NC), N);
  be_.LinearBackwardWrite(st_, M(d.dln.ptr(), N, C), M(G(w[Role::kFcW]), Fl_, C), BiasGrad(w[Role::kFcB], Fl_),
                     M(d.dfch.ptr(), N, Fl_), M(ln2_all, N, C), M(P(w[Role::kFcW]), Fl_, C));
  if (swiglu) {
    be_.LinearBackward(st_, M(d.dln.ptr(), N, C), M(G(w[Role::kUpW]), Fl_, C), TV(), M(d.dup.ptr(), N, Fl_),
                       M(ln2_all, N, C), M(P(w[Role::kUpW]), Fl_, C));
  }
  // column-parallel input: the slices' contributions add up
  DevPtr dln2 = layers_->ColumnInputGrad(d.dln.ptr(), N);
  // dresidual += norm 2's backward: now d(resid2)
  NormBackward(d.dresidual.ptr(), w[Role::kNorm2W], w[Role::kNorm2B], dln2, L(a.resid2, li, NC), L(a.ln2_mean, li, R),
               L(a.ln2_rstd, li, R), R);
  AttentionBlockBackward(s, i, li, a);
  DevPtr dln1 = layers_->ColumnInputGrad(d.dln.ptr(), N);
  // dresidual += norm 1's backward: now d(residual), the previous layer's output
  NormBackward(d.dresidual.ptr(), w[Role::kNorm1W], w[Role::kNorm1B], dln1, residual, L(a.ln1_mean, li, R),
               L(a.ln1_rstd, li, R), R);
}

// resid2 = residual + attproj(attention(q, k, v of ln1)): from d(attproj) = dresidual down to this
// rank's columns' part of d(ln1) in scratch_.dln.
void DecoderModel::AttentionBlockBackward(Slot& s, int i, int li, LayerActs& a) {
  Scratch& d = scratch_;
  const int B = s.B, T = s.T, C = config_.n_embd, N = B * T;
  const int R = shard_.seq_parallel() ? N / shard_.tp : N;
  const size_t NC = static_cast<size_t>(R) * C, NCl = static_cast<size_t>(N) * Cl_;
  const size_t NCkvl = static_cast<size_t>(N) * Ckvl_;
  const LayerParams& w = lp_[i];
  be_.LinearBackwardWrite(st_, M(d.datty.ptr(), N, Cl_), M(G(w[Role::kProjW]), C, Cl_), BiasGrad(w[Role::kProjB], C),
                     M(layers_->ColumnInput(d.dresidual.ptr(), N), N, C), M(L(a.atty, li, NCl), N, Cl_),
                     M(P(w[Role::kProjW]), C, Cl_));
  // dq (B,T,Cl), dk, dv (B,T,Ckv/tp): of the rotated q and k the attention saw
  be_.AttentionBackward(st_, M3(d.dq.ptr(), B, T, Cl_), M3(d.dk.ptr(), B, T, Ckvl_), M3(d.dv.ptr(), B, T, Ckvl_),
                        M3(d.datty.ptr(), B, T, Cl_), M3(L(a.q, li, NCl), B, T, Cl_), M3(L(a.k, li, NCkvl), B, T, Ckvl_),
                        M3(L(a.v, li, NCkvl), B, T, Ckvl_), M3(L(a.atty, li, NCl), B, T, Cl_),
                        M(L(a.lse, li, static_cast<size_t>(N) * Hl_), static_cast<int64_t>(N) * Hl_), Hl_);
  // back through the rotation: the gradient of the projections' outputs
  if (config_.blocks.rotary) RotateQK(d.dq.ptr(), d.dk.ptr(), B, T, 0, true);
  DevPtr ln1 = layers_->ColumnInput(L(a.ln1, li, NC), N);
  be_.LinearBackwardWrite(st_, M(d.dln.ptr(), N, C), M(G(w[Role::kQW]), Cl_, C), BiasGrad(w[Role::kQB], Cl_),
                     M(d.dq.ptr(), N, Cl_), M(ln1, N, C), M(P(w[Role::kQW]), Cl_, C));
  const size_t kvw = KvWeightFloats(), kvd = static_cast<size_t>(config_.kv_dim());
  if (kv_replicated_) ZeroScratch(d.dkv_w);
  for (const auto& [dx, wr, br, j] : {std::tuple{d.dk.ptr(), Role::kKW, Role::kKB, 0}, {d.dv.ptr(), Role::kVW, Role::kVB, 1}}) {
    // replicated: this rank's head's rows of a scratch copy (rows of the other heads stay 0), summed
    // over the group (each head's ranks add their parts), then added to every rank's whole gradient
    DevPtr gw = kv_replicated_ ? d.dkv_w.ptr() + j * kvw : G(w[wr]);
    const bool bias = w[br] != kNone;
    DevPtr gb = !bias ? DevPtr{} : kv_replicated_ ? gw + kvd * config_.n_embd : G(w[br]);
    be_.LinearBackward(st_, M(d.dln.ptr(), N, C), M(gw + kv_row0_ * C, Ckvl_, C),
                       bias ? M(gb + kv_row0_, Ckvl_) : TV(), M(dx, N, Ckvl_), M(ln1, N, C),
                       M(P(w[wr]) + kv_row0_ * C, Ckvl_, C));
    if (!kv_replicated_) continue;
    layers_->SumOverGroup(gw, kvw);
    be_.Accumulate(st_, M(G(w[wr]), kvd * config_.n_embd), M(gw, kvd * config_.n_embd));
    if (bias) be_.Accumulate(st_, M(G(w[br]), kvd), M(gb, kvd));
  }
}

// Floats of one replicated key/value projection's gradient scratch: the weight (and its bias).
size_t DecoderModel::KvWeightFloats() const {
  const size_t kvd = static_cast<size_t>(config_.kv_dim());
  return kvd * config_.n_embd + (lp_.empty() || lp_[0][Role::kKB] == kNone ? 0 : kvd);
}

}  // namespace anneal
