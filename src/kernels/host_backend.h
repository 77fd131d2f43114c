// HostBackend: the Backend of host memory over a KernelTable (kernels/ops.h) — "ref" over the
// reference kernels (one thread, and bf16 by emulation), "cpu" over the optimized ones (OpenMP,
// f32 only). The ops the table lacks (the vocabulary-parallel embedding and loss, bias add, cached
// decode attention, rotary embeddings, SwiGLU, accumulation) run kernels/ref/row_ops.h's reference
// arithmetic for both, over row ranges: each row or element is computed by one thread in a fixed
// order, so the cpu backend's threads change no bit. Zeroing and copies are memory moves, written here.
#pragma once

#include <string>

#include "kernels/ops.h"
#include "tensor/backend.h"

namespace anneal {

class HostBackend : public Backend {
 public:
  // threaded: OpenMP in the ops written here; emulate_bf16: accept bf16 views (inputs widened,
  // outputs rounded once at the end of the op).
  HostBackend(std::string name, const KernelTable& k, bool threaded, bool emulate_bf16);

  const std::string& name() const override { return name_; }
  Device device() const override { return Device::Cpu(); }
  bool Supports(Op op, DType t) const override;
  Allocator& allocator() override { return HostAllocator(); }
  void CopyFromHost(const TV& dst, const void* src, const Stream& s) override;
  void CopyToHost(void* dst, const TV& src, const Stream& s) override;
  double MeasurePeakGflops(DType t) override;
  void SetThreads(int n) override;
  int Threads() const override;

  void EmbeddingForward(const Stream& s, const TV& out, const TV& tokens, const TV& wte, const TV& wpe) override;
  void EmbeddingBackward(const Stream& s, const TV& dwte, const TV& dwpe, const TV& dout, const TV& tokens) override;
  void VocabEmbeddingForward(const Stream& s, const TV& rows, const TV& tokens, const TV& wte_slice,
                             int64_t v0) override;
  void VocabEmbeddingBackward(const Stream& s, const TV& dwte_slice, const TV& dwpe, const TV& dall, const TV& tokens,
                              int64_t v0, int T) override;
  void AddPositions(const Stream& s, const TV& out, const TV& wpe, int64_t row0, int T) override;
  void LayerNormForward(const Stream& s, const TV& out, const TV& mean, const TV& rstd, const TV& inp, const TV& w,
                        const TV& b) override;
  void LayerNormBackward(const Stream& s, const TV& dinp, const TV& dw, const TV& db, const TV& dout, const TV& inp,
                         const TV& w, const TV& mean, const TV& rstd) override;
  void ResidualLayerNormForward(const Stream& s, const TV& resid, const TV& out, const TV& mean, const TV& rstd,
                                const TV& a, const TV& b, const TV& w, const TV& bias) override;
  void LinearForward(const Stream& s, const TV& out, const TV& inp, const TV& w, const TV& bias,
                     const TV& gelu_out) override;
  void LinearBackward(const Stream& s, const TV& dinp, const TV& dw, const TV& dbias, const TV& dout, const TV& inp,
                      const TV& w) override;
  void BiasAdd(const Stream& s, const TV& out, const TV& bias) override;
  void AttentionForward(const Stream& s, const TV& out, const TV& lse, const TV& q, const TV& k, const TV& v,
                        int H) override;
  void AttentionBackward(const Stream& s, const TV& dq, const TV& dk, const TV& dv, const TV& dout, const TV& q,
                         const TV& k, const TV& v, const TV& out, const TV& lse, int H) override;
  void AttentionDecode(const Stream& s, const TV& out, const TV& q, const TV& kcache, const TV& vcache,
                       const TV& scores, int H) override;
  void RmsNormForward(const Stream& s, const TV& out, const TV& rstd, const TV& inp, const TV& w, float eps) override;
  void RmsNormBackward(const Stream& s, const TV& dinp, const TV& dw, const TV& dout, const TV& inp, const TV& w,
                       const TV& rstd) override;
  void Rotary(const Stream& s, const TV& x, const TV& cos, const TV& sin, int H, bool inverse) override;
  void SwiGluForward(const Stream& s, const TV& out, const TV& gate, const TV& up) override;
  void SwiGluBackward(const Stream& s, const TV& dgate, const TV& dup, const TV& gate, const TV& up,
                      const TV& dout) override;
  void GeluForward(const Stream& s, const TV& out, const TV& inp) override;
  void GeluBackward(const Stream& s, const TV& dinp, const TV& inp, const TV& dout) override;
  void ResidualForward(const Stream& s, const TV& out, const TV& a, const TV& b) override;
  void Accumulate(const Stream& s, const TV& dst, const TV& src) override;
  double CrossEntropy(const Stream& s, const TV& logits, const TV& losses, const TV& targets, int V,
                      float dscale) override;
  void VocabLossStats(const Stream& s, const TV& stats, const TV& logits, const TV& targets, int64_t v0,
                      int nreal) override;
  double VocabLossCombine(const Stream& s, const TV& logits, const TV& losses, const TV& row_loss, const TV& gathered,
                          const TV& targets, int64_t v0, int nreal, float dscale) override;
  double SumSquares(const Stream& s, const TV& g) override;
  void Scale(const Stream& s, const TV& g, float f) override;
  void AdamW(const Stream& s, const TV& p, const TV& g, const TV& m, const TV& v, float lr, float beta1, float beta2,
             float eps, float wd, int t) override;
  void Zero(const Stream& s, const TV& x) override;
  void Copy(const Stream& s, const TV& dst, const TV& src) override;

 private:
  std::string name_;
  const KernelTable& k_;
  bool threaded_, emulate_bf16_;
};

}  // namespace anneal
