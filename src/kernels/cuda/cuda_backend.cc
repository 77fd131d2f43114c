#include "kernels/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <vector>

#include "kernels/cuda/check.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/flash_attention.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/op_times.h"
#include "kernels/cuda/rows.h"

// Times the op it opens (kernels/cuda/op_times.h) when ANNEAL_CUDA_OP_TIMES is set.
#define ANNEAL_TIMED(s) const cuda::OpTimes::Scope anneal_timed_(&times_, __func__, S(s))

namespace anneal {

namespace {

using cuda::Elem;

// The Backend contract has no error path: say what failed and stop with its exit code.
void Must(const Status& s) {
  if (s.ok()) return;
  std::fprintf(stderr, "error: %s\n", s.message().c_str());
  std::fflush(stderr);
  std::_Exit(s.ExitCode());
}
#define MUST_CUDA(call) Must([&]() -> Status { ANNEAL_CUDA_CHECK(call); return Status::Ok(); }())

Elem E(DType t) {
  if (t == DType::kF32) return Elem::kF32;
  if (t == DType::kBF16) return Elem::kBF16;
  Must(Internal(std::string("the CUDA backend got a ") + DTypeName(t) + " operand where f32 or bf16 belongs"));
  return Elem::kF32;
}
int64_t Cols(const TV& v) { return v.dim(v.ndim() - 1); }
int64_t RowsOf(const TV& v) { return v.numel() / std::max<int64_t>(1, Cols(v)); }
const int32_t* I32(const TV& v) { return static_cast<const int32_t*>(v.data()); }

class CudaAllocator : public Allocator {
 public:
  explicit CudaAllocator(int index) : index_(index) {}
  // The backend's stream: allocations are zeroed on it, ordered before the work that uses them.
  void set_stream(cudaStream_t s) { stream_ = s; }
  Device device() const override { return Device::Cuda(index_); }
  Result<void*> Allocate(size_t bytes, const std::string& what) override {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
      cudaGetLastError();  // not left pending for the next launch's check
      return Status(Code::kInternal, "out of GPU memory allocating " + what + " (" + std::to_string(bytes) +
                                         " bytes): " + cudaGetErrorString(e) +
                                         "; use train.recompute=selective or full, or a smaller data.batch_size");
    }
    const cudaError_t z = cudaMemsetAsync(p, 0, bytes, stream_);  // zeroed, as every allocator of the runtime
    if (z != cudaSuccess) return cuda::CudaStatus(z, "cudaMemset", __FILE__, __LINE__);
    return p;
  }
  void Free(void* p, size_t) override { cudaFree(p); }

 private:
  int index_;
  cudaStream_t stream_ = nullptr;
};

// The step profiler's marks (tensor/device_trace.h): timing events, made per mark while a step is
// traced (the ring's events are made without timing, which costs less) and destroyed at Release.
class CudaTimingMarks : public TimingMarks {
 public:
  ~CudaTimingMarks() override { Release(); }
  void* Mark(const Stream& s) override {
    cudaEvent_t e = nullptr;
    MUST_CUDA(cudaEventCreate(&e));
    made_.push_back(e);
    MUST_CUDA(cudaEventRecord(e, static_cast<cudaStream_t>(s.handle)));
    return e;
  }
  void Wait(const Stream& s) override { MUST_CUDA(cudaStreamSynchronize(static_cast<cudaStream_t>(s.handle))); }
  double ElapsedMs(void* from, void* to) override {
    float ms = 0;
    MUST_CUDA(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(from), static_cast<cudaEvent_t>(to)));
    return ms;
  }
  void Release() override {
    for (cudaEvent_t e : made_) cudaEventDestroy(e);
    made_.clear();
  }

 private:
  std::vector<cudaEvent_t> made_;
};

class CudaBackend : public Backend {
 public:
  CudaBackend(int index, int sms) : name_("cuda"), index_(index), alloc_(index) {
    MUST_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    MUST_CUDA(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    MUST_CUDA(cudaStreamCreateWithFlags(&offload_stream_, cudaStreamNonBlocking));
    copy_events_.resize(64);
    for (auto& e : copy_events_) MUST_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    offload_events_.resize(64);
    for (auto& e : offload_events_) MUST_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    alloc_.set_stream(stream_);
    events_.resize(4096);
    for (auto& e : events_) MUST_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    for (Staging& slot : staging_) {
      MUST_CUDA(cudaHostAlloc(&slot.p, kStagingBytes, cudaHostAllocDefault));
      MUST_CUDA(cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming));
    }
    d_.stream = stream_;
    d_.sms = sms;
    Must(gemms_.Init());
    flash_ = UseFlashAttention();
  }
  ~CudaBackend() override {
    cudaStreamSynchronize(stream_);
    cudaStreamSynchronize(copy_stream_);
    cudaStreamSynchronize(offload_stream_);
    cudaStreamDestroy(copy_stream_);
    cudaStreamDestroy(offload_stream_);
    for (auto& e : offload_events_) cudaEventDestroy(e);
    for (auto& e : copy_events_) cudaEventDestroy(e);
    for (Staging& slot : staging_) {
      cudaFreeHost(slot.p);
      cudaEventDestroy(slot.done);
    }
    for (auto& e : events_) cudaEventDestroy(e);
    cudaStreamDestroy(stream_);
  }

