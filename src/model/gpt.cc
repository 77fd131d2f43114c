#include "model/gpt.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

#include "model/box.h"
#include "tensor/host_copy.h"

namespace anneal {


GptModel::GptModel(const GptConfig& config, Backend& backend)
    : GptModel(config, backend, ModelShard::Whole(), nullptr) {}

GptModel::GptModel(const GptConfig& config, Backend& backend, const ModelShard& shard, TensorParallelGroup* tp)
    : config_(config),
      shard_(shard),
      tp_(shard.tp > 1 ? tp : nullptr),
      layout_(config, shard),
      be_(backend),
      st_(backend.DefaultStream()) {
  if (shard.tp > 1 && (!tp || config.n_head % shard.tp != 0 || config.padded_vocab % shard.tp != 0)) std::abort();
  nl_ = shard.end(config) - shard.layer_begin;
  Cl_ = config.n_embd / shard.tp;
  Fl_ = 4 * config.n_embd / shard.tp;
  Hl_ = config.n_head / shard.tp;
  Vl_ = config.padded_vocab / shard.tp;
  v0_ = shard.tp_rank * Vl_;
  Alloc(params_, layout_.total_floats(), "the parameters");
  Alloc(grads_, layout_.total_floats(), "the gradients");
  slots_.resize(1);
}

float* GptModel::Param(const std::string& name) {
  const ParamInfo* p = layout_.Find(name);
  if (!p) std::abort();
  return params_.data() + p->offset;
}

float* GptModel::Grad(const std::string& name) {
  const ParamInfo* p = layout_.Find(name);
  if (!p) std::abort();
  if (!sink_) return grads_.data() + p->offset;
  for (const ActiveRange& r : active_) {
    if (p->offset >= r.begin && p->offset < r.end) return r.data + (p->offset - r.begin);
  }
  std::abort();  // a gradient written outside an acquired range: a bug in Backward's ranges
}

void GptModel::set_grad_sink(GradSink* sink) {
  sink_ = sink;
  if (sink_) grads_.Reset();
  else Alloc(grads_, layout_.total_floats(), "the gradients");
}

void GptModel::InitWeights(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float proj_std = 0.02f / std::sqrt(2.0f * static_cast<float>(config_.n_layer));
  HostWrite host(be_, params_.data(), params_.size());
  std::fill(host.data(), host.data() + params_.size(), 0.0f);
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
  for (auto* v : {&a->ln1_mean, &a->ln1_rstd, &a->ln2_mean, &a->ln2_rstd}) Alloc(*v, n * R, "LayerNorm statistics");
  Alloc(a->lse, n * N * Hl_, "attention log-sum-exp");
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
      Alloc(s.lnf_mean, R, "ln_f statistics");
      Alloc(s.lnf_rstd, R, "ln_f statistics");
      Alloc(s.logits, N * Vl_, "the logits (B,T,Vp/tp)");
      Alloc(s.losses, N, "the losses (B,T)");
    }
  }
  // Buffers shared by the slots: sized for the latest shape.
  if (scratch_.N != N) {
    Scratch& d = scratch_;
    d.N = N;
    Alloc(d.dresidual, RC, "gradient scratch (B,T,C)");
    Alloc(d.dln, NC, "gradient scratch (B,T,C)");
    if (shard_.seq_parallel()) {
      Alloc(d.gather, NC, "sequence-parallel gather (B,T,C)");
      Alloc(d.dln_rows, RC, "sequence-parallel rows");
      Alloc(d.dln_params, 2 * C, "sequence-parallel LayerNorm gradients");
    }
    for (auto* v : {&d.dq, &d.dk, &d.dv, &d.datty}) Alloc(*v, N * Cl_, "attention gradient scratch");
    for (auto* v : {&d.dfch, &d.dfch_gelu}) Alloc(*v, N * Fl_, "MLP gradient scratch");
    if (tp_ && shard_.last(config_)) {
      Alloc(d.stats, 2 * N, "vocabulary-parallel loss statistics", DType::kF64);
      Alloc(d.gathered, 2 * N * shard_.tp, "vocabulary-parallel loss statistics", DType::kF64);
    }
    if (recompute_ == Recompute::kFull) AllocLayers(&shared_, 1, N, true);
    else shared_ = LayerActs();
    if (recompute_ == Recompute::kSelective) Alloc(gelu_shared_, N * Fl_, "the shared GELU buffer");
    else gelu_shared_.Reset();
  }
}


