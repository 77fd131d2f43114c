// Backend: a device's memory, streams and ops — the seam between the model and the kernels.
//
// A backend (kernels/registry.h: "ref", the plain C++ truth; "cpu", OpenBLAS + OpenMP + AVX2; later
// "cuda") owns an allocator for its device, copies between host and device (asynchronous on a
// stream; the host backends copy at once), and implements the ops the model is made of. Ops take
// views of the backend's memory and the stream they run on; they are as coarse as a fast backend
// fuses them (linear + bias + GELU, residual + LayerNorm, softmax + cross-entropy, one flat AdamW).
// `Supports(op, dtype)` says which ops a backend has in which dtype; the parity harness
// (tests/kernels/parity_test.cc) runs every registered backend and dtype against "ref" and reports
// an unsupported pair as skipped, never passed.
//
// Conventions (kernels/ops.h): row-major; B batch, T time, C channels, H heads, N rows (= B*T), OC
// output channels, V vocabulary, Vp padded vocabulary. Forward ops write their outputs (`=`).
// Backward ops ACCUMULATE (`+=`) into parameter gradients and into the input gradient of linear,
// layernorm and the embeddings; attention and GELU backward WRITE their input gradients. Weights are
// in torch's Linear layout (OC, C). Every view given to an op is contiguous unless the op says so.
//
// Thread-safety: one backend object serves one rank's compute thread; ops on the host use OpenMP
// inside. A failing op is an invariant violation (shapes are checked by the model's construction),
// so ops return nothing; allocation returns a Result.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "tensor/buffer.h"
#include "tensor/stream.h"
#include "tensor/view.h"

namespace anneal {

// Every op a backend may implement, by name in OpName(). Adding an op means: a value here, a virtual
// method below, ref and cpu implementations, and a parity case (the harness fails without one).
enum class Op : uint8_t {
  kEmbeddingForward,
  kEmbeddingBackward,
  kVocabEmbeddingForward,
  kVocabEmbeddingBackward,
  kAddPositions,
  kLayerNormForward,
  kLayerNormBackward,
  kResidualLayerNormForward,
  kLinearForward,
  kLinearBackward,
  kBiasAdd,
  kAttentionForward,
  kAttentionBackward,
  kAttentionDecode,
  kGeluForward,
  kGeluBackward,
  kResidualForward,
  kAccumulate,
  kCrossEntropy,
  kVocabLossStats,
  kVocabLossCombine,
  kSumSquares,
  kScale,
  kAdamW,
  kZero,
  kCopy,
  kRmsNormForward,
  kRmsNormBackward,
  kRotary,
  kSwiGluForward,
  kSwiGluBackward,
  kCount
};
const char* OpName(Op op);
std::vector<Op> AllOps();

// Timing marks for the step profiler on a device (tensor/device_trace.h): points in a stream whose
// device time the host reads once the stream has passed them. A backend whose ops complete when
// called (the host) has none: its host spans are already the ops' times.
class TimingMarks {
 public:
  virtual ~TimingMarks() = default;
  virtual void* Mark(const Stream& s) = 0;              // a point in s, after the work issued so far
  virtual void Wait(const Stream& s) = 0;               // returns once s passed every mark made on it
  virtual double ElapsedMs(void* from, void* to) = 0;   // device time between two passed marks
  virtual void Release() = 0;                           // every mark made so far
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const std::string& name() const = 0;
  virtual Device device() const = 0;
  virtual bool Supports(Op op, DType t) const = 0;
  // Whether the host may read and write this backend's memory directly (the host backends). Code that
  // needs values on the host (checkpoints, hashes, sampling) uses the pointer itself when true and a
  // staged copy through CopyToHost / CopyFromHost otherwise (a GPU, or a test backend that seals its
  // memory outside its ops).
  virtual bool HostAccessible() const { return device().is_cpu(); }