  const std::string& name() const override { return name_; }
  Device device() const override { return Device::Cuda(index_); }
  bool Supports(Op, DType t) const override { return t == DType::kF32 || t == DType::kBF16; }
  Allocator& allocator() override { return alloc_; }
  // Small copies (a micro-batch's tokens and targets) go through a ring of pinned staging buffers:
  // from pageable memory the driver would first wait for all the stream's work, so the host could
  // not run ahead of the GPU. A slot is reused once the copy from it has completed (its event).
  // From page-locked memory (AllocateHostStaging: offloaded activations) the copy is direct and
  // reads the source when the stream reaches it, after the copies into it issued before.
  void CopyFromHost(const TV& dst, const void* src, const Stream& s) override {
    if (!dst.contiguous()) Must(Internal("CopyFromHost into a strided view: " + dst.ToString()));
    const size_t n = dst.bytes();
    if (n == 0) return;
    if (n <= kStagingBytes && !PageLocked(src)) {
      Staging& slot = staging_[next_staging_++ % staging_.size()];
      if (slot.used) MUST_CUDA(cudaEventSynchronize(slot.done));
      std::memcpy(slot.p, src, n);
      MUST_CUDA(cudaMemcpyAsync(dst.data(), slot.p, n, cudaMemcpyHostToDevice, S(s)));
      MUST_CUDA(cudaEventRecord(slot.done, S(s)));
      slot.used = true;
      return;
    }
    MUST_CUDA(cudaMemcpyAsync(dst.data(), src, n, cudaMemcpyHostToDevice, S(s)));
  }
  void CopyToHost(void* dst, const TV& src, const Stream& s) override {
    if (!src.contiguous()) Must(Internal("CopyToHost from a strided view: " + src.ToString()));
    MUST_CUDA(cudaMemcpyAsync(dst, src.data(), src.bytes(), cudaMemcpyDeviceToHost, S(s)));
  }
  Stream DefaultStream() override { return Stream{stream_, device()}; }
  Event RecordEvent(const Stream& s) override {
    // Each stream its own ring (the copy stream's: checkpoint snapshots, offloaded activations). An
    // event recorded again marks a later point of the same stream, so a wait on an event that was
    // re-recorded since still waits for the work it first marked (and a little more).
    cudaEvent_t e = S(s) == copy_stream_      ? copy_events_[next_copy_event_++ % copy_events_.size()]
                    : S(s) == offload_stream_ ? offload_events_[next_offload_event_++ % offload_events_.size()]
                                              : events_[next_event_++ % events_.size()];
    MUST_CUDA(cudaEventRecord(e, S(s)));
    return Event{e, device()};
  }
  void WaitEvent(const Stream& s, const Event& e) override {
    if (e.handle) MUST_CUDA(cudaStreamWaitEvent(S(s), static_cast<cudaEvent_t>(e.handle), 0));
  }
  void Synchronize(const Stream& s) override {
    MUST_CUDA(cudaSetDevice(index_));  // also called from the checkpoint writer's thread
    MUST_CUDA(cudaStreamSynchronize(S(s)));
  }
  Stream CopyStream() override { return Stream{copy_stream_, device()}; }
  Stream OffloadStream() override { return Stream{offload_stream_, device()}; }
  std::string OpTimeTable() override { return times_.Table(); }
  TimingMarks* timing_marks() override { return &marks_; }
  void* AllocateHostStaging(size_t bytes) override {
    void* p = nullptr;
    if (cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault) != cudaSuccess) {
      (void)cudaGetLastError();  // a failed pinned allocation is not sticky: the caller falls back
      return nullptr;
    }
    std::memset(p, 0, bytes);
    return p;
  }
  void FreeHostStaging(void* p) override { cudaFreeHost(p); }
  double MeasurePeakGflops(DType t) override;
  void SetThreads(int) override {}
  int Threads() const override { return 1; }

  // ---- embeddings, LayerNorm ----
  void EmbeddingForward(const Stream& s, const TV& out, const TV& tokens, const TV& wte, const TV& wpe) override {
    ANNEAL_TIMED(s);
    Must(cuda::EmbeddingForward(D(s), E(out.dtype()), out.data(), I32(tokens), wte.data(), wpe.data(), tokens.dim(0),
                                tokens.dim(1), Cols(out)));
  }
  void EmbeddingBackward(const Stream& s, const TV& dwte, const TV& dwpe, const TV& dout, const TV& tokens) override {
    ANNEAL_TIMED(s);
    Must(cuda::EmbeddingBackward(D(s), E(dout.dtype()), dwte.data(), dwpe.data(), dout.data(), I32(tokens),
                                 tokens.dim(0), tokens.dim(1), Cols(dout), scratch_));
  }
  void VocabEmbeddingForward(const Stream& s, const TV& rows, const TV& tokens, const TV& wte_slice,
                             int64_t v0) override {
    ANNEAL_TIMED(s);
    Must(cuda::VocabEmbeddingForward(D(s), E(rows.dtype()), rows.data(), I32(tokens), wte_slice.data(), tokens.numel(),
                                     Cols(rows), wte_slice.dim(0), v0));
  }
  void VocabEmbeddingBackward(const Stream& s, const TV& dwte_slice, const TV& dwpe, const TV& dall, const TV& tokens,
                              int64_t v0, int T) override {
    ANNEAL_TIMED(s);
    Must(cuda::VocabEmbeddingBackward(D(s), E(dall.dtype()), dwte_slice.data(), dwpe.data(), dall.data(), I32(tokens),
                                      tokens.numel(), Cols(dall), dwte_slice.dim(0), v0, T, scratch_));
  }
  void AddPositions(const Stream& s, const TV& out, const TV& wpe, int64_t row0, int T) override {
    ANNEAL_TIMED(s);
    Must(cuda::AddPositions(D(s), E(out.dtype()), out.data(), wpe.data(), RowsOf(out), Cols(out), row0, T));
  }
  void LayerNormForward(const Stream& s, const TV& out, const TV& mean, const TV& rstd, const TV& inp, const TV& w,
                        const TV& b) override {
    ANNEAL_TIMED(s);
    Must(cuda::LayerNormForward(D(s), E(inp.dtype()), out.data(), mean.f32(), rstd.f32(), inp.data(), w.data(),
                                b.data(), RowsOf(inp), Cols(inp)));
  }
  void LayerNormBackward(const Stream& s, const TV& dinp, const TV& dw, const TV& db, const TV& dout, const TV& inp,
                         const TV& w, const TV& mean, const TV& rstd) override {
    ANNEAL_TIMED(s);
    Must(cuda::LayerNormBackward(D(s), E(inp.dtype()), dinp.data(), dw.data(), db.data(), dout.data(), inp.data(),
                                 w.data(), mean.f32(), rstd.f32(), RowsOf(inp), Cols(inp), scratch_));
  }
  void ResidualLayerNormForward(const Stream& s, const TV& resid, const TV& out, const TV& mean, const TV& rstd,
                                const TV& a, const TV& b, const TV& w, const TV& bias) override {
    ANNEAL_TIMED(s);
    Must(cuda::LayerNormForward(D(s), E(a.dtype()), out.data(), mean.f32(), rstd.f32(), resid.data(), w.data(),
                                bias.data(), RowsOf(a), Cols(a), resid.data(), a.data(), b.data()));
  }

  // ---- linear layers ----
  void LinearForward(const Stream& s, const TV& out, const TV& inp, const TV& w, const TV& bias,
                     const TV& gelu_out) override {
    ANNEAL_TIMED(s);
    const int64_t N = RowsOf(inp), C = Cols(inp), OC = w.dim(0);
    auto aligned = [](const TV& v) { return v.empty() || (reinterpret_cast<uintptr_t>(v.data()) % 16) == 0; };
    // bf16 with GELU: one GEMM writing GELU(x) to gelu_out and x to out (cuBLASLt's GELU_AUX
    // epilogues, which want OC % 8 == 0 and aligned operands). f32 keeps the separate kernel: the
    // f32 path is the exact one, and cuBLASLt does not document its GELU's formula.
    if (!gelu_out.empty() && inp.dtype() == DType::kBF16 && OC % 8 == 0 && aligned(bias) && aligned(out) &&
        aligned(gelu_out)) {
      const cudagemm::GemmArgs g = cudagemm::ForwardArgs(N, C, OC, !bias.empty(), true);
      Must(gemms_.Run(S(s), g, Elem::kBF16, w.data(), inp.data(), gelu_out.data(), bias.empty() ? nullptr : bias.data(),
                      cuda::Batch{}, out.data()));
      return;
    }
    // cuBLASLt's bias epilogue wants an aligned bias; a bias at an odd offset is added by a kernel.
    const bool epilogue = !bias.empty() && aligned(bias);
    const cudagemm::GemmArgs g = cudagemm::ForwardArgs(N, C, OC, epilogue, false);
    Must(gemms_.Run(S(s), g, E(inp.dtype()), w.data(), inp.data(), out.data(), epilogue ? bias.data() : nullptr));
    if (!bias.empty() && !epilogue) Must(cuda::BiasAdd(D(s), E(out.dtype()), out.data(), bias.data(), N, OC));
    if (!gelu_out.empty()) Must(cuda::Gelu(D(s), E(out.dtype()), gelu_out.data(), out.data(), out.numel()));
  }
  void LinearBackward(const Stream& s, const TV& dinp, const TV& dw, const TV& dbias, const TV& dout, const TV& inp,
                      const TV& w) override {
    ANNEAL_TIMED(s);
    const int64_t N = RowsOf(inp), C = Cols(inp), OC = w.dim(0);
    const Elem t = E(dout.dtype());
    if (!dinp.empty()) Must(gemms_.Run(S(s), cudagemm::InputGradArgs(N, C, OC), t, w.data(), dout.data(), dinp.data()));
    if (!dw.empty()) Must(gemms_.Run(S(s), cudagemm::WeightGradArgs(N, C, OC), t, inp.data(), dout.data(), dw.data()));
    if (!dbias.empty()) Must(cuda::BiasGrad(D(s), t, dbias.data(), dout.data(), N, OC, scratch_));
  }
  // The input gradient written by the GEMM itself (beta 0): no memset pass before it.
  void LinearBackwardWrite(const Stream& s, const TV& dinp, const TV& dw, const TV& dbias, const TV& dout,
                           const TV& inp, const TV& w) override {
    ANNEAL_TIMED(s);
    const int64_t N = RowsOf(inp), C = Cols(inp), OC = w.dim(0);
    const Elem t = E(dout.dtype());
    cudagemm::GemmArgs in = cudagemm::InputGradArgs(N, C, OC);
    in.beta = 0.0f;
    if (!dinp.empty()) Must(gemms_.Run(S(s), in, t, w.data(), dout.data(), dinp.data()));
    if (!dw.empty()) Must(gemms_.Run(S(s), cudagemm::WeightGradArgs(N, C, OC), t, inp.data(), dout.data(), dw.data()));
    if (!dbias.empty()) Must(cuda::BiasGrad(D(s), t, dbias.data(), dout.data(), N, OC, scratch_));
  }
  // bf16 with the width a multiple of 8 and aligned operands: the input gradient through the GELU in the
  // GEMM's DGELU epilogue (pre read as aux), the same conditions as the forward's GELU_AUX. Otherwise
  // (f32: the exact path) the two ops.
  void LinearBackwardGelu(const Stream& s, const TV& dpre, const TV& dw, const TV& dbias, const TV& dout,
                          const TV& inp, const TV& w, const TV& pre) override {
    const int64_t N = RowsOf(inp), C = Cols(inp), OC = w.dim(0);
    auto aligned = [](const TV& v) { return (reinterpret_cast<uintptr_t>(v.data()) % 16) == 0; };
    if (dout.dtype() != DType::kBF16 || C % 8 != 0 || !aligned(dpre) || !aligned(pre)) {
      Backend::LinearBackwardGelu(s, dpre, dw, dbias, dout, inp, w, pre);
      return;
    }
    ANNEAL_TIMED(s);
    cudagemm::GemmArgs in = cudagemm::InputGradArgs(N, C, OC);
    in.beta = 0.0f;
    in.epilogue = cudagemm::Epilogue::kDGelu;
    Must(gemms_.Run(S(s), in, Elem::kBF16, w.data(), dout.data(), dpre.data(), nullptr, cuda::Batch{},
                    const_cast<void*>(pre.data())));
    if (!dw.empty()) {
      Must(gemms_.Run(S(s), cudagemm::WeightGradArgs(N, C, OC), Elem::kBF16, inp.data(), dout.data(), dw.data()));
    }
    if (!dbias.empty()) Must(cuda::BiasGrad(D(s), Elem::kBF16, dbias.data(), dout.data(), N, OC, scratch_));
  }
  void BiasAdd(const Stream& s, const TV& out, const TV& bias) override {
    ANNEAL_TIMED(s);
    Must(cuda::BiasAdd(D(s), E(out.dtype()), out.data(), bias.data(), RowsOf(out), Cols(out)));
  }

  // ---- attention ----
  void AttentionForward(const Stream& s, const TV& out, const TV& lse, const TV& q, const TV& k, const TV& v,
                        int H) override;
  void AttentionBackward(const Stream& s, const TV& dq, const TV& dk, const TV& dv, const TV& dout, const TV& q,
                         const TV& k, const TV& v, const TV& out, const TV& lse, int H) override;
  void AttentionDecode(const Stream& s, const TV& out, const TV& q, const TV& kcache, const TV& vcache,
                       const TV& scores, int H) override {
    ANNEAL_TIMED(s);
    const int64_t rows = kcache.dim(0);
    if (scores.dtype() != DType::kF32 || scores.numel() < rows) {
      Must(Internal("AttentionDecode's scores must be f32 of at least " + std::to_string(rows) + " floats: " +
                    scores.ToString()));
    }
    const int64_t hs = q.numel() / H;
    const int Hkv = static_cast<int>(kcache.dim(1) / hs);
    Must(cuda::AttentionDecode(D(s), E(q.dtype()), out.data(), q.data(), kcache.data(), kcache.stride(0),
                               vcache.data(), vcache.stride(0), rows, q.numel(), H, scores.f32(), Hkv));
  }

  // ---- the Llama family's ops ----
  void RmsNormForward(const Stream& s, const TV& out, const TV& rstd, const TV& inp, const TV& w, float eps) override {
    ANNEAL_TIMED(s);
    Must(cuda::RmsNormForward(D(s), E(inp.dtype()), out.data(), rstd.f32(), inp.data(), w.data(), RowsOf(inp), Cols(inp),
                              eps));
  }
  void RmsNormBackward(const Stream& s, const TV& dinp, const TV& dw, const TV& dout, const TV& inp, const TV& w,
                       const TV& rstd) override {
    ANNEAL_TIMED(s);
    Must(cuda::RmsNormBackward(D(s), E(inp.dtype()), dinp.data(), dw.data(), dout.data(), inp.data(), w.data(),
                               rstd.f32(), RowsOf(inp), Cols(inp), scratch_));
  }
  void Rotary(const Stream& s, const TV& x, const TV& cos, const TV& sin, int H, bool inverse) override {
    ANNEAL_TIMED(s);
    Must(cuda::Rotary(D(s), E(x.dtype()), x.data(), cos.f32(), sin.f32(), x.dim(0), x.dim(1), H, x.dim(2) / H,
                      inverse));
  }
  void SwiGluForward(const Stream& s, const TV& out, const TV& gate, const TV& up) override {
    ANNEAL_TIMED(s);
    Must(cuda::SwiGlu(D(s), E(out.dtype()), out.data(), gate.data(), up.data(), static_cast<size_t>(out.numel())));
  }
  void SwiGluBackward(const Stream& s, const TV& dgate, const TV& dup, const TV& gate, const TV& up,
                      const TV& dout) override {
    ANNEAL_TIMED(s);
    Must(cuda::SwiGluBackward(D(s), E(gate.dtype()), dgate.data(), dup.data(), gate.data(), up.data(), dout.data(),
                              static_cast<size_t>(gate.numel())));
  }
  // Key/value heads of an attention whose q (B,T,C) has H heads and k (B,T,Ckv).
  static int KvHeads(const TV& q, const TV& k, int H) {
    const int64_t hs = q.dim(q.ndim() - 1) / H, ckv = k.dim(k.ndim() - 1);
    if (hs <= 0 || ckv % hs != 0 || H % (ckv / hs) != 0) {
      Must(Internal("attention with " + std::to_string(H) + " heads of " + std::to_string(hs) + " over keys " +
                    k.ToString() + ": the key/value heads must divide the query heads"));
    }
    return static_cast<int>(ckv / hs);
  }

  // ---- elementwise ----
  void GeluForward(const Stream& s, const TV& out, const TV& inp) override {
    ANNEAL_TIMED(s);
    Must(cuda::Gelu(D(s), E(inp.dtype()), out.data(), inp.data(), inp.numel()));
  }
  void GeluBackward(const Stream& s, const TV& dinp, const TV& inp, const TV& dout) override {
    ANNEAL_TIMED(s);
    Must(cuda::GeluBackward(D(s), E(inp.dtype()), dinp.data(), inp.data(), dout.data(), inp.numel()));
  }
  void ResidualForward(const Stream& s, const TV& out, const TV& a, const TV& b) override {
    ANNEAL_TIMED(s);
    Must(cuda::Residual(D(s), E(a.dtype()), out.data(), a.data(), b.data(), a.numel()));
  }
  void Accumulate(const Stream& s, const TV& dst, const TV& src) override {
    ANNEAL_TIMED(s);
    Must(cuda::Accumulate(D(s), E(dst.dtype()), dst.data(), src.data(), dst.numel()));
  }

  // ---- losses, norms, optimizer ----
  double CrossEntropy(const Stream& s, const TV& logits, const TV& losses, const TV& targets, int V,
                      float dscale) override {
    ANNEAL_TIMED(s);
    double sum = 0;
    Must(cuda::CrossEntropy(D(s), E(logits.dtype()), logits.data(), losses.f32(), I32(targets), logits.dim(0),
                            logits.dim(1), V, dscale, &sum));
    return sum;
  }
  void VocabLossStats(const Stream& s, const TV& stats, const TV& logits, const TV& targets, int64_t v0,
                      int nreal) override {
    ANNEAL_TIMED(s);
    Must(cuda::VocabLossStats(D(s), E(logits.dtype()), stats.f64(), logits.data(), I32(targets), logits.dim(0),
                              logits.dim(1), v0, nreal));
  }
  double VocabLossCombine(const Stream& s, const TV& logits, const TV& losses, const TV& row_loss, const TV& gathered,
                          const TV& targets, int64_t v0, int nreal, float dscale) override {
    ANNEAL_TIMED(s);
    double sum = 0;
    Must(cuda::VocabLossCombine(D(s), E(logits.dtype()), logits.data(), losses.f32(), row_loss.f64(), gathered.f64(),
                                static_cast<int>(gathered.dim(0)), I32(targets), logits.dim(0), logits.dim(1), v0,
                                nreal, dscale, &sum));
    return sum;
  }
  double SumSquares(const Stream& s, const TV& g) override {
    ANNEAL_TIMED(s);
    double out = 0;
    Must(cuda::SumSquares(D(s), E(g.dtype()), g.data(), static_cast<size_t>(g.numel()), scratch_, &out));
    return out;
  }
  void SumSquaresEach(const Stream& s, const std::vector<TV>& gs, double* out) override {
    ANNEAL_TIMED(s);
    std::vector<cuda::Elem> t;
    std::vector<const void*> p;
    std::vector<size_t> n;
    for (const TV& g : gs) {
      t.push_back(E(g.dtype()));
      p.push_back(g.data());
      n.push_back(static_cast<size_t>(g.numel()));
    }
    Must(cuda::SumSquaresEach(D(s), t.data(), p.data(), n.data(), gs.size(), scratch_, sum_squares_table_, out));
  }
  // One launch for every range: the chunk table is built and uploaded when the ranges change (the
  // optimizer's are fixed: once).
  void AdamWEach(const Stream& s, const TV& p, const TV& g, const TV& m, const TV& v, const TV& working,
                 const std::vector<AdamWRange>& ranges, float lr, float beta1, float beta2, float eps, int t) override {
    ANNEAL_TIMED(s);
    if (!working.empty() && (working.dtype() != DType::kBF16 || working.numel() != p.numel())) {
      Must(Internal("AdamWEach: the working copy must be bf16 of p's size: " + working.ToString()));
    }
    std::vector<uint64_t> key;  // the ranges: their chunk table's key
    for (const AdamWRange& r : ranges) {
      uint32_t wd;
      std::memcpy(&wd, &r.wd, sizeof wd);
      key.insert(key.end(), {r.offset, r.n, wd});
    }
    auto chunks = adamw_chunks_.For(S(s), key, [&] {
      std::vector<cuda::AdamWChunk> rows;
      for (const AdamWRange& r : ranges) {
        for (size_t o = 0; o < r.n; o += cuda::kAdamWChunk) {
          rows.push_back({r.offset + o, std::min(cuda::kAdamWChunk, r.n - o), r.wd});
        }
      }
      return rows;
    });
    Must(chunks.status());
    Must(cuda::AdamWChunks(D(s), p.f32(), E(g.dtype()), g.data(), m.f32(), v.f32(),
                           working.empty() ? nullptr : static_cast<uint16_t*>(working.data()),
                           static_cast<const cuda::AdamWChunk*>(*chunks), adamw_chunks_.rows(), lr, beta1, beta2, eps,
                           t));
  }
  void Scale(const Stream& s, const TV& g, float f) override {
    ANNEAL_TIMED(s);
    Must(cuda::Scale(D(s), E(g.dtype()), g.data(), f, static_cast<size_t>(g.numel())));
  }
  void AdamW(const Stream& s, const TV& p, const TV& g, const TV& m, const TV& v, float lr, float beta1, float beta2,
             float eps, float wd, int t) override {
    ANNEAL_TIMED(s);
    Must(cuda::AdamW(D(s), p.f32(), E(g.dtype()), g.data(), m.f32(), v.f32(), nullptr, static_cast<size_t>(p.numel()),
                     lr, beta1, beta2, eps, wd, t));
  }
  void Zero(const Stream& s, const TV& x) override {
    ANNEAL_TIMED(s);
    if (x.empty()) return;
    if (!x.contiguous()) Must(Internal("Zero of a strided view on the CUDA backend: " + x.ToString()));
    MUST_CUDA(cudaMemsetAsync(x.data(), 0, x.bytes(), S(s)));
  }
  void Copy(const Stream& s, const TV& dst, const TV& src) override;

 private:
  cudaStream_t S(const Stream& s) const { return s.handle ? static_cast<cudaStream_t>(s.handle) : stream_; }
  cuda::Device1D D(const Stream& s) const { return cuda::Device1D{S(s), d_.sms}; }
  // Attention's per-head buffers in scratch: q, k, v, out (or their gradients) split by head, and
  // the (B*H, T, T) scores (twice in backward).
  void* AttentionScratch(size_t elem, int64_t BTC, int64_t BHTT, int copies_btc, int copies_scores);
  // ANNEAL_CUDA_ATTENTION: "gemm" (path 1, the default until a GPU shows path 2 equal and faster)
  // or "flash" (path 2, kernels/cuda/flash_attention.h, where it has the head size and alignment).
  static bool UseFlashAttention();
  bool FlashFits(const TV& q, int H, std::initializer_list<const TV*> views) const;
  static void SplitKv(const cuda::Device1D& d, Elem t, void* kh, void* vh, const TV& k, const TV& v, int64_t B,
                      int64_t T, int64_t hs, int H, int Hkv);

  std::string name_;
  int index_;
  CudaAllocator alloc_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t copy_stream_ = nullptr;     // checkpoint snapshots
  cudaStream_t offload_stream_ = nullptr;  // offloaded activations (their own queue: never behind a snapshot)
  std::vector<cudaEvent_t> offload_events_;
  size_t next_offload_event_ = 0;
  std::vector<cudaEvent_t> copy_events_;  // the events recorded on it (RecordEvent)
  cuda::DeviceTable adamw_chunks_;       // AdamWEach's chunks, keyed by its ranges
  cuda::DeviceTable sum_squares_table_;  // SumSquaresEach's blocks, keyed by its views
  size_t next_copy_event_ = 0;
  std::vector<cudaEvent_t> events_;
  size_t next_event_ = 0;
  static bool PageLocked(const void* p) {
    if (cudaPeekAtLastError() != cudaSuccess) return false;  // an earlier error stays for its own check
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      (void)cudaGetLastError();  // this query's own failure only (none pending before it)
      return false;
    }
    return a.type == cudaMemoryTypeHost;
  }
  static constexpr size_t kStagingBytes = 4u << 20;
  struct Staging {
    void* p = nullptr;
    cudaEvent_t done = nullptr;
    bool used = false;
  };
  std::array<Staging, 8> staging_{};
  size_t next_staging_ = 0;
  cuda::Device1D d_;
  cuda::Gemms gemms_;
  cuda::Scratch scratch_, attn_scratch_;
  bool flash_ = false;
  cuda::OpTimes times_;  // ANNEAL_CUDA_OP_TIMES
  CudaTimingMarks marks_;  // train.profile_steps
};