void GptModel::LayerForward(Slot& sl, int i, LayerActs& a, int li) {
  const int B = sl.B, T = sl.T, C = config_.n_embd;
  const int N = B * T;
  const bool sp = shard_.seq_parallel();
  const int R = sp ? N / shard_.tp : N;  // rows of the residual stream this rank holds
  const size_t NC = static_cast<size_t>(R) * C, NCl = static_cast<size_t>(N) * Cl_, NFl = static_cast<size_t>(N) * Fl_;
  const std::string p = "h." + std::to_string(shard_.layer_begin + i) + ".";
  const float* residual = i == 0 ? sl.input.data() : L(sl.resid3, i - 1, NC);  // (R,C)
  float* ln1 = L(a.ln1, li, NC);
  float* q = L(a.q, li, NCl);
  float* kk = L(a.k, li, NCl);
  float* v = L(a.v, li, NCl);
  float* atty = L(a.atty, li, NCl);
  float* attproj = L(a.attproj, li, NC);
  float* resid2 = L(a.resid2, li, NC);
  float* ln2 = L(a.ln2, li, NC);
  float* fch = L(a.fch, li, NFl);
  float* fch_gelu = recompute_ == Recompute::kSelective ? gelu_shared_.data() : L(a.fch_gelu, li, NFl);
  float* fcproj = L(a.fcproj, li, NC);
  float* resid3 = L(sl.resid3, i, NC);
  // ln1 (B,T,C) = LayerNorm(residual)
  be_.LayerNormForward(st_, M(ln1, R, C), M(L(a.ln1_mean, li, R), R), M(L(a.ln1_rstd, li, R), R), M(residual, R, C),
                       M(Param(p + "ln_1.weight"), C), M(Param(p + "ln_1.bias"), C));
  // q, k, v (B,T,Cl) = ln1 @ W^T + b: this rank's heads (column-parallel; every row, gathered)
  const float* ln1_all = sp ? GatherRows(ln1, N) : ln1;
  for (const auto& [out, w] : {std::pair<float*, const char*>{q, "attn.q."}, {kk, "attn.k."}, {v, "attn.v."}}) {
    be_.LinearForward(st_, M(out, N, Cl_), M(ln1_all, N, C), M(Param(p + w + "weight"), Cl_, C),
                      M(Param(p + w + "bias"), Cl_));
  }
  // atty (B,T,Cl) = causal attention over the Hl local heads; lse (B,Hl,T)
  be_.AttentionForward(st_, M3(atty, B, T, Cl_), M(L(a.lse, li, static_cast<size_t>(N) * Hl_), static_cast<int64_t>(N) * Hl_),
                       M3(q, B, T, Cl_), M3(kk, B, T, Cl_), M3(v, B, T, Cl_), Hl_);
  // attproj (B,T,C) = atty @ Wproj^T + b (row-parallel: partial sums added across the group, then b)
  RowParallelLinear(attproj, atty, p + "attn.proj.", N, Cl_);
  // resid2 = residual + attproj; ln2 (B,T,C) = LayerNorm(resid2)
  be_.ResidualLayerNormForward(st_, M(resid2, R, C), M(ln2, R, C), M(L(a.ln2_mean, li, R), R), M(L(a.ln2_rstd, li, R), R),
                               M(residual, R, C), M(attproj, R, C), M(Param(p + "ln_2.weight"), C),
                               M(Param(p + "ln_2.bias"), C));
  // fch (B,T,Fl) = ln2 @ Wfc^T + b; fch_gelu = GELU(fch)
  be_.LinearForward(st_, M(fch, N, Fl_), M(sp ? GatherRows(ln2, N) : ln2, N, C), M(Param(p + "mlp.fc.weight"), Fl_, C),
                    M(Param(p + "mlp.fc.bias"), Fl_), M(fch_gelu, N, Fl_));
  // fcproj (B,T,C) = fch_gelu @ Wproj^T + b (row-parallel); resid3 = resid2 + fcproj
  RowParallelLinear(fcproj, fch_gelu, p + "mlp.proj.", N, Fl_);
  be_.ResidualForward(st_, M(resid3, NC), M(resid2, NC), M(fcproj, NC));
}

