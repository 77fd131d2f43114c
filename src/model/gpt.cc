#include "model/gpt.h"

#include <cmath>
#include <cstdlib>
#include <random>

namespace anneal {

GptModel::GptModel(const GptConfig& config, const KernelTable& kernels)
    : config_(config), layout_(config), k_(kernels) {
  params_.assign(layout_.total_floats(), 0.0f);
  grads_.assign(layout_.total_floats(), 0.0f);
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
  if (sink_) std::vector<float>().swap(grads_);
  else grads_.assign(layout_.total_floats(), 0.0f);
}

void GptModel::InitWeights(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float proj_std = 0.02f / std::sqrt(2.0f * static_cast<float>(config_.n_layer));
  std::fill(params_.begin(), params_.end(), 0.0f);
  for (const ParamInfo& p : layout_.params()) {
    float* w = params_.data() + p.offset;
    const bool is_ln = p.name.find("ln_") != std::string::npos;
    const bool is_bias = p.name.size() > 5 && p.name.compare(p.name.size() - 5, 5, ".bias") == 0;
    if (is_ln && !is_bias) {
      std::fill(w, w + p.size, 1.0f);
    } else if (!is_bias) {
      const bool resid_proj = p.name.find("attn.proj.weight") != std::string::npos ||
                              p.name.find("mlp.proj.weight") != std::string::npos;
      const float sd = resid_proj ? proj_std : 0.02f;
      for (size_t i = 0; i < p.size; ++i) w[i] = sd * normal(rng);  // canonical rows only: padding stays 0
    }
  }
}

void GptModel::EnsureActs(int B, int T) {
  if (acts_.B == B && acts_.T == T) return;
  const size_t N = static_cast<size_t>(B) * T, C = config_.n_embd, L = config_.n_layer, H = config_.n_head;
  const size_t Vp = config_.padded_vocab;
  Acts& a = acts_;
  a.B = B;
  a.T = T;
  a.encoded.assign(N * C, 0);
  const size_t LS = recompute_ == Recompute::kFull ? 1 : L;  // layers whose activations are kept
  for (auto* v : {&a.ln1, &a.q, &a.k, &a.v, &a.atty, &a.attproj, &a.resid2, &a.ln2, &a.fcproj}) v->assign(LS * N * C, 0);
  a.resid3.assign(L * N * C, 0);  // every layer's output: the next layer's input
  for (auto* v : {&a.ln1_mean, &a.ln1_rstd, &a.ln2_mean, &a.ln2_rstd}) v->assign(LS * N, 0);
  a.lse.assign(LS * N * H, 0);
  a.fch.assign(LS * N * 4 * C, 0);
  a.fch_gelu.assign((recompute_ != Recompute::kNone ? 1 : L) * N * 4 * C, 0);
  a.lnf.assign(N * C, 0);
  a.lnf_mean.assign(N, 0);
  a.lnf_rstd.assign(N, 0);
  a.logits.assign(N * Vp, 0);
  a.losses.assign(N, 0);
  for (auto* v : {&a.dresidual, &a.dln, &a.dq, &a.dk, &a.dv, &a.datty}) v->assign(N * C, 0);
  a.dfch.assign(N * 4 * C, 0);
  a.dfch_gelu.assign(N * 4 * C, 0);
}

void GptModel::LayerForward(int l, int s) {
  const int B = acts_.B, T = acts_.T, C = config_.n_embd, H = config_.n_head;
  const int N = B * T;
  const size_t NC = static_cast<size_t>(N) * C, N4C = NC * 4;
  Acts& a = acts_;
  const std::string p = "h." + std::to_string(l) + ".";
  const float* residual = l == 0 ? a.encoded.data() : L(a.resid3, l - 1, NC);  // (B,T,C)
  float* ln1 = L(a.ln1, s, NC);
  float* q = L(a.q, s, NC);
  float* kk = L(a.k, s, NC);
  float* v = L(a.v, s, NC);
  float* atty = L(a.atty, s, NC);
  float* attproj = L(a.attproj, s, NC);
  float* resid2 = L(a.resid2, s, NC);
  float* ln2 = L(a.ln2, s, NC);
  float* fch = L(a.fch, s, N4C);
  float* fch_gelu = L(a.fch_gelu, recompute_ != Recompute::kNone ? 0 : l, N4C);
  float* fcproj = L(a.fcproj, s, NC);
  float* resid3 = L(a.resid3, l, NC);
  // ln1 (B,T,C) = LayerNorm(residual)
  k_.layernorm_forward(ln1, L(a.ln1_mean, s, N), L(a.ln1_rstd, s, N), residual, Param(p + "ln_1.weight"),
                       Param(p + "ln_1.bias"), N, C);
  // q, k, v (B,T,C) = ln1 @ W^T + b
  k_.matmul_forward(q, ln1, Param(p + "attn.q.weight"), Param(p + "attn.q.bias"), N, C, C);
  k_.matmul_forward(kk, ln1, Param(p + "attn.k.weight"), Param(p + "attn.k.bias"), N, C, C);
  k_.matmul_forward(v, ln1, Param(p + "attn.v.weight"), Param(p + "attn.v.bias"), N, C, C);
  // atty (B,T,C) = causal attention over H heads; lse (B,H,T)
  k_.attention_forward(atty, L(a.lse, s, static_cast<size_t>(N) * H), q, kk, v, B, T, C, H);
  // attproj (B,T,C) = atty @ Wproj^T + b; resid2 = residual + attproj
  k_.matmul_forward(attproj, atty, Param(p + "attn.proj.weight"), Param(p + "attn.proj.bias"), N, C, C);
  k_.residual_forward(resid2, residual, attproj, NC);
  // ln2 (B,T,C); fch (B,T,4C) = ln2 @ Wfc^T + b; fch_gelu = GELU(fch)
  k_.layernorm_forward(ln2, L(a.ln2_mean, s, N), L(a.ln2_rstd, s, N), resid2, Param(p + "ln_2.weight"),
                       Param(p + "ln_2.bias"), N, C);
  k_.matmul_forward(fch, ln2, Param(p + "mlp.fc.weight"), Param(p + "mlp.fc.bias"), N, C, 4 * C);
  k_.gelu_forward(fch_gelu, fch, N4C);
  // fcproj (B,T,C) = fch_gelu @ Wproj^T + b; resid3 = resid2 + fcproj
  k_.matmul_forward(fcproj, fch_gelu, Param(p + "mlp.proj.weight"), Param(p + "mlp.proj.bias"), N, 4 * C, C);
  k_.residual_forward(resid3, resid2, fcproj, NC);
}

double GptModel::Forward(const int32_t* tokens, const int32_t* targets, int B, int T, float grad_scale) {
  EnsureActs(B, T);
  const int C = config_.n_embd, V = config_.vocab_size, Vp = config_.padded_vocab;
  const int N = B * T;
  const size_t NC = static_cast<size_t>(N) * C;
  tokens_.assign(tokens, tokens + N);
  targets_.assign(targets, targets + N);
  Acts& a = acts_;

  k_.encoder_forward(a.encoded.data(), tokens, Param("wte.weight"), Param("wpe.weight"), B, T, C);  // (B,T,C)
  const int slot_of_layer = recompute_ == Recompute::kFull ? 0 : 1;  // slot = l * slot_of_layer
  for (int l = 0; l < config_.n_layer; ++l) LayerForward(l, l * slot_of_layer);
  const float* last = L(a.resid3, config_.n_layer - 1, NC);
  k_.layernorm_forward(a.lnf.data(), a.lnf_mean.data(), a.lnf_rstd.data(), last, Param("ln_f.weight"),
                       Param("ln_f.bias"), N, C);
  // logits (B,T,Vp) = lnf @ wte^T (tied); padded rows of wte are zero
  k_.matmul_forward(a.logits.data(), a.lnf.data(), Param("wte.weight"), nullptr, N, C, Vp);
  // losses (B,T); with grad_scale the logits become their gradient in place
  double total = k_.crossentropy_forward_backward(a.logits.data(), a.losses.data(), targets, N, V, Vp, grad_scale);
  have_grad_logits_ = grad_scale != 0.0f;
  return total / N;
}

size_t GptModel::ActivationFloatsAllocated() const {
  const Acts& a = acts_;
  size_t n = 0;
  for (const auto* v : {&a.encoded, &a.ln1, &a.ln1_mean, &a.ln1_rstd, &a.q, &a.k, &a.v, &a.atty, &a.lse, &a.attproj,
                        &a.resid2, &a.ln2, &a.ln2_mean, &a.ln2_rstd, &a.fch, &a.fch_gelu, &a.fcproj, &a.resid3, &a.lnf,
                        &a.lnf_mean, &a.lnf_rstd, &a.logits, &a.losses, &a.dresidual, &a.dln, &a.dq, &a.dk, &a.dv,
                        &a.datty, &a.dfch, &a.dfch_gelu}) {
    n += v->size();
  }
  return n;
}

void GptModel::ZeroGrad() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

void GptModel::Backward() {
  if (!have_grad_logits_) std::abort();  // Forward(..., grad_scale != 0) must come first
  have_grad_logits_ = false;
  const int B = acts_.B, T = acts_.T, C = config_.n_embd, H = config_.n_head, Vp = config_.padded_vocab;
  const int N = B * T;
  const size_t NC = static_cast<size_t>(N) * C, N4C = NC * 4;
  Acts& a = acts_;
  auto zero = [](std::vector<float>& v) { std::fill(v.begin(), v.end(), 0.0f); };
  // Offsets where each layer's parameters start (layer L: ln_f), for the grad-ready hook.
  auto layer_start = [&](int l) {
    return l == config_.n_layer ? layout_.Find("ln_f.weight")->offset
                                : layout_.Find("h." + std::to_string(l) + ".ln_1.weight")->offset;
  };
  auto acquire = [&](size_t begin, size_t end) {
    if (sink_) active_.push_back({begin, end, sink_->Acquire(begin, end)});
  };
  auto ready = [&](size_t begin, size_t end) {
    if (grad_ready_) grad_ready_(begin, end);
    if (sink_) {
      std::erase_if(active_, [&](const ActiveRange& r) { return r.begin == begin; });
      sink_->Release(begin, end);
    }
  };
  // Sink mode: the embeddings' and ln_f's ranges first (wte takes the LM head's gradient now and the
  // encoder's at the very end), then each layer's just before its backward.
  acquire(0, layer_start(0));
  acquire(layer_start(config_.n_layer), layout_.total_floats());

  // dlnf (B,T,C) = dlogits @ wte; dwte += dlogits^T @ lnf
  zero(a.dln);
  k_.matmul_backward(a.dln.data(), Grad("wte.weight"), nullptr, a.logits.data(), a.lnf.data(), Param("wte.weight"), N,
                     C, Vp);
  // dresidual (B,T,C) = d(resid3 of the last layer)
  zero(a.dresidual);
  k_.layernorm_backward(a.dresidual.data(), Grad("ln_f.weight"), Grad("ln_f.bias"), a.dln.data(),
                        L(a.resid3, config_.n_layer - 1, NC), Param("ln_f.weight"), a.lnf_mean.data(),
                        a.lnf_rstd.data(), N, C);
  ready(layer_start(config_.n_layer), layout_.total_floats());
  for (int l = config_.n_layer - 1; l >= 0; --l) {
    acquire(layer_start(l), layer_start(l + 1));
    const std::string p = "h." + std::to_string(l) + ".";
    const float* residual = l == 0 ? a.encoded.data() : L(a.resid3, l - 1, NC);
    // The layer's activations: kept (slot l), or recomputed now into slot 0.
    const int s = recompute_ == Recompute::kFull ? 0 : l;
    if (recompute_ == Recompute::kFull) LayerForward(l, 0);
    // resid3 = resid2 + fcproj: d(fcproj) = dresidual
    float* fch_gelu = L(a.fch_gelu, recompute_ != Recompute::kNone ? 0 : l, N4C);
    if (recompute_ == Recompute::kSelective) k_.gelu_forward(fch_gelu, L(a.fch, s, N4C), N4C);  // this layer's GELU
    zero(a.dfch_gelu);
    k_.matmul_backward(a.dfch_gelu.data(), Grad(p + "mlp.proj.weight"), Grad(p + "mlp.proj.bias"), a.dresidual.data(),
                       fch_gelu, Param(p + "mlp.proj.weight"), N, 4 * C, C);
    k_.gelu_backward(a.dfch.data(), L(a.fch, s, N4C), a.dfch_gelu.data(), N4C);  // dfch (B,T,4C)
    zero(a.dln);
    k_.matmul_backward(a.dln.data(), Grad(p + "mlp.fc.weight"), Grad(p + "mlp.fc.bias"), a.dfch.data(),
                       L(a.ln2, s, NC), Param(p + "mlp.fc.weight"), N, C, 4 * C);
    // dresidual += LN2 backward: now d(resid2)
    k_.layernorm_backward(a.dresidual.data(), Grad(p + "ln_2.weight"), Grad(p + "ln_2.bias"), a.dln.data(),
                          L(a.resid2, s, NC), Param(p + "ln_2.weight"), L(a.ln2_mean, s, N), L(a.ln2_rstd, s, N), N,
                          C);
    // resid2 = residual + attproj: d(attproj) = dresidual
    zero(a.datty);
    k_.matmul_backward(a.datty.data(), Grad(p + "attn.proj.weight"), Grad(p + "attn.proj.bias"), a.dresidual.data(),
                       L(a.atty, s, NC), Param(p + "attn.proj.weight"), N, C, C);
    // dq, dk, dv (B,T,C)
    k_.attention_backward(a.dq.data(), a.dk.data(), a.dv.data(), a.datty.data(), L(a.q, s, NC), L(a.k, s, NC),
                          L(a.v, s, NC), L(a.atty, s, NC), L(a.lse, s, static_cast<size_t>(N) * H), B, T, C, H);
    zero(a.dln);
    const float* ln1 = L(a.ln1, s, NC);
    k_.matmul_backward(a.dln.data(), Grad(p + "attn.q.weight"), Grad(p + "attn.q.bias"), a.dq.data(), ln1,
                       Param(p + "attn.q.weight"), N, C, C);
    k_.matmul_backward(a.dln.data(), Grad(p + "attn.k.weight"), Grad(p + "attn.k.bias"), a.dk.data(), ln1,
                       Param(p + "attn.k.weight"), N, C, C);
    k_.matmul_backward(a.dln.data(), Grad(p + "attn.v.weight"), Grad(p + "attn.v.bias"), a.dv.data(), ln1,
                       Param(p + "attn.v.weight"), N, C, C);
    // dresidual += LN1 backward: now d(residual), the previous layer's resid3
    k_.layernorm_backward(a.dresidual.data(), Grad(p + "ln_1.weight"), Grad(p + "ln_1.bias"), a.dln.data(), residual,
                          Param(p + "ln_1.weight"), L(a.ln1_mean, s, N), L(a.ln1_rstd, s, N), N, C);
    ready(layer_start(l), layer_start(l + 1));
  }
  k_.encoder_backward(Grad("wte.weight"), Grad("wpe.weight"), a.dresidual.data(), tokens_.data(), B, T, C);
  ready(0, layer_start(0));
}

}  // namespace anneal