bool CudaBackend::UseFlashAttention() {
  const char* v = std::getenv("ANNEAL_CUDA_ATTENTION");
  const std::string path = v ? v : "gemm";
  if (path != "gemm" && path != "flash") {
    Must(InvalidInput("ANNEAL_CUDA_ATTENTION=" + path + ": use gemm (path 1: cuBLASLt products around a causal "
                      "softmax) or flash (path 2: fused flash attention)"));
  }
  return path == "flash";
}

bool CudaBackend::FlashFits(const TV& q, int H, std::initializer_list<const TV*> views) const {
  if (!flash_ || !cuda::FlashAttentionSupports(q.dim(2) / H) || q.dim(2) % H != 0) return false;
  for (const TV* v : views) {
    if (q.dtype() == DType::kBF16 && reinterpret_cast<uintptr_t>(v->data()) % 16 != 0) return false;
  }
  return true;
}

void* CudaBackend::AttentionScratch(size_t elem, int64_t BTC, int64_t BHTT, int copies_btc, int copies_scores) {
  auto p = attn_scratch_.Get(elem * static_cast<size_t>(BTC * copies_btc + BHTT * copies_scores));
  Must(p.status());
  return *p;
}

// Path 1: per (batch, head) products through cuBLASLt around the causal softmax.
//   S = Q K^T (scaled in the softmax), P = causal softmax(S) with lse, O = P V.
void CudaBackend::AttentionForward(const Stream& s, const TV& out, const TV& lse, const TV& q, const TV& k, const TV& v,
                                   int H) {
  ANNEAL_TIMED(s);
  const int Hkv = KvHeads(q, k, H);
  const int64_t B = q.dim(0), T = q.dim(1), C = q.dim(2), hs = C / H, BH = B * H, BTC = B * T * C;
  const Elem t = E(q.dtype());
  if (FlashFits(q, H, {&out, &q, &k, &v})) {  // the flash path (grouped-query heads read in place)
    Must(cuda::FlashAttentionForward(D(s), t, out.data(), lse.f32(), q.data(), k.data(), v.data(), B, T, C, H, Hkv));
    return;
  }
  const size_t es = t == Elem::kF32 ? 4 : 2;
  char* base = static_cast<char*>(AttentionScratch(es, BTC, BH * T * T, 4, 1));
  void *qh = base, *kh = base + es * BTC, *vh = base + 2 * es * BTC, *oh = base + 3 * es * BTC,
       *scores = base + 4 * es * BTC;
  const cuda::Device1D d = D(s);
  Must(cuda::SplitHeads(d, t, qh, q.data(), B, T, C, H));
  SplitKv(d, t, kh, vh, k, v, B, T, hs, H, Hkv);
  const cuda::Batch per_head{static_cast<int>(BH), T * hs, T * hs, T * T};
  Must(gemms_.Run(S(s), cudagemm::ForwardArgs(T, hs, T, false, false), t, kh, qh, scores, nullptr, per_head));
  Must(cuda::CausalSoftmax(d, t, scores, lse.f32(), BH, T, 1.0f / std::sqrt(static_cast<float>(hs))));
  cudagemm::GemmArgs pv = cudagemm::InputGradArgs(T, hs, T);
  pv.beta = 0.0f;
  Must(gemms_.Run(S(s), pv, t, vh, scores, oh, nullptr, cuda::Batch{static_cast<int>(BH), T * hs, T * T, T * hs}));
  Must(cuda::MergeHeads(d, t, out.data(), oh, B, T, C, H));
}