void GptModel::RowParallelLinear(float* out, const float* inp, const std::string& prefix, int N, int K) {
  const int C = config_.n_embd, R = shard_.seq_parallel() ? N / shard_.tp : N;
  const float* w = Param(prefix + "weight");
  const float* b = Param(prefix + "bias");
  if (!tp_) {
    be_.LinearForward(st_, M(out, N, C), M(inp, N, K), M(w, C, K), M(b, C));
    return;
  }
  float* part = shard_.seq_parallel() ? scratch_.dln.data() : out;  // (N,C) partial sums
  be_.LinearForward(st_, M(part, N, C), M(inp, N, K), M(w, C, K), TV());
  ReduceRows(part, out, N);
  be_.BiasAdd(st_, M(out, R, C), M(b, C));
}

float* GptModel::StageInput(int slot, int B, int T) {
  EnsureSlot(slot, B, T);
  return slots_[slot].input.data();
}

const float* GptModel::StageOutput(int slot) const {
  const Slot& s = slots_.at(slot);
  return nl_ > 0 ? s.resid3.data() + static_cast<size_t>(nl_ - 1) * StageFloats(s.B, s.T) : s.input.data();
}

double GptModel::Forward(const int32_t* tokens, const int32_t* targets, int B, int T, float grad_scale) {
  if (!shard_.first() || !shard_.last(config_)) std::abort();  // a pipeline stage uses ForwardStage
  return ForwardStage(0, tokens, targets, B, T, grad_scale);
}

double GptModel::ForwardStage(int slot, const int32_t* tokens, const int32_t* targets, int B, int T,
                              float grad_scale) {
  EnsureSlot(slot, B, T);
  if (!status_.ok()) return 0;  // an allocation failed: the caller reports status()
  Slot& s = slots_[slot];
  const int C = config_.n_embd, V = config_.vocab_size;
  const int N = B * T;
  const bool sp = shard_.seq_parallel();
  const int R = sp ? N / shard_.tp : N, row0 = sp ? shard_.tp_rank * R : 0;
  if (shard_.first()) {
    be_.CopyFromHost(s.tokens.View(), tokens, st_);
    const TV wte = M(Param("wte.weight"), Vl_, C), wpe = M(Param("wpe.weight"), config_.max_seq_len, C);
    if (!tp_) {
      be_.EmbeddingForward(st_, M3(s.input.data(), B, T, C), Ids(s.tokens.i32(), B, T), wte, wpe);  // (B,T,C)
    } else {
      // Vocabulary-parallel embedding: the rank holding a token's row contributes it, the others 0.
      float* rows = sp ? scratch_.dln.data() : s.input.data();  // (N,C): this slice's rows, 0 elsewhere
      be_.VocabEmbeddingForward(st_, M(rows, N, C), Ids(s.tokens.i32(), N), wte, v0_);
      ReduceRows(rows, s.input.data(), N);
      be_.AddPositions(st_, M(s.input.data(), R, C), wpe, row0, T);
    }
  }
  for (int i = 0; i < nl_; ++i) LayerForward(s, i, ActsOf(s), recompute_ == Recompute::kFull ? 0 : i);
  if (!shard_.last(config_)) return 0;
  be_.CopyFromHost(s.targets.View(), targets, st_);
  const float* last = StageOutput(slot);
  be_.LayerNormForward(st_, M(s.lnf.data(), R, C), M(s.lnf_mean.data(), R), M(s.lnf_rstd.data(), R), M(last, R, C),
                       M(Param("ln_f.weight"), C), M(Param("ln_f.bias"), C));
  // logits (B,T,Vl) = lnf @ wte^T (tied; this rank's vocabulary slice; every row); padded rows of wte are zero
  be_.LinearForward(st_, M(s.logits.data(), N, Vl_), M(sp ? GatherRows(s.lnf.data(), N) : s.lnf.data(), N, C),
                    M(Param("wte.weight"), Vl_, C), TV());
  // losses (B,T); with grad_scale the logits become their gradient in place
  const double total = tp_ ? VocabParallelLoss(s, grad_scale)
                           : be_.CrossEntropy(st_, M(s.logits.data(), N, Vl_), M(s.losses.data(), N), Ids(s.targets.i32(), N), V,
                                              grad_scale);
  s.have_grad_logits = grad_scale != 0.0f;
  return total / N;
}