  // ---- memory, copies, streams ----
  virtual Allocator& allocator() = 0;
  // `n` elements of `t`, zeroed; `what` names the allocation in an out-of-memory error.
  Result<Buffer> Allocate(DType t, size_t n, const std::string& what) {
    return Buffer::Make(allocator(), n * SizeOf(t), what);
  }
  // dst (this backend's memory) <- dst.bytes() bytes from host memory src; and back. Asynchronous on
  // `s` where the device is not the host: the host memory must stay valid until s is synchronized.
  // Host staging memory (AllocateHostStaging) is read and written when the stream reaches the copy,
  // in the stream's order (a copy into it, then a copy out of it on the same stream, is safe).
  virtual void CopyFromHost(const TV& dst, const void* src, const Stream& s) = 0;
  virtual void CopyToHost(void* dst, const TV& src, const Stream& s) = 0;
  virtual Stream DefaultStream() { return Stream{nullptr, device()}; }
  virtual Event RecordEvent(const Stream& s) { return Event{nullptr, s.device}; }
  // Work issued to `s` after this waits for `e`.
  virtual void WaitEvent(const Stream& /*s*/, const Event& /*e*/) {}
  virtual void Synchronize(const Stream& /*s*/) {}
  // A second stream for copies that overlap compute (checkpoint snapshots);
  // the default one where a backend has one stream (the host, whose copies are done when they
  // return). Synchronize on it may be called from another thread than the one issuing work. Events
  // live for a ring of recordings on their stream; waiting on one recorded again since waits for a
  // later point of the same stream, never an earlier one.
  virtual Stream CopyStream() { return DefaultStream(); }
  // A copy stream of its own for activation offload (model/activation_offload.h), so its copies never
  // queue behind a checkpoint snapshot's on CopyStream(); CopyStream() where a backend has no third.
  virtual Stream OffloadStream() { return CopyStream(); }
  // Zeroed host memory this backend copies to and from fastest (CUDA: page-locked), for buffers
  // reused by many copies; null when it cannot be had. Freed with FreeHostStaging.
  virtual void* AllocateHostStaging(size_t bytes) { return std::calloc(bytes ? bytes : 1, 1); }
  virtual void FreeHostStaging(void* p) { std::free(p); }
  // Where the device's time went, op by op, when the backend keeps such a table (CUDA:
  // ANNEAL_CUDA_OP_TIMES=1); "" otherwise. The trainer prints it at the end of a run.
  virtual std::string OpTimeTable() { return ""; }
  // The backend's timing marks (the CUDA backend's CUDA events); null on the host.
  virtual TimingMarks* timing_marks() { return nullptr; }

  // ---- the machine ----
  // The measured dense-GEMM rate in GFLOP/s for dtype t at the current thread count: the ceiling MFU
  // is computed against (the host: best of 4 square 768^3 sgemm products, ~0.05 s).
  virtual double MeasurePeakGflops(DType t) = 0;
  // Threads the ops may use (host backends: OpenMP and OpenBLAS; 0 = leave as is).
  virtual void SetThreads(int n) = 0;
  // The threads the ops use now.
  virtual int Threads() const = 0;

  // ---- ops ----
  // Operands are of the compute dtype (f32 or bf16) except: token ids and targets i32; the
  // statistics — LayerNorm's mean and rstd, attention's lse and decode scores, the losses — f32;
  // the vocabulary-parallel loss statistics f64; AdamW's p, m and v f32 (the fp32 masters and
  // moments; g is of the compute dtype).
  // out (B,T,C) = wte[tokens] + wpe[t]; tokens (B,T) i32.
  virtual void EmbeddingForward(const Stream& s, const TV& out, const TV& tokens, const TV& wte, const TV& wpe) = 0;
  // dwte[tokens] += dout; dwpe[t] += dout.
  virtual void EmbeddingBackward(const Stream& s, const TV& dwte, const TV& dwpe, const TV& dout, const TV& tokens) = 0;
  // Vocabulary-parallel embedding: rows (N,C) = wte_slice[t - v0] for tokens this slice holds
  // (v0 <= t < v0 + Vl), 0 for the others. tokens (N) i32, wte_slice (Vl, C).
  virtual void VocabEmbeddingForward(const Stream& s, const TV& rows, const TV& tokens, const TV& wte_slice,
                                     int64_t v0) = 0;
  // dwte_slice[t - v0] += dall[n] for the tokens of this slice (in row order); dwpe[n % T] += dall[n].
  virtual void VocabEmbeddingBackward(const Stream& s, const TV& dwte_slice, const TV& dwpe, const TV& dall,
                                      const TV& tokens, int64_t v0, int T) = 0;
  // out (R,C) += wpe[(row0 + n) % T] for each row n.
  virtual void AddPositions(const Stream& s, const TV& out, const TV& wpe, int64_t row0, int T) = 0;