//   dP = dO V^T; dS = P (dP - rowsum(dO O)); dV = P^T dO; dQ = scale dS K; dK = scale dS^T Q.
void CudaBackend::AttentionBackward(const Stream& s, const TV& dq, const TV& dk, const TV& dv, const TV& dout,
                                    const TV& q, const TV& k, const TV& v, const TV& out, const TV& lse, int H) {
  ANNEAL_TIMED(s);
  const int Hkv = KvHeads(q, k, H);
  const int64_t B = q.dim(0), T = q.dim(1), C = q.dim(2), hs = C / H, BH = B * H, BTC = B * T * C;
  const Elem t = E(q.dtype());
  if (FlashFits(q, H, {&dq, &dk, &dv, &dout, &q, &k, &v, &out})) {
    auto scratch = attn_scratch_.Get(cuda::FlashBackwardScratchBytes(B, T, H));
    Must(scratch.status());
    Must(cuda::FlashAttentionBackward(D(s), t, dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(),
                                      v.data(), out.data(), lse.f32(), B, T, C, H, Hkv, *scratch));
    return;
  }
  const size_t es = t == Elem::kF32 ? 4 : 2;
  char* base = static_cast<char*>(AttentionScratch(es, BTC, BH * T * T, 8, 2));
  void* h[8];
  for (int i = 0; i < 8; ++i) h[i] = base + i * es * BTC;
  void *qh = h[0], *kh = h[1], *vh = h[2], *oh = h[3], *doh = h[4], *dqh = h[5], *dkh = h[6], *dvh = h[7];
  void *scores = base + 8 * es * BTC, *dp = base + 8 * es * BTC + es * BH * T * T;
  const cuda::Device1D d = D(s);
  Must(cuda::SplitHeads(d, t, qh, q.data(), B, T, C, H));
  SplitKv(d, t, kh, vh, k, v, B, T, hs, H, Hkv);
  Must(cuda::SplitHeads(d, t, oh, out.data(), B, T, C, H));
  Must(cuda::SplitHeads(d, t, doh, dout.data(), B, T, C, H));
  const int bh = static_cast<int>(BH);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  Must(gemms_.Run(S(s), cudagemm::ForwardArgs(T, hs, T, false, false), t, kh, qh, scores, nullptr,
                  cuda::Batch{bh, T * hs, T * hs, T * T}));  // S again
  Must(gemms_.Run(S(s), cudagemm::ForwardArgs(T, hs, T, false, false), t, vh, doh, dp, nullptr,
                  cuda::Batch{bh, T * hs, T * hs, T * T}));  // dP = dO V^T
  Must(cuda::SoftmaxBackward(d, t, dp, scores, lse.f32(), doh, oh, BH, T, hs, scale, scores));  // dS; scores <- P
  cudagemm::GemmArgs dvg = cudagemm::WeightGradArgs(T, hs, T);
  dvg.beta = 0.0f;
  Must(gemms_.Run(S(s), dvg, t, doh, scores, dvh, nullptr, cuda::Batch{bh, T * hs, T * T, T * hs}));  // dV = P^T dO
  cudagemm::GemmArgs dqg = cudagemm::InputGradArgs(T, hs, T);
  dqg.beta = 0.0f;
  dqg.alpha = scale;
  Must(gemms_.Run(S(s), dqg, t, kh, dp, dqh, nullptr, cuda::Batch{bh, T * hs, T * T, T * hs}));  // dQ = scale dS K
  cudagemm::GemmArgs dkg = cudagemm::WeightGradArgs(T, hs, T);
  dkg.beta = 0.0f;
  dkg.alpha = scale;
  Must(gemms_.Run(S(s), dkg, t, qh, dp, dkh, nullptr, cuda::Batch{bh, T * hs, T * T, T * hs}));  // dK = scale dS^T Q
  Must(cuda::MergeHeads(d, t, dq.data(), dqh, B, T, C, H));
  if (Hkv == H) {
    Must(cuda::MergeHeads(d, t, dk.data(), dkh, B, T, C, H));
    Must(cuda::MergeHeads(d, t, dv.data(), dvh, B, T, C, H));
  } else {  // each key/value head: the sum of its query heads' gradients
    Must(cuda::SumKvHeads(d, t, dk.data(), dkh, B, T, hs, H, Hkv));
    Must(cuda::SumKvHeads(d, t, dv.data(), dvh, B, T, hs, H, Hkv));
  }
}