const float* GptModel::GatherRows(const float* x, size_t N) {
  const size_t C = config_.n_embd, R = N / shard_.tp;
  float* g = scratch_.gather.data();
  be_.Copy(st_, M(g + shard_.tp_rank * R * C, R, C), M(x, R, C));
  tp_->AllGatherInPlace(M(g, N * C), be_.RecordEvent(st_));
  return g;
}

void GptModel::ReduceRows(float* part, float* out, size_t N) {
  const size_t C = config_.n_embd;
  if (shard_.seq_parallel()) tp_->ReduceScatterSum(M(part, N * C), M(out, N * C / shard_.tp), be_.RecordEvent(st_));
  else TpSum(part, N * C);  // in place: part is out
}

void GptModel::LnBackward(float* dinp, const std::string& w, const std::string& b, const float* dout,
                          const float* inp, const float* mean, const float* rstd, int rows) {
  const int C = config_.n_embd;
  if (!shard_.seq_parallel()) {
    be_.LayerNormBackward(st_, M(dinp, rows, C), M(Grad(w), C), M(Grad(b), C), M(dout, rows, C), M(inp, rows, C),
                          M(Param(w), C), M(mean, rows), M(rstd, rows));
    return;
  }
  // Only this micro-batch's contribution is summed over the group (the gradients accumulate).
  float* t = scratch_.dln_params.data();
  be_.Zero(st_, M(t, 2 * C));
  be_.LayerNormBackward(st_, M(dinp, rows, C), M(t, C), M(t + C, C), M(dout, rows, C), M(inp, rows, C), M(Param(w), C),
                        M(mean, rows), M(rstd, rows));
  tp_->AllReduceSum(M(t, 2 * C), be_.RecordEvent(st_));
  be_.Accumulate(st_, M(Grad(w), C), M(t, C));
  be_.Accumulate(st_, M(Grad(b), C), M(t + C, C));
}

double GptModel::VocabParallelLoss(Slot& s, float dscale) {
  const int N = s.B * s.T, V = config_.vocab_size, tp = shard_.tp;
  const int nreal = std::clamp(V - v0_, 0, Vl_);  // columns of this slice that are real tokens
  Scratch& d = scratch_;
  const TV logits = M(s.logits.data(), N, Vl_), targets = Ids(s.targets.i32(), N);
  // This slice's log-sum-exp and target logit per row (0 when another slice holds the target).
  be_.VocabLossStats(st_, TV::F64(d.stats.f64(), {N, 2}), logits, targets, v0_, nreal);
  tp_->AllGather(TV::F64(d.stats.f64(), {N, 2}), TV::F64(d.gathered.f64(), {tp, N, 2}), be_.RecordEvent(st_));
  // Every rank combines the slices in rank order: the same loss, bit for bit.
  return be_.VocabLossCombine(st_, logits, M(s.losses.data(), N), TV::F64(d.stats.f64(), {N, 2}),
                              TV::F64(d.gathered.f64(), {tp, N, 2}), targets, v0_, nreal, dscale);
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
  for (const auto* v : {&d.dresidual, &d.dln, &d.dq, &d.dk, &d.dv, &d.datty, &d.dfch, &d.dfch_gelu, &d.gather,
                        &d.dln_rows, &d.dln_params}) {
    n += v->size();
  }
  n += 2 * (d.stats.size() + d.gathered.size());  // doubles
  return n;
}

void GptModel::ZeroGrad() {
  if (!grads_.empty()) be_.Zero(st_, M(grads_.data(), static_cast<int64_t>(grads_.size())));
}

void GptModel::Backward() {
  if (!shard_.first() || !shard_.last(config_)) std::abort();  // a pipeline stage uses BackwardStage
  BackwardStage(0, nullptr);
}