  // out (N,C) = (inp - mean) * rstd * w + b; mean, rstd (N) saved for backward. eps = 1e-5.
  virtual void LayerNormForward(const Stream& s, const TV& out, const TV& mean, const TV& rstd, const TV& inp,
                                const TV& w, const TV& b) = 0;
  // dinp += ...; dw += ...; db += ...
  virtual void LayerNormBackward(const Stream& s, const TV& dinp, const TV& dw, const TV& db, const TV& dout,
                                 const TV& inp, const TV& w, const TV& mean, const TV& rstd) = 0;
  // resid (N,C) = a + b, then out = LayerNorm(resid) as LayerNormForward.
  virtual void ResidualLayerNormForward(const Stream& s, const TV& resid, const TV& out, const TV& mean,
                                        const TV& rstd, const TV& a, const TV& b, const TV& w, const TV& bias) = 0;

  // out (N,OC) = inp (N,C) @ w^T + bias (OC; empty = none); when gelu_out is given, also
  // gelu_out = GELU(out) (tanh approximation).
  virtual void LinearForward(const Stream& s, const TV& out, const TV& inp, const TV& w, const TV& bias,
                             const TV& gelu_out = TV()) = 0;
  // dinp += dout @ w; dw += dout^T @ inp; dbias += column sums of dout (dbias empty = none).
  virtual void LinearBackward(const Stream& s, const TV& dinp, const TV& dw, const TV& dbias, const TV& dout,
                              const TV& inp, const TV& w) = 0;
  // LinearBackward whose input gradient is written (=) rather than added to: no zeroing pass before
  // it (a GPU's GEMM with beta 0). The host backends: Zero, then LinearBackward — bit for bit what the
  // model did before this op existed.
  virtual void LinearBackwardWrite(const Stream& s, const TV& dinp, const TV& dw, const TV& dbias, const TV& dout,
                                   const TV& inp, const TV& w) {
    Zero(s, dinp);
    LinearBackward(s, dinp, dw, dbias, dout, inp, w);
  }
  // The linear layer after a GELU (GPT-2's MLP down projection), its backward through the GELU in one:
  // dpre = GELU'(pre) * (dout @ w), written (pre: the GELU's input, inp = GELU(pre)); dw += dout^T @
  // inp; dbias += column sums of dout. A GPU: one GEMM with cuBLASLt's DGELU epilogue (bf16), no GELU
  // backward pass. The host backends: LinearBackwardWrite, then GeluBackward in place — bit for bit
  // the two ops into separate buffers.
  virtual void LinearBackwardGelu(const Stream& s, const TV& dpre, const TV& dw, const TV& dbias, const TV& dout,
                                  const TV& inp, const TV& w, const TV& pre) {
    LinearBackwardWrite(s, dpre, dw, dbias, dout, inp, w);
    GeluBackward(s, dpre, pre, dpre);
  }
  // out (N,OC) += bias (OC) on every row.
  virtual void BiasAdd(const Stream& s, const TV& out, const TV& bias) = 0;