// Keys and values into (B,H,T,hs) for path 1: split by heads, or with fewer key/value heads than
// query heads each expanded to its query heads.
void CudaBackend::SplitKv(const cuda::Device1D& d, Elem t, void* kh, void* vh, const TV& k, const TV& v,
                          int64_t B, int64_t T, int64_t hs, int H, int Hkv) {
  if (Hkv == H) {
    Must(cuda::SplitHeads(d, t, kh, k.data(), B, T, hs * H, H));
    Must(cuda::SplitHeads(d, t, vh, v.data(), B, T, hs * H, H));
    return;
  }
  Must(cuda::ExpandKvHeads(d, t, kh, k.data(), B, T, hs, H, Hkv));
  Must(cuda::ExpandKvHeads(d, t, vh, v.data(), B, T, hs, H, Hkv));
}

void CudaBackend::Copy(const Stream& s, const TV& dst, const TV& src) {
  ANNEAL_TIMED(s);
  if (dst.numel() != src.numel() || dst.ndim() != src.ndim()) {
    Must(Internal("Copy of " + src.ToString() + " into " + dst.ToString()));
  }
  if (dst.dtype() != src.dtype()) {
    if (!dst.contiguous() || !src.contiguous()) Must(Internal("a converting Copy of strided views: " + src.ToString()));
    Must(cuda::Convert(D(s), E(dst.dtype()), dst.data(), E(src.dtype()), src.data(), static_cast<size_t>(src.numel())));
    return;
  }
  if (dst.contiguous() && src.contiguous()) {
    MUST_CUDA(cudaMemcpyAsync(dst.data(), src.data(), src.bytes(), cudaMemcpyDeviceToDevice, S(s)));
    return;
  }
  int64_t shape[4], ds[4], ss[4];
  for (int i = 0; i < dst.ndim(); ++i) shape[i] = dst.dim(i), ds[i] = dst.stride(i), ss[i] = src.stride(i);
  Must(cuda::StridedCopy(D(s), SizeOf(dst.dtype()), dst.data(), ds, src.data(), ss, shape, dst.ndim()));
}

