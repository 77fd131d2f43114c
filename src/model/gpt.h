// GptModel: GPT-2's forward and backward, written out layer by layer over a KernelTable. No
// parallelism inside (DESIGN.md): parallel layouts wrap this model, they do not change it.
//
// Memory: parameters and gradients are each one flat fp32 buffer in ParamLayout order; activations
// for a (B, T) batch are allocated once, on the first Forward with that shape. Not thread-safe (the
// kernels use threads inside).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/ops.h"
#include "model/config.h"

namespace anneal {

// Gradient storage handed out range by range (ZeRO-2: no rank holds a full gradient buffer). During
// Backward the model calls Acquire(begin, end) before it first writes a range's gradients and
// Release(begin, end) once they are final for this batch (the same ranges, in the same order, as the
// grad-ready hook); Acquire returns end-begin zeroed floats that stay valid until Release.
class GradSink {
 public:
  virtual ~GradSink() = default;
  virtual float* Acquire(size_t begin, size_t end) = 0;
  virtual void Release(size_t begin, size_t end) = 0;
};

class GptModel {
 public:
  GptModel(const GptConfig& config, const KernelTable& kernels);

  const GptConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  const KernelTable& kernels() const { return k_; }
  float* params() { return params_.data(); }
  const float* params() const { return params_.data(); }
  float* grads() { return grads_.data(); }
  const float* grads() const { return grads_.data(); }
  size_t num_floats() const { return params_.size(); }
  float* Param(const std::string& name);  // aborts on an unknown name (an invariant)
  float* Grad(const std::string& name);

  // Activation recomputation (model/config.h: none, selective, full). All three give bit-identical
  // gradients (the same kernels on the same inputs, in the same order).
  void set_recompute(Recompute r) {
    recompute_ = r;
    acts_.B = acts_.T = 0;  // reallocate on the next Forward
  }
  Recompute recompute() const { return recompute_; }

  // GPT-2 initialization from a seed: N(0, 0.02) weights, N(0, 0.02/sqrt(2L)) for the two residual
  // projections, zero biases, LayerNorm weights 1; padded vocabulary rows zero.
  void InitWeights(uint64_t seed);

  // tokens, targets: (B, T), 1 <= T <= max_seq_len, ids < vocab_size (checked by the caller).
  // Returns the mean cross-entropy over B*T positions. With grad_scale != 0 the logits buffer is
  // turned into d(loss * grad_scale * B*T)/d(logits) for Backward (grad_scale = 1/(B*T*accum)).
  double Forward(const int32_t* tokens, const int32_t* targets, int B, int T, float grad_scale);
  // Logits (B, T, Vp) of the last Forward with grad_scale == 0.
  const float* logits() const { return acts_.logits.data(); }
  // Adds this batch's gradients into grads() (call ZeroGrad between optimizer steps).
  void Backward();
  // Called during Backward each time a contiguous range [begin, end) of grads() is final for this
  // batch, in decreasing address order covering everything: ln_f, layer L-1, ..., layer 0, then
  // the embeddings (wte is final only after the encoder's backward). Data parallelism hangs its
  // gradient communication here, so it overlaps the rest of the backward pass. Empty = none.
  void set_grad_ready_hook(std::function<void(size_t begin, size_t end)> hook) { grad_ready_ = std::move(hook); }
  // Gradients go to `sink` range by range instead of grads(), whose buffer is freed (grads() is then
  // null and ZeroGrad does nothing). The sink must outlive the model's Backward calls.
  void set_grad_sink(GradSink* sink);
  void ZeroGrad();
  // Floats of activation memory currently allocated (GptConfig::ActivationFloats is its formula).
  size_t ActivationFloatsAllocated() const;

 private:
  struct Acts {
    int B = 0, T = 0;
    std::vector<float> encoded, ln1, ln1_mean, ln1_rstd, q, k, v, atty, lse, attproj, resid2, ln2, ln2_mean,
        ln2_rstd, fch, fch_gelu, fcproj, resid3, lnf, lnf_mean, lnf_rstd, logits, losses;
    // backward scratch
    std::vector<float> dresidual, dln, dq, dk, dv, datty, dfch, dfch_gelu;
  };
  void EnsureActs(int B, int T);
  // Layer l's forward from its input (the previous layer's resid3, or the embeddings) into activation
  // slot s (l, or 0 when activations are recomputed); writes resid3 of layer l.
  void LayerForward(int l, int s);
  // Slice of a per-layer activation array for layer l: (N * width) floats.
  static float* L(std::vector<float>& a, int l, size_t width) { return a.data() + static_cast<size_t>(l) * width; }

  GptConfig config_;
  ParamLayout layout_;
  const KernelTable& k_;
  std::vector<float> params_, grads_;
  Acts acts_;
  std::vector<int32_t> tokens_, targets_;
  bool have_grad_logits_ = false;
  Recompute recompute_ = Recompute::kNone;
  std::function<void(size_t, size_t)> grad_ready_;
  GradSink* sink_ = nullptr;
  struct ActiveRange {
    size_t begin, end;
    float* data;
  };
  std::vector<ActiveRange> active_;  // sink mode: ranges acquired and not yet released
};

}  // namespace anneal
