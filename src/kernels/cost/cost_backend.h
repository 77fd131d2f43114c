// CostBackend: a backend that runs nothing. Each op records what the CUDA backend's kernels do for
// the same call (kernels/cuda/cuda_backend.cc, path by path): kernel launches (cuBLASLt GEMMs and
// memsets counted as launches), FLOPs, bytes read and written in global memory (the intermediate
// buffers its kernels write and read back included, e.g. attention path 1's (B·H, T, T) scores), and
// host synchronisations (an op that returns a scalar reads it back; Synchronize on a stream). Its
// memory is address space only (reserved, never touched: the model's host code never touches device
// memory, which the sealed test backend proves), so one training step of any model size "runs" on it
// in seconds, through the model's own code (DecoderModel, StepPlan, AdamW) — the op list is the
// step's, not a second description of it. The allocator's high-water mark is the step's peak.
// kernels/cost/roofline.h prices the records on a DeviceSpec. `flash` selects attention path 2
// (ANNEAL_CUDA_ATTENTION=flash on the device), else path 1, the CUDA backend's default.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "tensor/backend.h"

namespace anneal {

// One op at one shape, over every call of a step.
struct OpRecord {
  std::string op;      // OpName() (with the part of the op, e.g. "linear_backward (weight GEMM)"), or
                       // copy_from_host / copy_to_host / synchronize
  std::string shape;   // what sets its cost, e.g. "16384x768 -> 2304" (a GEMM's N x K -> M)
  long calls = 0;
  double flops = 0;    // in all calls
  double bytes = 0;    // read + written in global memory, all calls
  long launches = 0;   // kernels (GEMMs, memsets) in all calls
  long syncs = 0;      // host synchronisations in all calls
  // What does the arithmetic: CUDA cores (elementwise, rows), cuBLASLt's GEMMs, or anneal's own
  // flash-attention kernels (tensor cores, priced at their own attained fraction).
  enum class Engine { kCores, kGemm, kFlash } engine = Engine::kCores;
};

class CostBackend final : public Backend {
 public:
  explicit CostBackend(bool flash_attention = false);
  ~CostBackend() override;

  // Forget the records (keep the memory): the step to price starts here.
  void ResetRecords();
  // The records in the order their (op, shape) first appeared.
  std::vector<OpRecord> Records() const;
  long launches() const;
  long syncs() const;

  const std::string& name() const override { return name_; }
  Device device() const override { return Device::Cuda(0); }
  bool Supports(Op, DType t) const override { return t == DType::kF32 || t == DType::kBF16; }
  bool HostAccessible() const override { return false; }
  Allocator& allocator() override;
  void CopyFromHost(const TV& dst, const void* src, const Stream& s) override;
  void CopyToHost(void* dst, const TV& src, const Stream& s) override;
  Stream CopyStream() override { return Stream{&copy_tag_, device()}; }
  void Synchronize(const Stream& s) override;
  double MeasurePeakGflops(DType) override { return 0; }
  void SetThreads(int) override {}
  int Threads() const override { return 1; }

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
  void LinearBackwardWrite(const Stream& s, const TV& dinp, const TV& dw, const TV& dbias, const TV& dout,
                           const TV& inp, const TV& w) override;
  void LinearBackwardGelu(const Stream& s, const TV& dpre, const TV& dw, const TV& dbias, const TV& dout,
                          const TV& inp, const TV& w, const TV& pre) override;
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
  void SumSquaresEach(const Stream& s, const std::vector<TV>& gs, double* out) override;
  void Scale(const Stream& s, const TV& g, float f) override;
  void AdamW(const Stream& s, const TV& p, const TV& g, const TV& m, const TV& v, float lr, float beta1, float beta2,
             float eps, float wd, int t) override;
  void AdamWEach(const Stream& s, const TV& p, const TV& g, const TV& m, const TV& v, const TV& working,
                 const std::vector<AdamWRange>& ranges, float lr, float beta1, float beta2, float eps, int t) override;
  void Zero(const Stream& s, const TV& x) override;
  void Copy(const Stream& s, const TV& dst, const TV& src) override;

 private:
  class Reserve;
  // Adds one call of `op` at `shape`; its record.
  OpRecord& Add(const std::string& op, const std::string& shape, double flops, double bytes, long launches, long syncs = 0,
                OpRecord::Engine engine = OpRecord::Engine::kCores);
  bool FlashFits(const TV& q, int H) const;
  // LinearBackward's GEMMs and bias gradient, the input gradient accumulated (beta 1) or written.
  void LinearGrads(const TV& dinp, const TV& dw, const TV& dbias, const TV& dout, const TV& inp, const TV& w,
                   bool accumulate_dinp);
  // A GEMM of (n x k) by (k x m) with `accumulate` (beta = 1: C read too), batched `batch` times.
  OpRecord& Gemm(const char* op, int64_t n, int64_t k, int64_t m, size_t elem, bool accumulate, int64_t batch = 1);

  std::string name_ = "cost";
  bool flash_;
  std::unique_ptr<Reserve> alloc_;
  int copy_tag_ = 0;
  std::map<std::pair<std::string, std::string>, size_t> index_;
  std::vector<OpRecord> records_;
};

}  // namespace anneal