// A square GEMM of 4096 (bf16) or 2048 (f32), timed with events after warm-ups: the best of 5.
double CudaBackend::MeasurePeakGflops(DType t) {
  const int64_t n = t == DType::kBF16 ? 4096 : 2048;
  const Elem e = E(t);
  const size_t bytes = static_cast<size_t>(n * n) * (e == Elem::kF32 ? 4 : 2);
  void *a = nullptr, *b = nullptr, *c = nullptr;
  MUST_CUDA(cudaMalloc(&a, bytes));
  MUST_CUDA(cudaMalloc(&b, bytes));
  MUST_CUDA(cudaMalloc(&c, bytes));
  // Random-looking, not zero (zeros run faster than real data).
  std::vector<float> host(static_cast<size_t>(n * n));
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
  void* staged = nullptr;
  MUST_CUDA(cudaMalloc(&staged, host.size() * 4));
  MUST_CUDA(cudaMemcpyAsync(staged, host.data(), host.size() * 4, cudaMemcpyHostToDevice, stream_));
  Must(cuda::Convert(d_, e, a, Elem::kF32, staged, host.size()));
  Must(cuda::Convert(d_, e, b, Elem::kF32, staged, host.size()));
  const cudagemm::GemmArgs g = cudagemm::ForwardArgs(n, n, n, false, false);
  cudaEvent_t t0, t1;
  MUST_CUDA(cudaEventCreate(&t0));
  MUST_CUDA(cudaEventCreate(&t1));
  double best = 0;
  for (int i = 0; i < 8; ++i) {
    MUST_CUDA(cudaEventRecord(t0, stream_));
    Must(gemms_.Run(stream_, g, e, a, b, c));
    MUST_CUDA(cudaEventRecord(t1, stream_));
    MUST_CUDA(cudaEventSynchronize(t1));
    float ms = 0;
    MUST_CUDA(cudaEventElapsedTime(&ms, t0, t1));
    if (i >= 3 && ms > 0) best = std::max(best, 2.0 * n * n * n / (ms * 1e-3) / 1e9);
  }
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  for (void* p : {a, b, c, staged}) cudaFree(p);
  return best;
}

}  // namespace

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

std::unique_ptr<Backend> MakeCudaBackend(int index, std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count <= index) {
    if (why) {
      *why = e != cudaSuccess ? std::string("no CUDA device usable: ") + cudaGetErrorString(e)
                              : "no CUDA device " + std::to_string(index) + " (" + std::to_string(count) + " found)";
    }
    cudaGetLastError();  // clear the sticky error of a failed query
    return nullptr;
  }
  if (cudaSetDevice(index) != cudaSuccess) {
    if (why) *why = "cudaSetDevice(" + std::to_string(index) + ") failed";
    return nullptr;
  }
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, index);
  return std::make_unique<CudaBackend>(index, std::max(1, sms));
}

}  // namespace anneal