void GptModel::BackwardStage(int slot, const float* dout) {
  if (!status_.ok()) return;
  Slot& s = slots_.at(slot);
  const bool last = shard_.last(config_);
  if (last && !s.have_grad_logits) std::abort();  // ForwardStage(..., grad_scale != 0) must come first
  s.have_grad_logits = false;
  const int B = s.B, T = s.T, C = config_.n_embd;
  const int N = B * T;
  const bool sp = shard_.seq_parallel();
  const int R = sp ? N / shard_.tp : N;  // rows of the residual stream this rank holds
  const size_t NC = static_cast<size_t>(R) * C, NCl = static_cast<size_t>(N) * Cl_, NFl = static_cast<size_t>(N) * Fl_;
  const size_t NCfull = static_cast<size_t>(N) * C;
  Scratch& d = scratch_;
  // The input gradient of a column-parallel layer (N,C), summed over the group into this rank's rows.
  float* dln_rows = sp ? d.dln_rows.data() : d.dln.data();
  auto zero = [&](const DeviceArray& v) { be_.Zero(st_, M(v.data(), static_cast<int64_t>(v.size()))); };
  // Where local layer i's parameters start (i == nl_: ln_f, or the end), for the grad-ready hook.
  auto layer_start = [&](int i) {
    if (i < nl_) return layout_.Find("h." + std::to_string(shard_.layer_begin + i) + ".ln_1.weight")->offset;
    return last ? layout_.Find("ln_f.weight")->offset : layout_.total_floats();
  };
  auto acquire = [&](size_t begin, size_t end) {
    if (sink_ && begin < end) active_.push_back({begin, end, sink_->Acquire(begin, end)});
  };
  auto ready = [&](size_t begin, size_t end) {
    if (begin >= end) return;
    if (grad_ready_) grad_ready_(begin, end);
    if (sink_) {
      std::erase_if(active_, [&](const ActiveRange& r) { return r.begin == begin; });
      sink_->Release(begin, end);
    }
  };
  // Sink mode: the embeddings' and ln_f's ranges first (wte takes the LM head's gradient now and the
  // encoder's at the very end), then each layer's just before its backward.
  acquire(0, layer_start(0));
  acquire(layer_start(nl_), layout_.total_floats());

  if (last) {
    // dlnf (B,T,C) = dlogits @ wte (summed over the vocabulary slices); dwte += dlogits^T @ lnf
    zero(d.dln);
    const float* lnf_all = sp ? GatherRows(s.lnf.data(), N) : s.lnf.data();
    be_.LinearBackward(st_, M(d.dln.data(), N, C), M(Grad("wte.weight"), Vl_, C), TV(), M(s.logits.data(), N, Vl_),
                       M(lnf_all, N, C), M(Param("wte.weight"), Vl_, C));
    ReduceRows(d.dln.data(), dln_rows, N);
    // dresidual (R,C) = d(the last layer's output)
    zero(d.dresidual);
    LnBackward(d.dresidual.data(), "ln_f.weight", "ln_f.bias", dln_rows, StageOutput(slot), s.lnf_mean.data(),
               s.lnf_rstd.data(), R);
  } else {
    be_.Copy(st_, M(d.dresidual.data(), NC), M(dout, NC));
    (void)NCfull;
  }
  ready(layer_start(nl_), layout_.total_floats());
  for (int i = nl_ - 1; i >= 0; --i) {
    acquire(layer_start(i), layer_start(i + 1));
    const std::string p = "h." + std::to_string(shard_.layer_begin + i) + ".";
    const float* residual = i == 0 ? s.input.data() : L(s.resid3, i - 1, NC);
    // The layer's activations: kept (index i), or recomputed now into the shared one-layer buffers.
    const int li = recompute_ == Recompute::kFull ? 0 : i;
    LayerActs& a = ActsOf(s);
    if (recompute_ == Recompute::kFull) LayerForward(s, i, shared_, 0);
    // resid3 = resid2 + fcproj: d(fcproj) = dresidual
    float* fch_gelu = recompute_ == Recompute::kSelective ? gelu_shared_.data() : L(a.fch_gelu, li, NFl);
    if (recompute_ == Recompute::kSelective) be_.GeluForward(st_, M(fch_gelu, NFl), M(L(a.fch, li, NFl), NFl));  // this layer's GELU
    zero(d.dfch_gelu);
    // (sequence parallel: the row-parallel layer needs every row's output gradient)
    be_.LinearBackward(st_, M(d.dfch_gelu.data(), N, Fl_), M(Grad(p + "mlp.proj.weight"), C, Fl_),
                       M(Grad(p + "mlp.proj.bias"), C), M(sp ? GatherRows(d.dresidual.data(), N) : d.dresidual.data(), N, C),
                       M(fch_gelu, N, Fl_), M(Param(p + "mlp.proj.weight"), C, Fl_));
    be_.GeluBackward(st_, M(d.dfch.data(), NFl), M(L(a.fch, li, NFl), NFl), M(d.dfch_gelu.data(), NFl));  // dfch (B,T,Fl)
    zero(d.dln);
    be_.LinearBackward(st_, M(d.dln.data(), N, C), M(Grad(p + "mlp.fc.weight"), Fl_, C), M(Grad(p + "mlp.fc.bias"), Fl_),
                       M(d.dfch.data(), N, Fl_), M(sp ? GatherRows(L(a.ln2, li, NC), N) : L(a.ln2, li, NC), N, C),
                       M(Param(p + "mlp.fc.weight"), Fl_, C));
    ReduceRows(d.dln.data(), dln_rows, N);  // column-parallel input: the slices' contributions add up
    // dresidual += LN2 backward: now d(resid2)
    LnBackward(d.dresidual.data(), p + "ln_2.weight", p + "ln_2.bias", dln_rows, L(a.resid2, li, NC),
               L(a.ln2_mean, li, R), L(a.ln2_rstd, li, R), R);
    // resid2 = residual + attproj: d(attproj) = dresidual
    zero(d.datty);
    be_.LinearBackward(st_, M(d.datty.data(), N, Cl_), M(Grad(p + "attn.proj.weight"), C, Cl_),
                       M(Grad(p + "attn.proj.bias"), C),
                       M(sp ? GatherRows(d.dresidual.data(), N) : d.dresidual.data(), N, C), M(L(a.atty, li, NCl), N, Cl_),
                       M(Param(p + "attn.proj.weight"), C, Cl_));
    // dq, dk, dv (B,T,Cl)
    be_.AttentionBackward(st_, M3(d.dq.data(), B, T, Cl_), M3(d.dk.data(), B, T, Cl_), M3(d.dv.data(), B, T, Cl_),
                          M3(d.datty.data(), B, T, Cl_), M3(L(a.q, li, NCl), B, T, Cl_), M3(L(a.k, li, NCl), B, T, Cl_),
                          M3(L(a.v, li, NCl), B, T, Cl_), M3(L(a.atty, li, NCl), B, T, Cl_),
                          M(L(a.lse, li, static_cast<size_t>(N) * Hl_), static_cast<int64_t>(N) * Hl_), Hl_);
    zero(d.dln);
    const float* ln1 = sp ? GatherRows(L(a.ln1, li, NC), N) : L(a.ln1, li, NC);
    for (const auto& [dx, w] :
         {std::pair<float*, const char*>{d.dq.data(), "attn.q."}, {d.dk.data(), "attn.k."}, {d.dv.data(), "attn.v."}}) {
      be_.LinearBackward(st_, M(d.dln.data(), N, C), M(Grad(p + w + "weight"), Cl_, C), M(Grad(p + w + "bias"), Cl_),
                         M(dx, N, Cl_), M(ln1, N, C), M(Param(p + w + "weight"), Cl_, C));
    }
    ReduceRows(d.dln.data(), dln_rows, N);
    // dresidual += LN1 backward: now d(residual), the previous layer's output
    LnBackward(d.dresidual.data(), p + "ln_1.weight", p + "ln_1.bias", dln_rows, residual, L(a.ln1_mean, li, R),
               L(a.ln1_rstd, li, R), R);
    ready(layer_start(i), layer_start(i + 1));
  }
  if (shard_.first()) {
    const TV dwte = M(Grad("wte.weight"), Vl_, C), dwpe = M(Grad("wpe.weight"), config_.max_seq_len, C);
    if (!tp_) {
      be_.EmbeddingBackward(st_, dwte, dwpe, M3(d.dresidual.data(), B, T, C), Ids(s.tokens.i32(), B, T));
    } else {
      // dwte rows of this slice's tokens; dwpe (replicated, the same on every rank of the group).
      const float* dall = sp ? GatherRows(d.dresidual.data(), N) : d.dresidual.data();  // every row
      be_.VocabEmbeddingBackward(st_, dwte, dwpe, M(dall, N, C), Ids(s.tokens.i32(), N), v0_, T);
    }
  }
  ready(0, layer_start(0));
}

}  // namespace anneal