  // Causal self-attention over q (B,T,C) in H heads of hs = C/H and k, v (B,T,Ckv) in Hkv = Ckv/hs
  // key/value heads (Hkv divides H; query head h reads key/value head h / (H/Hkv): grouped-query
  // attention, Ckv = C the classic form): out (B,T,C); lse (B,H,T) each query row's log-sum-exp of
  // scaled scores, so backward recomputes the probabilities. A backend whose attention lacks the
  // grouped form (Ckv < C) does not support kRotary (the families that group heads need both).
  virtual void AttentionForward(const Stream& s, const TV& out, const TV& lse, const TV& q, const TV& k, const TV& v,
                                int H) = 0;
  // Writes dq (B,T,C), dk, dv (B,T,Ckv) (a key/value head's gradient sums its query heads').
  virtual void AttentionBackward(const Stream& s, const TV& dq, const TV& dk, const TV& dv, const TV& dout,
                                 const TV& q, const TV& k, const TV& v, const TV& out, const TV& lse, int H) = 0;
  // One query position attending to the cache: out (C) = softmax(q . kcache[u] / sqrt(C/H)) @ vcache
  // over cached rows u = 0 .. rows-1 of kcache, vcache (rows, Ckv) (strided views of a (maxT, Ckv)
  // cache are accepted), head by head (query head h reading key/value head h / (H/Hkv) as
  // AttentionForward); `scores` (>= rows floats) is scratch.
  virtual void AttentionDecode(const Stream& s, const TV& out, const TV& q, const TV& kcache, const TV& vcache,
                               const TV& scores, int H) = 0;

  // RMSNorm (the Llama family): out (N,C) = inp * rstd * w with rstd (N) = 1 / sqrt(mean(inp^2) + eps),
  // saved for backward.
  virtual void RmsNormForward(const Stream& s, const TV& out, const TV& rstd, const TV& inp, const TV& w, float eps) = 0;
  // dinp += ...; dw += ...
  virtual void RmsNormBackward(const Stream& s, const TV& dinp, const TV& dw, const TV& dout, const TV& inp,
                               const TV& w, const TV& rstd) = 0;
  // Rotary position embedding, in place, on x (B,T,H*hs) (rotate-half convention, as transformers'
  // Llama): in each head, for i < hs/2, (x_i, x_{i+hs/2}) <- (x_i cos - x_{i+hs/2} sin,
  // x_{i+hs/2} cos + x_i sin) with cos, sin (T, hs/2) f32 the angles of x's positions t, row t.
  // inverse: the rotation by minus the angle (its backward: the transpose of a rotation).
  virtual void Rotary(const Stream& s, const TV& x, const TV& cos, const TV& sin, int H, bool inverse) = 0;
  // SwiGLU: out = silu(gate) * up, silu(g) = g / (1 + exp(-g)); equal shapes.
  virtual void SwiGluForward(const Stream& s, const TV& out, const TV& gate, const TV& up) = 0;
  // Writes dgate, dup from dout.
  virtual void SwiGluBackward(const Stream& s, const TV& dgate, const TV& dup, const TV& gate, const TV& up,
                              const TV& dout) = 0;

  virtual void GeluForward(const Stream& s, const TV& out, const TV& inp) = 0;
  // dinp = gelu'(inp) * dout (written).
  virtual void GeluBackward(const Stream& s, const TV& dinp, const TV& inp, const TV& dout) = 0;
  // out = a + b (elementwise).
  virtual void ResidualForward(const Stream& s, const TV& out, const TV& a, const TV& b) = 0;
  // dst += src (elementwise).
  virtual void Accumulate(const Stream& s, const TV& dst, const TV& src) = 0;

