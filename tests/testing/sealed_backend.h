// SealedBackend: a test backend whose memory the host cannot touch except inside its own ops and
// copies — every allocation is its own mmap region, PROT_NONE whenever no op of this backend runs.
// Any code outside the backend that reads or writes a tensor's memory directly (instead of through
// an op, CopyToHost/CopyFromHost or tensor/host_copy.h) dies with SIGSEGV. That is what a GPU
// backend needs of the rest of anneal. The ops themselves are the wrapped backend's (bit for bit).
// Single-threaded use only, like any backend.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "tensor/backend.h"

namespace anneal::testing {

class SealedBackend : public Backend {
 public:
  // `inner` does the arithmetic; it must be a host backend.
  SealedBackend(std::string name, Backend& inner);
  ~SealedBackend() override;

  const std::string& name() const override { return name_; }
  Device device() const override { return Device::Cpu(); }
  bool Supports(Op op, DType t) const override { return inner_.Supports(op, t); }
  bool HostAccessible() const override { return false; }
  Allocator& allocator() override;
  void CopyFromHost(const TV& dst, const void* src, const Stream& s) override;
  void CopyToHost(void* dst, const TV& src, const Stream& s) override;
  double MeasurePeakGflops(DType t) override { return inner_.MeasurePeakGflops(t); }
  void SetThreads(int n) override { inner_.SetThreads(n); }
  int Threads() const override { return inner_.Threads(); }
  // A copy stream of its own whose copies run as late as a GPU's may: queued when issued, run only
  // when an event recorded after them is waited for (on any stream) or the stream is synchronized.
  // Code that reads a copy's result, or reuses its source, without waiting for its event sees stale
  // memory. Off: CopyStream() is the default stream and copies run when called.
  void set_deferred_copy_stream(bool on) { deferred_ = on; }
  Stream CopyStream() override;
  Event RecordEvent(const Stream& s) override;
  void WaitEvent(const Stream& s, const Event& e) override;
  void Synchronize(const Stream& s) override;
  // Copies issued to the deferred copy stream and not yet run.
  size_t deferred_copies() const { return queue_.size() - ran_; }

  // Ops run since construction (the test checks the model actually ran here).
  long ops() const { return ops_; }
  // Live allocations.
  size_t regions() const;

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
  class Alloc;
  // Unseals every region for the guard's lifetime (an op or a copy), then seals them again.
  class Open {
   public:
    explicit Open(SealedBackend* b);
    ~Open();

   private:
    SealedBackend* b_;
  };
  void Protect(int prot);
  bool OnCopyStream(const Stream& s) const { return deferred_ && s.handle == &queue_; }
  void RunQueued(size_t upto);  // the first `upto` queued copies, in order

  std::string name_;
  Backend& inner_;
  Alloc* alloc_;
  int depth_ = 0;
  long ops_ = 0;
  bool deferred_ = false;
  std::vector<std::function<void()>> queue_;  // the copy stream's copies, in issue order
  size_t ran_ = 0;                             // how many of them have run
};

}  // namespace anneal::testing
