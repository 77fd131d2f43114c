#include "model/gpt.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

#include "model/box.h"
#include "tensor/device_trace.h"
#include "tensor/host_copy.h"

namespace anneal {


GptModel::GptModel(const GptConfig& config, Backend& backend, DType compute)
    : GptModel(config, backend, ModelShard::Whole(), nullptr, compute) {}

GptModel::GptModel(const GptConfig& config, Backend& backend, const ModelShard& shard, LayerParallel* layers,
                   DType compute)
    : config_(config),
      cd_(compute),
      shard_(shard),
      layout_(config, shard),
      be_(backend),
      st_(backend.DefaultStream()),
      store_(layout_, backend, compute) {
  if (shard.tp > 1 && (!layers || config.n_head % shard.tp != 0 || config.padded_vocab % shard.tp != 0)) std::abort();
  if (!layers) whole_ = std::make_unique<WholeModelLayers>(config, backend);
  par_ = layers ? layers : whole_.get();
  nl_ = shard.end(config) - shard.layer_begin;
  Cl_ = config.n_embd / shard.tp;
  Fl_ = 4 * config.n_embd / shard.tp;
  Hl_ = config.n_head / shard.tp;
  Vl_ = config.padded_vocab / shard.tp;
  if (Status st = store_.Allocate(); !st.ok()) status_ = st;
  slots_.resize(1);
}

DevPtr GptModel::ParamPtr(const std::string& name) const {
  const ParamInfo* p = layout_.Find(name);
  if (!p) std::abort();
  return store_.params() + p->offset;
}

DevPtr GptModel::GradPtr(const std::string& name) {
  const ParamInfo* p = layout_.Find(name);
  if (!p) std::abort();
  if (!sink_) return store_.grads() + p->offset;
  for (const ActiveRange& r : active_) {  // the sink's ranges are fp32 (data parallelism)
    if (p->offset >= r.begin && p->offset < r.end) return DevPtr{r.data + (p->offset - r.begin), DType::kF32};
  }
  std::abort();  // a gradient written outside an acquired range: a bug in Backward's ranges
}

void GptModel::set_grad_sink(GradSink* sink) {
  sink_ = sink;
  if (sink_) {
    store_.DropGrads();
  } else if (Status st = store_.AllocateGrads(); !st.ok() && status_.ok()) {
    status_ = st;
  }
}

void GptModel::InitWeights(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float proj_std = 0.02f / std::sqrt(2.0f * static_cast<float>(config_.n_layer));
  HostWrite host(be_, store_.params(), store_.size());
  std::fill(host.data(), host.data() + store_.size(), 0.0f);
  // The whole model's values in canonical order (every rank draws the same stream), each rank
  // keeping its box of each tensor it holds.
  const ParamLayout whole(config_);
  std::vector<float> buf;
  for (const ParamInfo& cp : whole.params()) {
    const ParamInfo* mine = layout_.Find(cp.name);
    const bool is_ln = cp.name.find("ln_") != std::string::npos;
    const bool is_bias = cp.name.size() > 5 && cp.name.compare(cp.name.size() - 5, 5, ".bias") == 0;
    if (is_bias) continue;
    buf.resize(cp.size);
    if (is_ln) {
      std::fill(buf.begin(), buf.end(), 1.0f);
    } else {
      const bool resid_proj = cp.name.find("attn.proj.weight") != std::string::npos ||
                              cp.name.find("mlp.proj.weight") != std::string::npos;
      const float sd = resid_proj ? proj_std : 0.02f;
      for (size_t i = 0; i < cp.size; ++i) buf[i] = sd * normal(rng);  // canonical rows only: padding stays 0
    }
    if (mine) {
      CopyOverlap(MakeBoxPart(std::vector<int64_t>(cp.shape.size(), 0), cp.shape), buf.data(),
                  MakeBoxPart(mine->box_offset, mine->box_length), host.data() + mine->offset);
    }
  }
  host.Commit();
}

void GptModel::Alloc(DeviceArray& a, size_t n, const char* what, DType t) {
  Status st = a.Assign(be_, n, what, t);
  if (!st.ok() && status_.ok()) status_ = st;
}

void GptModel::AllocLayers(LayerActs* a, size_t n, size_t N, bool own_gelu) {
  const size_t C = config_.n_embd, R = shard_.seq_parallel() ? N / shard_.tp : N, NCl = N * Cl_, NFl = N * Fl_;
  a->n = n;
  for (auto* v : {&a->ln1, &a->attproj, &a->resid2, &a->ln2, &a->fcproj}) Alloc(*v, n * R * C, "activations (B,T,C)");
  for (auto* v : {&a->q, &a->k, &a->v, &a->atty}) Alloc(*v, n * NCl, "attention activations (B,T,C/tp)");
  for (auto* v : {&a->ln1_mean, &a->ln1_rstd, &a->ln2_mean, &a->ln2_rstd}) Alloc(*v, n * R, "LayerNorm statistics", DType::kF32);
  Alloc(a->lse, n * N * Hl_, "attention log-sum-exp", DType::kF32);
  Alloc(a->fch, n * NFl, "MLP activations (B,T,4C/tp)");
  if (own_gelu) Alloc(a->fch_gelu, n * NFl, "GELU activations (B,T,4C/tp)");
  else a->fch_gelu.Reset();
}

void GptModel::EnsureSlot(int slot, int B, int T) {
  Slot& s = slots_.at(slot);
  const size_t N = static_cast<size_t>(B) * T, C = config_.n_embd, NC = N * C;
  const size_t R = shard_.seq_parallel() ? N / shard_.tp : N, RC = R * C;  // rows of the residual stream
  if (shard_.seq_parallel() && N % shard_.tp != 0) std::abort();  // ParallelPlan checks B*T % tp
  if (s.B != B || s.T != T) {
    s.B = B;
    s.T = T;
    Alloc(s.input, RC, "the stage input (B,T,C)");
    Alloc(s.resid3, nl_ * RC, "the layers' outputs (L,B,T,C)");
    Alloc(s.tokens, N, "tokens", DType::kI32);
    Alloc(s.targets, N, "targets", DType::kI32);
    if (recompute_ == Recompute::kFull) s.layers = LayerActs();
    else AllocLayers(&s.layers, nl_, N, recompute_ == Recompute::kNone);
    if (shard_.last(config_)) {
      Alloc(s.lnf, RC, "ln_f output (B,T,C)");
      Alloc(s.lnf_mean, R, "ln_f statistics", DType::kF32);
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
    if (Status st = par_->Prepare(N); !st.ok() && status_.ok()) status_ = st;
    for (auto* v : {&d.dq, &d.dk, &d.dv, &d.datty}) Alloc(*v, N * Cl_, "attention gradient scratch");
    for (auto* v : {&d.dfch, &d.dfch_gelu}) Alloc(*v, N * Fl_, "MLP gradient scratch");
    if (recompute_ == Recompute::kFull) AllocLayers(&shared_, 1, N, true);
    else shared_ = LayerActs();
    if (recompute_ == Recompute::kSelective) Alloc(gelu_shared_, N * Fl_, "the shared GELU buffer");
    else gelu_shared_.Reset();
  }
}


Status KvCache::Allocate(Backend& b, const GptConfig& c, DType t) {
  const size_t n = static_cast<size_t>(c.n_layer) * c.max_seq_len * c.n_embd;
  ANNEAL_RETURN_IF_ERROR(k.Assign(b, n, "the key cache (L, maxT, C)", t));
  ANNEAL_RETURN_IF_ERROR(v.Assign(b, n, "the value cache (L, maxT, C)", t));
  return scores.Assign(b, c.max_seq_len, "decode attention scores");
}

void GptModel::LayerForward(Slot& sl, int i, LayerActs& a, int li, KvCache* kv, int pos) {
  const int B = sl.B, T = sl.T, C = config_.n_embd;
  const int N = B * T;
  const int R = shard_.seq_parallel() ? N / shard_.tp : N;  // rows of the residual stream this rank holds
  const size_t NC = static_cast<size_t>(R) * C, NCl = static_cast<size_t>(N) * Cl_, NFl = static_cast<size_t>(N) * Fl_;
  const std::string p = "h." + std::to_string(shard_.layer_begin + i) + ".";
  DevPtr residual = i == 0 ? sl.input.ptr() : L(sl.resid3, i - 1, NC);  // (R,C)
  DevPtr ln1 = L(a.ln1, li, NC);
  DevPtr q = L(a.q, li, NCl);
  const size_t cache_layer = static_cast<size_t>(config_.max_seq_len) * C;  // one layer of the decode cache
  DevPtr kc = kv ? L(kv->k, shard_.layer_begin + i, cache_layer) : DevPtr{};
  DevPtr vc = kv ? L(kv->v, shard_.layer_begin + i, cache_layer) : DevPtr{};
  DevPtr kk = kv ? kc + static_cast<size_t>(pos) * C : L(a.k, li, NCl);  // decoding: the cache's row pos
  DevPtr v = kv ? vc + static_cast<size_t>(pos) * C : L(a.v, li, NCl);
  DevPtr atty = L(a.atty, li, NCl);
  DevPtr attproj = L(a.attproj, li, NC);
  DevPtr resid2 = L(a.resid2, li, NC);
  DevPtr ln2 = L(a.ln2, li, NC);
  DevPtr fch = L(a.fch, li, NFl);
  DevPtr fch_gelu = recompute_ == Recompute::kSelective ? gelu_shared_.ptr() : L(a.fch_gelu, li, NFl);
  DevPtr fcproj = L(a.fcproj, li, NC);
  DevPtr resid3 = L(sl.resid3, i, NC);
  // ln1 (B,T,C) = LayerNorm(residual)
  be_.LayerNormForward(st_, M(ln1, R, C), M(L(a.ln1_mean, li, R), R), M(L(a.ln1_rstd, li, R), R), M(residual, R, C),
                       M(ParamPtr(p + "ln_1.weight"), C), M(ParamPtr(p + "ln_1.bias"), C));
  // q, k, v (B,T,Cl) = ln1 @ W^T + b: this rank's heads (column-parallel; every row, gathered)
  DevPtr ln1_all = par_->ColumnInput(ln1, N);
  for (const auto& [out, w] : {std::pair<DevPtr, const char*>{q, "attn.q."}, {kk, "attn.k."}, {v, "attn.v."}}) {
    be_.LinearForward(st_, M(out, N, Cl_), M(ln1_all, N, C), M(ParamPtr(p + w + "weight"), Cl_, C),
                      M(ParamPtr(p + w + "bias"), Cl_));
  }
  // atty (B,T,Cl) = causal attention over the Hl local heads; lse (B,Hl,T)
  if (kv) {  // decoding: this position's query against the cached positions 0..pos
    be_.AttentionDecode(st_, M(atty, C), M(q, C), M(kc, pos + 1, C), M(vc, pos + 1, C),
                        M(kv->scores.ptr(), config_.max_seq_len), Hl_);
  } else {
    be_.AttentionForward(st_, M3(atty, B, T, Cl_),
                         M(L(a.lse, li, static_cast<size_t>(N) * Hl_), static_cast<int64_t>(N) * Hl_), M3(q, B, T, Cl_),
                         M3(kk, B, T, Cl_), M3(v, B, T, Cl_), Hl_);
  }
  // attproj (B,T,C) = atty @ Wproj^T + b (row-parallel: partial sums added across the group, then b)
  RowParallelLinear(attproj, atty, p + "attn.proj.", N, Cl_);
  // resid2 = residual + attproj; ln2 (B,T,C) = LayerNorm(resid2)
  be_.ResidualLayerNormForward(st_, M(resid2, R, C), M(ln2, R, C), M(L(a.ln2_mean, li, R), R), M(L(a.ln2_rstd, li, R), R),
                               M(residual, R, C), M(attproj, R, C), M(ParamPtr(p + "ln_2.weight"), C),
                               M(ParamPtr(p + "ln_2.bias"), C));
  // fch (B,T,Fl) = ln2 @ Wfc^T + b; fch_gelu = GELU(fch)
  be_.LinearForward(st_, M(fch, N, Fl_), M(par_->ColumnInput(ln2, N), N, C), M(ParamPtr(p + "mlp.fc.weight"), Fl_, C),
                    M(ParamPtr(p + "mlp.fc.bias"), Fl_), M(fch_gelu, N, Fl_));
  // fcproj (B,T,C) = fch_gelu @ Wproj^T + b (row-parallel); resid3 = resid2 + fcproj
  RowParallelLinear(fcproj, fch_gelu, p + "mlp.proj.", N, Fl_);
  be_.ResidualForward(st_, M(resid3, NC), M(resid2, NC), M(fcproj, NC));
}

void GptModel::RowParallelLinear(DevPtr out, DevPtr inp, const std::string& prefix, int N, int K) {
  par_->RowLinear(out, inp, ParamPtr(prefix + "weight"), ParamPtr(prefix + "bias"), N, K, scratch_.dln.ptr());
}

DevPtr GptModel::DecodeStep(int32_t token, int pos, KvCache& cache) {
  if (!shard_.first() || !shard_.last(config_) || shard_.tp > 1 || pos < 0 || pos >= config_.max_seq_len) std::abort();
  EnsureSlot(0, 1, 1);
  if (!status_.ok()) return DevPtr{};
  Slot& s = slots_[0];
  const int C = config_.n_embd;
  // input (1,C) = wte[token] + wpe[pos]
  be_.CopyFromHost(s.tokens.View(), &token, st_);
  par_->EmbeddingForward(s.input.ptr(), s.tokens.i32(), ParamPtr("wte.weight"),
                         ParamPtr("wpe.weight") + static_cast<size_t>(pos) * C, 1, 1, scratch_.dln.ptr());
  for (int i = 0; i < nl_; ++i) LayerForward(s, i, ActsOf(s), recompute_ == Recompute::kFull ? 0 : i, &cache, pos);
  be_.LayerNormForward(st_, M(s.lnf.ptr(), 1, C), M(s.lnf_mean.ptr(), 1), M(s.lnf_rstd.ptr(), 1),
                       M(OutputOf(0), 1, C), M(ParamPtr("ln_f.weight"), C), M(ParamPtr("ln_f.bias"), C));
  be_.LinearForward(st_, M(s.logits.ptr(), 1, Vl_), M(s.lnf.ptr(), 1, C), M(ParamPtr("wte.weight"), Vl_, C), TV());
  return s.logits.ptr();
}

float* GptModel::StageInput(int slot, int B, int T) {
  EnsureSlot(slot, B, T);
  return slots_[slot].input.ptr().f32();
}

DevPtr GptModel::OutputOf(int slot) const {
  const Slot& s = slots_.at(slot);
  return nl_ > 0 ? s.resid3.ptr() + static_cast<size_t>(nl_ - 1) * StageFloats(s.B, s.T) : s.input.ptr();
}

const float* GptModel::StageOutput(int slot) const { return OutputOf(slot).f32(); }

double GptModel::Forward(const int32_t* tokens, const int32_t* targets, int B, int T, float grad_scale) {
  if (!shard_.first() || !shard_.last(config_)) std::abort();  // a pipeline stage uses ForwardStage
  return ForwardStage(0, tokens, targets, B, T, grad_scale);
}

double GptModel::ForwardStage(int slot, const int32_t* tokens, const int32_t* targets, int B, int T,
                              float grad_scale) {
  EnsureSlot(slot, B, T);
  if (!status_.ok()) return 0;  // an allocation failed: the caller reports status()
  Slot& s = slots_[slot];
  const int C = config_.n_embd;
  const int N = B * T;
  const int R = shard_.seq_parallel() ? N / shard_.tp : N;  // rows of the residual stream this rank holds
  if (shard_.first()) {
    device_trace::Span span(be_.timing_marks(), st_, "forward", "embedding");
    // input (R,C) = wte[tokens] + wpe[t] (the vocabulary-parallel form: this slice's rows, summed)
    be_.CopyFromHost(s.tokens.View(), tokens, st_);
    par_->EmbeddingForward(s.input.ptr(), s.tokens.i32(), ParamPtr("wte.weight"), ParamPtr("wpe.weight"), B, T,
                           scratch_.dln.ptr());
  }
  for (int i = 0; i < nl_; ++i) {
    device_trace::Span span(be_.timing_marks(), st_, "forward", "h.", shard_.layer_begin + i);
    LayerForward(s, i, ActsOf(s), recompute_ == Recompute::kFull ? 0 : i);
  }
  if (!shard_.last(config_)) return 0;
  device_trace::Span span(be_.timing_marks(), st_, "forward", "lm head + loss");
  be_.CopyFromHost(s.targets.View(), targets, st_);
  const DevPtr last = OutputOf(slot);
  be_.LayerNormForward(st_, M(s.lnf.ptr(), R, C), M(s.lnf_mean.ptr(), R), M(s.lnf_rstd.ptr(), R), M(last, R, C),
                       M(ParamPtr("ln_f.weight"), C), M(ParamPtr("ln_f.bias"), C));
  // logits (B,T,Vl) = lnf @ wte^T (tied; this rank's vocabulary slice; every row); padded rows of wte are zero
  be_.LinearForward(st_, M(s.logits.ptr(), N, Vl_), M(par_->ColumnInput(s.lnf.ptr(), N), N, C),
                    M(ParamPtr("wte.weight"), Vl_, C), TV());
  // losses (B,T); with grad_scale the logits become their gradient in place
  const double total = par_->Loss(s.logits.ptr(), s.losses.ptr(), s.targets.i32(), N, grad_scale);
  s.have_grad_logits = grad_scale != 0.0f;
  return total / N;
}

void GptModel::LnBackward(DevPtr dinp, const std::string& w, const std::string& b, DevPtr dout,
                          DevPtr inp, DevPtr mean, DevPtr rstd, int rows) {
  par_->LayerNormBackward(dinp, GradPtr(w), GradPtr(b), dout, inp, ParamPtr(w), mean, rstd, rows);
}

size_t GptModel::ActivationFloatsAllocated() const {
  size_t n = 0;
  auto layers = [&](const LayerActs& a) {
    for (const auto* v : {&a.ln1, &a.ln1_mean, &a.ln1_rstd, &a.q, &a.k, &a.v, &a.atty, &a.lse, &a.attproj, &a.resid2,
                          &a.ln2, &a.ln2_mean, &a.ln2_rstd, &a.fch, &a.fch_gelu, &a.fcproj}) {
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
  for (const auto* v : {&d.dresidual, &d.dln, &d.dq, &d.dk, &d.dv, &d.datty, &d.dfch, &d.dfch_gelu}) n += v->size();
  return n + par_->ScratchFloats();  // the tensor-parallel layers' gathers and statistics
}

void GptModel::ZeroGrad() {
  store_.ZeroGrads(st_);
}

void GptModel::Backward() {
  if (!shard_.first() || !shard_.last(config_)) std::abort();  // a pipeline stage uses BackwardStage
  BackwardStage(0, nullptr);
}

// Where local layer i's parameters start (i == nl_: ln_f, or the end): the ranges backward hands to
// the grad-ready hook or the GradSink.
size_t GptModel::LayerStart(int i) const {
  if (i < nl_) return layout_.Find("h." + std::to_string(shard_.layer_begin + i) + ".ln_1.weight")->offset;
  return shard_.last(config_) ? layout_.Find("ln_f.weight")->offset : layout_.total_floats();
}

void GptModel::AcquireRange(size_t begin, size_t end) {
  if (sink_ && begin < end) active_.push_back({begin, end, sink_->Acquire(begin, end)});
}

void GptModel::RangeReady(size_t begin, size_t end) {
  if (begin >= end) return;
  if (grad_ready_) grad_ready_(begin, end);
  if (sink_) {
    std::erase_if(active_, [&](const ActiveRange& r) { return r.begin == begin; });
    sink_->Release(begin, end);
  }
}

void GptModel::BackwardStage(int slot, const float* dout) {
  if (!status_.ok()) return;
  Slot& s = slots_.at(slot);
  const bool last = shard_.last(config_);
  if (last && !s.have_grad_logits) std::abort();  // ForwardStage(..., grad_scale != 0) must come first
  s.have_grad_logits = false;
  const int N = s.B * s.T;
  const int R = shard_.seq_parallel() ? N / shard_.tp : N;  // rows of the residual stream this rank holds
  const size_t NC = static_cast<size_t>(R) * config_.n_embd;
  // Sink mode: the embeddings' and ln_f's ranges first (wte takes the LM head's gradient now and the
  // encoder's at the very end), then each layer's just before its backward.
  AcquireRange(0, LayerStart(0));
  AcquireRange(LayerStart(nl_), layout_.total_floats());
  if (last) {
    device_trace::Span span(be_.timing_marks(), st_, "backward", "lm head + ln_f");
    HeadBackward(s, slot);
  } else {
    be_.Copy(st_, M(scratch_.dresidual.ptr(), NC), M(DevPtr{const_cast<float*>(dout), DType::kF32}, NC));
  }
  RangeReady(LayerStart(nl_), layout_.total_floats());
  for (int i = nl_ - 1; i >= 0; --i) {
    AcquireRange(LayerStart(i), LayerStart(i + 1));
    device_trace::Span span(be_.timing_marks(), st_, "backward", "h.", shard_.layer_begin + i);
    LayerBackward(s, i);
    RangeReady(LayerStart(i), LayerStart(i + 1));
  }
  if (shard_.first()) {
    device_trace::Span span(be_.timing_marks(), st_, "backward", "embedding");
    par_->EmbeddingBackward(GradPtr("wte.weight"), GradPtr("wpe.weight"), scratch_.dresidual.ptr(), s.tokens.i32(), s.B, s.T);
  }
  RangeReady(0, LayerStart(0));
}

void GptModel::ZeroScratch(const DeviceArray& v) {
  be_.Zero(st_, M(v.ptr(), static_cast<int64_t>(v.size())));
}

// The LM head and ln_f: dlnf (B,T,C) = dlogits @ wte (summed over the vocabulary slices), dwte +=
// dlogits^T @ lnf; then dresidual (R,C) = d(the last layer's output) through ln_f.
void GptModel::HeadBackward(Slot& s, int slot) {
  Scratch& d = scratch_;
  const int N = s.B * s.T, C = config_.n_embd;
  const int R = shard_.seq_parallel() ? N / shard_.tp : N;
  ZeroScratch(d.dln);
  DevPtr lnf_all = par_->ColumnInput(s.lnf.ptr(), N);
  be_.LinearBackward(st_, M(d.dln.ptr(), N, C), M(GradPtr("wte.weight"), Vl_, C), TV(), M(s.logits.ptr(), N, Vl_),
                     M(lnf_all, N, C), M(ParamPtr("wte.weight"), Vl_, C));
  // The input gradient of a column-parallel layer: d.dln (N,C) holds this rank's columns' part;
  // ColumnInputGrad sums it over the group into this rank's rows (R,C).
  DevPtr dln_rows = par_->ColumnInputGrad(d.dln.ptr(), N);
  ZeroScratch(d.dresidual);
  LnBackward(d.dresidual.ptr(), "ln_f.weight", "ln_f.bias", dln_rows, OutputOf(slot), s.lnf_mean.ptr(),
             s.lnf_rstd.ptr(), R);
}

// Local layer i's backward: scratch_.dresidual holds d(its output) and then d(its input).
void GptModel::LayerBackward(Slot& s, int i) {
  Scratch& d = scratch_;
  const int B = s.B, T = s.T, C = config_.n_embd, N = B * T;
  const int R = shard_.seq_parallel() ? N / shard_.tp : N;
  const size_t NC = static_cast<size_t>(R) * C, NFl = static_cast<size_t>(N) * Fl_;
  const std::string p = "h." + std::to_string(shard_.layer_begin + i) + ".";
  DevPtr residual = i == 0 ? s.input.ptr() : L(s.resid3, i - 1, NC);
  // The layer's activations: kept (index i), or recomputed now into the shared one-layer buffers.
  const int li = recompute_ == Recompute::kFull ? 0 : i;
  LayerActs& a = ActsOf(s);
  if (recompute_ == Recompute::kFull) LayerForward(s, i, shared_, 0);
  // resid3 = resid2 + fcproj: d(fcproj) = dresidual
  DevPtr fch_gelu = recompute_ == Recompute::kSelective ? gelu_shared_.ptr() : L(a.fch_gelu, li, NFl);
  if (recompute_ == Recompute::kSelective) be_.GeluForward(st_, M(fch_gelu, NFl), M(L(a.fch, li, NFl), NFl));  // this layer's GELU
  ZeroScratch(d.dfch_gelu);
  // (sequence parallel: the row-parallel layer needs every row's output gradient)
  be_.LinearBackward(st_, M(d.dfch_gelu.ptr(), N, Fl_), M(GradPtr(p + "mlp.proj.weight"), C, Fl_),
                     M(GradPtr(p + "mlp.proj.bias"), C), M(par_->ColumnInput(d.dresidual.ptr(), N), N, C),
                     M(fch_gelu, N, Fl_), M(ParamPtr(p + "mlp.proj.weight"), C, Fl_));
  be_.GeluBackward(st_, M(d.dfch.ptr(), NFl), M(L(a.fch, li, NFl), NFl), M(d.dfch_gelu.ptr(), NFl));  // dfch (B,T,Fl)
  ZeroScratch(d.dln);
  be_.LinearBackward(st_, M(d.dln.ptr(), N, C), M(GradPtr(p + "mlp.fc.weight"), Fl_, C), M(GradPtr(p + "mlp.fc.bias"), Fl_),
                     M(d.dfch.ptr(), N, Fl_), M(par_->ColumnInput(L(a.ln2, li, NC), N), N, C),
                     M(ParamPtr(p + "mlp.fc.weight"), Fl_, C));
  // column-parallel input: the slices' contributions add up
  DevPtr dln2 = par_->ColumnInputGrad(d.dln.ptr(), N);
  // dresidual += LN2 backward: now d(resid2)
  LnBackward(d.dresidual.ptr(), p + "ln_2.weight", p + "ln_2.bias", dln2, L(a.resid2, li, NC),
             L(a.ln2_mean, li, R), L(a.ln2_rstd, li, R), R);
  AttentionBlockBackward(s, i, li, a);
  DevPtr dln1 = par_->ColumnInputGrad(d.dln.ptr(), N);
  // dresidual += LN1 backward: now d(residual), the previous layer's output
  LnBackward(d.dresidual.ptr(), p + "ln_1.weight", p + "ln_1.bias", dln1, residual, L(a.ln1_mean, li, R),
             L(a.ln1_rstd, li, R), R);
}

// resid2 = residual + attproj(attention(q, k, v of ln1)): from d(attproj) = dresidual down to this
// rank's columns' part of d(ln1) in scratch_.dln.
void GptModel::AttentionBlockBackward(Slot& s, int i, int li, LayerActs& a) {
  Scratch& d = scratch_;
  const int B = s.B, T = s.T, C = config_.n_embd, N = B * T;
  const int R = shard_.seq_parallel() ? N / shard_.tp : N;
  const size_t NC = static_cast<size_t>(R) * C, NCl = static_cast<size_t>(N) * Cl_;
  const std::string p = "h." + std::to_string(shard_.layer_begin + i) + ".";
  ZeroScratch(d.datty);
  be_.LinearBackward(st_, M(d.datty.ptr(), N, Cl_), M(GradPtr(p + "attn.proj.weight"), C, Cl_),
                     M(GradPtr(p + "attn.proj.bias"), C),
                     M(par_->ColumnInput(d.dresidual.ptr(), N), N, C), M(L(a.atty, li, NCl), N, Cl_),
                     M(ParamPtr(p + "attn.proj.weight"), C, Cl_));
  // dq, dk, dv (B,T,Cl)
  be_.AttentionBackward(st_, M3(d.dq.ptr(), B, T, Cl_), M3(d.dk.ptr(), B, T, Cl_), M3(d.dv.ptr(), B, T, Cl_),
                        M3(d.datty.ptr(), B, T, Cl_), M3(L(a.q, li, NCl), B, T, Cl_), M3(L(a.k, li, NCl), B, T, Cl_),
                        M3(L(a.v, li, NCl), B, T, Cl_), M3(L(a.atty, li, NCl), B, T, Cl_),
                        M(L(a.lse, li, static_cast<size_t>(N) * Hl_), static_cast<int64_t>(N) * Hl_), Hl_);
  ZeroScratch(d.dln);
  DevPtr ln1 = par_->ColumnInput(L(a.ln1, li, NC), N);
  for (const auto& [dx, w] :
       {std::pair<DevPtr, const char*>{d.dq.ptr(), "attn.q."}, {d.dk.ptr(), "attn.k."}, {d.dv.ptr(), "attn.v."}}) {
    be_.LinearBackward(st_, M(d.dln.ptr(), N, C), M(GradPtr(p + w + "weight"), Cl_, C), M(GradPtr(p + w + "bias"), Cl_),
                       M(dx, N, Cl_), M(ln1, N, C), M(ParamPtr(p + w + "weight"), Cl_, C));
  }
}

}  // namespace anneal