  // Fused softmax + cross-entropy over logits (N,Vp) whose first V columns are real:
  // losses[i] = logsumexp(logits[i,:V]) - logits[i, targets[i]]. When dscale != 0 the logits are
  // overwritten by their gradient dscale * (softmax - onehot), 0 in the padding columns: no second
  // (N,Vp) buffer exists. Returns the sum of the losses in a fixed order.
  virtual double CrossEntropy(const Stream& s, const TV& logits, const TV& losses, const TV& targets, int V,
                              float dscale) = 0;
  // The vocabulary-parallel loss, step 1 on one slice: logits (N,Vl), of which the first `nreal`
  // columns are real tokens of this slice (vocabulary ids v0 ..): stats (N,2) f64 = per row this
  // slice's log-sum-exp (-inf when nreal = 0) and the target's logit (0 when another slice holds it).
  virtual void VocabLossStats(const Stream& s, const TV& stats, const TV& logits, const TV& targets, int64_t v0,
                              int nreal) = 0;
  // Step 2, after the group gathered every slice's stats into gathered (tp, N, 2) f64: each row's
  // loss from the slices in rank order (losses (N); row_loss (N,2) f64 gets it in column 0), and
  // with dscale != 0 the logits overwritten by their gradient as CrossEntropy does. Returns the sum
  // of the row losses in row order.
  virtual double VocabLossCombine(const Stream& s, const TV& logits, const TV& losses, const TV& row_loss,
                                  const TV& gathered, const TV& targets, int64_t v0, int nreal, float dscale) = 0;

  // Sum of squares of g accumulated in double in a fixed order.
  virtual double SumSquares(const Stream& s, const TV& g) = 0;
  // out[i] = SumSquares(s, gs[i]) bit for bit (0 for an empty view), for many views with one host
  // synchronisation in all
  // (the gradient norm over every parameter tensor: one read back a step, not one a tensor). The
  // host backends' ops are done when they return: one call each.
  virtual void SumSquaresEach(const Stream& s, const std::vector<TV>& gs, double* out) {
    for (size_t i = 0; i < gs.size(); ++i) out[i] = gs[i].numel() == 0 ? 0.0 : SumSquares(s, gs[i]);
  }
  // g *= f
  virtual void Scale(const Stream& s, const TV& g, float f) = 0;
  // AdamW step t (1-based) over a flat range: p, g, m, v of equal size; decoupled weight decay wd.
  virtual void AdamW(const Stream& s, const TV& p, const TV& g, const TV& m, const TV& v, float lr, float beta1,
                     float beta2, float eps, float wd, int t) = 0;
  // AdamW step t over several ranges of flat views at once (p fp32, g, m, v of equal size): range i
  // is elements [offset, offset + n) with weight decay wd, exactly AdamW on that slice; with `working`
  // given (the bf16 working weights, p's size) it then holds p rounded to nearest even — the
  // precision policy's master -> working copy, in the same pass on a GPU (one launch for every
  // tensor instead of one a tensor and a conversion). The host backends: one AdamW a range, one Copy.
  struct AdamWRange {
    size_t offset = 0, n = 0;
    float wd = 0;
    bool operator==(const AdamWRange&) const = default;
  };
  virtual void AdamWEach(const Stream& s, const TV& p, const TV& g, const TV& m, const TV& v, const TV& working,
                         const std::vector<AdamWRange>& ranges, float lr, float beta1, float beta2, float eps, int t) {
    for (const AdamWRange& r : ranges) {
      const auto at = [&](const TV& x) {
        return TV(static_cast<char*>(x.data()) + r.offset * SizeOf(x.dtype()), x.dtype(),
                  {static_cast<int64_t>(r.n)}, x.device());
      };
      AdamW(s, at(p), at(g), at(m), at(v), lr, beta1, beta2, eps, r.wd, t);
    }
    if (!working.empty()) Copy(s, working, p);
  }
  // x = 0 (gradient zeroing, scratch clearing).
  virtual void Zero(const Stream& s, const TV& x) = 0;
  // dst = src, equal shapes; strided views accepted (pipeline stage buffers, data parallelism's
  // bucket buffers, a column block of a matrix). Between f32 and bf16 (contiguous views; supported
  // where the backend supports kCopy in bf16): widened exactly, or rounded to nearest even — the
  // precision policy's master-to-working copy.
  virtual void Copy(const Stream& s, const TV& dst, const TV& src) = 0;
};

}  // namespace anneal
