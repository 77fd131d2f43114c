#include "kernels/cost/cost_backend.h"

#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>

#include "kernels/cuda/flash_attention.h"

namespace anneal {

namespace {

double B(const TensorView& t) { return t.empty() ? 0.0 : static_cast<double>(t.bytes()); }
double E(const TensorView& t) { return static_cast<double>(SizeOf(t.dtype())); }
int64_t Rows(const TensorView& t) { return t.numel() / t.dim(t.ndim() - 1); }
int64_t Cols(const TensorView& t) { return t.dim(t.ndim() - 1); }
std::string Suffix(DType t) {
  std::string s;
  if (t != DType::kF32) {
    s.append(" ");
    s.append(DTypeName(t));
  }
  return s;
}
std::string Dims(const TensorView& t) {
  std::string s;
  for (int i = 0; i < t.ndim(); ++i) {
    if (i) s.append("x");
    s.append(std::to_string(t.dim(i)));
  }
  s.append(Suffix(t.dtype()));
  return s;
}
std::string Flat(const TensorView& t) {
  std::string s = std::to_string(t.numel());
  s.append(Suffix(t.dtype()));
  return s;
}
// Column-reduction partials (BiasGrad, LayerNorm's dw/db): one f32 row per 128 rows, written and read.
double Partials(int64_t rows, int64_t cols) { return 2.0 * ((rows + 127) / 128) * cols * 4; }
// CUB's radix sort of the (token, row) pairs in EmbeddingBackward: its kernels and traffic are CUB's;
// counted as 5 launches (a histogram and four 8-bit passes) each reading and writing the pairs.
constexpr long kSortLaunches = 5;

}  // namespace

// Address space only: reserved, never backed (MAP_NORESERVE, PROT_NONE), so any model size fits and
// a stray host access faults at once.
class CostBackend::Reserve final : public Allocator {
 public:
  Device device() const override { return Device::Cuda(0); }
  Result<void*> Allocate(size_t bytes, const std::string& what) override {
    void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return Status(Code::kInternal, "cost backend: no address space for " + what);
    return p;
  }
  void Free(void* p, size_t bytes) override { munmap(p, bytes); }
};

CostBackend::CostBackend(bool flash_attention) : flash_(flash_attention), alloc_(std::make_unique<Reserve>()) {}
CostBackend::~CostBackend() = default;

Allocator& CostBackend::allocator() { return *alloc_; }

void CostBackend::ResetRecords() {
  records_.clear();
  index_.clear();
}

std::vector<OpRecord> CostBackend::Records() const { return records_; }

long CostBackend::launches() const {
  long n = 0;
  for (const OpRecord& r : records_) n += r.launches;
  return n;
}

long CostBackend::syncs() const {
  long n = 0;
  for (const OpRecord& r : records_) n += r.syncs;
  return n;
}

OpRecord& CostBackend::Add(const std::string& op, const std::string& shape, double flops, double bytes, long launches,
                      long syncs, OpRecord::Engine engine) {
  auto [it, fresh] = index_.try_emplace({op, shape}, records_.size());
  if (fresh) {
    records_.push_back(OpRecord{op, shape});
    records_.back().engine = engine;
  }
  OpRecord& r = records_[it->second];
  ++r.calls;
  r.flops += flops;
  r.bytes += bytes;
  r.launches += launches;
  r.syncs += syncs;
  return r;
}

void CostBackend::CopyFromHost(const TV& dst, const void*, const Stream& s) {
  Add(s.handle == &copy_tag_ ? "copy_from_host (copy stream)" : "copy_from_host", Flat(dst), 0, B(dst), 1);
}
void CostBackend::CopyToHost(void*, const TV& src, const Stream& s) {
  Add(s.handle == &copy_tag_ ? "copy_to_host (copy stream)" : "copy_to_host", Flat(src), 0, B(src), 1);
}
void CostBackend::Synchronize(const Stream& s) {
  Add("synchronize", s.handle == &copy_tag_ ? "copy stream" : "compute stream", 0, 0, 0, 1);
}

// ---- embeddings and norms (kernels/cuda/rows.cu) ----
void CostBackend::EmbeddingForward(const Stream&, const TV& out, const TV& tokens, const TV& wte, const TV& wpe) {
  const int64_t T = out.dim(1);
  Add(OpName(Op::kEmbeddingForward), Dims(out), 0, 2 * B(out) + B(tokens) + (wpe.empty() ? 0 : T * Cols(wpe) * E(wpe)),
      1);
  (void)wte;
}
void CostBackend::EmbeddingBackward(const Stream&, const TV& dwte, const TV& dwpe, const TV& dout, const TV& tokens) {
  const double n = static_cast<double>(tokens.numel());
  // PositionGrad (dwpe), Iota, CUB's sort of (token, row), TokenRunGrad: dout read twice, the
  // touched rows of dwte read and written, the pairs through the sort.
  const long launches = (dwpe.empty() ? 0 : 1) + 2 + kSortLaunches;
  const double pos = dwpe.empty() ? 0 : B(dout) + 2.0 * dout.dim(1) * Cols(dwpe) * E(dwpe);
  Add(OpName(Op::kEmbeddingBackward), Dims(dout), 0, pos + 3 * B(dout) + 3 * n * 4 + kSortLaunches * 16 * n, launches);
  (void)dwte;
}
void CostBackend::VocabEmbeddingForward(const Stream&, const TV& rows, const TV& tokens, const TV&, int64_t) {
  Add(OpName(Op::kVocabEmbeddingForward), Dims(rows), 0, 2 * B(rows) + B(tokens), 1);
}
void CostBackend::VocabEmbeddingBackward(const Stream&, const TV&, const TV& dwpe, const TV& dall, const TV& tokens,
                                         int64_t, int T) {
  const double n = static_cast<double>(tokens.numel());
  const long launches = (dwpe.empty() ? 0 : 1) + 2 + kSortLaunches;
  const double pos = dwpe.empty() ? 0 : B(dall) + 2.0 * T * Cols(dwpe) * E(dwpe);
  Add(OpName(Op::kVocabEmbeddingBackward), Dims(dall), 0, pos + 3 * B(dall) + 3 * n * 4 + kSortLaunches * 16 * n,
      launches);
}
void CostBackend::AddPositions(const Stream&, const TV& out, const TV& wpe, int64_t, int T) {
  Add(OpName(Op::kAddPositions), Dims(out), 0, 2 * B(out) + T * Cols(wpe) * E(wpe), 1);
}
void CostBackend::LayerNormForward(const Stream&, const TV& out, const TV& mean, const TV& rstd, const TV& inp,
                                   const TV& w, const TV& b) {
  Add(OpName(Op::kLayerNormForward), Dims(inp), 0, B(inp) + B(out) + B(mean) + B(rstd) + B(w) + B(b), 1);
}
void CostBackend::LayerNormBackward(const Stream&, const TV& dinp, const TV& dw, const TV& db, const TV& dout,
                                    const TV& inp, const TV& w, const TV& mean, const TV& rstd) {
  // LnBackwardRows (dinp +=), ColumnPartials (dout and inp again), ColumnFinish (dw, db +=).
  const double rows = B(dout) + B(inp) + 2 * B(dinp) + B(w) + B(mean) + B(rstd);
  const double cols = B(dout) + B(inp) + 2 * Partials(Rows(dout), Cols(dout)) + 2 * B(dw) + 2 * B(db);
  Add(OpName(Op::kLayerNormBackward), Dims(dout), 0, rows + cols, 3);
}
void CostBackend::ResidualLayerNormForward(const Stream&, const TV& resid, const TV& out, const TV& mean,
                                           const TV& rstd, const TV& a, const TV& b, const TV& w, const TV& bias) {
  Add(OpName(Op::kResidualLayerNormForward), Dims(a),
      0, B(a) + B(b) + B(resid) + B(out) + B(mean) + B(rstd) + B(w) + B(bias), 1);
}
void CostBackend::RmsNormForward(const Stream&, const TV& out, const TV& rstd, const TV& inp, const TV& w, float) {
  Add(OpName(Op::kRmsNormForward), Dims(inp), 0, B(inp) + B(out) + B(rstd) + B(w), 1);
}
void CostBackend::RmsNormBackward(const Stream&, const TV& dinp, const TV& dw, const TV& dout, const TV& inp,
                                  const TV& w, const TV& rstd) {
  const double rows = B(dout) + B(inp) + 2 * B(dinp) + B(w) + B(rstd);
  const double cols = B(dout) + B(inp) + Partials(Rows(dout), Cols(dout)) + 2 * B(dw);
  Add(OpName(Op::kRmsNormBackward), Dims(dout), 0, rows + cols, 3);
}

// ---- GEMMs (kernels/cuda/gemm.cc: one cublasLtMatmul each) ----
OpRecord& CostBackend::Gemm(const char* op, int64_t n, int64_t k, int64_t m, size_t elem, bool accumulate, int64_t batch) {
  const double e = static_cast<double>(elem);
  const double bytes = batch * e * (static_cast<double>(n) * k + static_cast<double>(k) * m +
                                    static_cast<double>(n) * m * (accumulate ? 2 : 1));
  std::string shape = std::to_string(n);
  shape.append("x").append(std::to_string(k)).append(" -> ").append(std::to_string(m));
  if (batch > 1) shape = std::to_string(batch).append(" x (").append(shape).append(")");
  if (elem == 2) shape.append(" bf16");
  return Add(op, shape, 2.0 * batch * n * k * m, bytes, 1, 0, OpRecord::Engine::kGemm);
}
void CostBackend::LinearForward(const Stream&, const TV& out, const TV& inp, const TV& w, const TV& bias,
                                const TV& gelu_out) {
  const int64_t n = Rows(inp), k = Cols(inp), m = Rows(w);
  OpRecord& gemm = Gemm("linear_forward (GEMM)", n, k, m, SizeOf(inp.dtype()), false);
  const bool epilogue_gelu = inp.dtype() == DType::kBF16 && m % 8 == 0;  // GELU_AUX[_BIAS] writes both outputs
  if (!bias.empty()) gemm.bytes += B(bias);
  if (!gelu_out.empty()) {
    if (epilogue_gelu) {
      gemm.bytes += B(gelu_out);
    } else {
      Add("linear_forward (GELU pass)", Dims(out), 0, B(out) + B(gelu_out), 1);
    }
  }
}
void CostBackend::LinearBackwardWrite(const Stream&, const TV& dinp, const TV& dw, const TV& dbias, const TV& dout,
                                      const TV& inp, const TV& w) {
  LinearGrads(dinp, dw, dbias, dout, inp, w, false);  // dinp = dout W: beta 0, no memset before it
}
void CostBackend::LinearBackwardGelu(const Stream& s, const TV& dpre, const TV& dw, const TV& dbias, const TV& dout,
                                     const TV& inp, const TV& w, const TV& pre) {
  if (dout.dtype() != DType::kBF16 || Cols(inp) % 8 != 0) {  // the CUDA backend's two ops
    Backend::LinearBackwardGelu(s, dpre, dw, dbias, dout, inp, w, pre);
    return;
  }
  const int64_t n = Rows(dout), m = Cols(dout), k = Cols(w);
  OpRecord& gemm = Gemm("linear_backward (input GEMM, DGELU)", n, m, k, SizeOf(dout.dtype()), false);
  gemm.bytes += B(pre);  // the epilogue reads the GELU's input
  LinearGrads(TV(), dw, dbias, dout, inp, w, false);
}
void CostBackend::LinearBackward(const Stream&, const TV& dinp, const TV& dw, const TV& dbias, const TV& dout,
                                 const TV& inp, const TV& w) {
  LinearGrads(dinp, dw, dbias, dout, inp, w, true);
}
void CostBackend::LinearGrads(const TV& dinp, const TV& dw, const TV& dbias, const TV& dout, const TV& inp,
                              const TV& w, bool accumulate_dinp) {
  const int64_t n = Rows(dout), m = Cols(dout), k = Cols(w);
  const size_t e = SizeOf(dout.dtype());
  if (!dinp.empty()) Gemm("linear_backward (input GEMM)", n, m, k, e, accumulate_dinp);  // dinp (+)= dout W
  if (!dw.empty()) Gemm("linear_backward (weight GEMM)", m, n, k, e, true);     // dW += dout^T inp (beta 1)
  if (!dbias.empty()) {  // BiasGrad: column partials, then their sum into dbias
    Add("linear_backward (bias grad)", Dims(dout), 0, B(dout) + Partials(n, m) + 2 * B(dbias), 2);
  }
  (void)inp;
}
void CostBackend::BiasAdd(const Stream&, const TV& out, const TV& bias) {
  Add(OpName(Op::kBiasAdd), Dims(out), 0, 2 * B(out) + B(bias), 1);
}

// Path 2 where the CUDA backend takes it (CudaBackend::FlashFits): asked for, and a head size it has
// kernels for (grouped-query heads included: read in place).
bool CostBackend::FlashFits(const TV& q, int H) const {
  return flash_ && q.dim(2) % H == 0 && cuda::FlashAttentionSupports(q.dim(2) / H);
}

// ---- attention: path 1 (split heads, GEMMs over the whole (T, T) scores, softmax, merge) or path 2
// (kernels/cuda/flash_attention.cu) ----
void CostBackend::AttentionForward(const Stream&, const TV& out, const TV& lse, const TV& q, const TV& k, const TV& v,
                                   int H) {
  const double Bt = static_cast<double>(q.dim(0)), T = static_cast<double>(q.dim(1)), C = static_cast<double>(q.dim(2));
  const double e = E(q), scores = Bt * H * T * T * e;
  const std::string shape = Dims(q) + " H=" + std::to_string(H);
  if (FlashFits(q, H)) {
    Add("attention_forward (flash)", shape, 2 * Bt * T * T * C * (1 + 64 / T), B(q) + B(k) + B(v) + B(out) + B(lse), 1,
        0, OpRecord::Engine::kFlash);
    return;
  }
  const double split = 2 * (B(q) + B(k) + B(v));
  // S = Q K^T written; the softmax reads and rewrites it; P V reads it and V and writes O; merge.
  const double bytes = split + (B(q) + B(k) + scores) + (2 * scores + B(lse)) + (scores + B(v) + B(out)) + 2 * B(out);
  Add("attention_forward (path 1)", shape, 4 * Bt * T * T * C, bytes, 7, 0, OpRecord::Engine::kGemm);
}
void CostBackend::AttentionBackward(const Stream&, const TV& dq, const TV& dk, const TV& dv, const TV& dout,
                                    const TV& q, const TV& k, const TV& v, const TV& out, const TV& lse, int H) {
  const double Bt = static_cast<double>(q.dim(0)), T = static_cast<double>(q.dim(1)), C = static_cast<double>(q.dim(2));
  const double e = E(q), sc = Bt * H * T * T * e;
  const std::string shape = Dims(q) + " H=" + std::to_string(H);
  if (FlashFits(q, H)) {  // RowDots, KeyGrads, QueryGrads: seven tile products over the causal half
    Add("attention_backward (flash)", shape, 7 * Bt * T * T * C * (1 + 64 / T),
        B(q) + B(k) + B(v) + B(out) + 2 * B(dout) + B(lse) + B(dq) + B(dk) + B(dv) + 2 * Bt * H * T * 4, 3, 0,
        OpRecord::Engine::kFlash);
    return;
  }
  const double split = 2 * (B(q) + B(k) + B(v) + B(out) + B(dout));
  const double gemms = (B(q) + B(k) + sc) + (B(dout) + B(v) + sc)     // S again; dP = dO V^T
                       + (sc + B(dout) + B(dv)) + (sc + B(k) + B(dq)) + (sc + B(q) + B(dk));  // dV, dQ, dK
  const double softmax = 2 * sc + 2 * sc + B(dout) + B(out) + B(lse);  // reads dP, S; writes dS, P
  const double merge = 2 * (B(dq) + B(dk) + B(dv));
  Add("attention_backward (path 1)", shape, 10 * Bt * T * T * C, split + gemms + softmax + merge, 14, 0,
      OpRecord::Engine::kGemm);
}
void CostBackend::AttentionDecode(const Stream&, const TV& out, const TV& q, const TV& kcache, const TV& vcache,
                                  const TV& scores, int H) {
  Add(OpName(Op::kAttentionDecode), Dims(kcache) + " H=" + std::to_string(H), 0,
      B(q) + B(out) + B(kcache) + B(vcache) + 2 * B(scores), H);
}

// ---- elementwise (kernels/cuda/elementwise.cu) ----
void CostBackend::Rotary(const Stream&, const TV& x, const TV& cos, const TV& sin, int, bool) {
  Add(OpName(Op::kRotary), Dims(x), 0, 2 * B(x) + B(cos) + B(sin), 1);
}
void CostBackend::SwiGluForward(const Stream&, const TV& out, const TV& gate, const TV& up) {
  Add(OpName(Op::kSwiGluForward), Flat(out), 0, B(out) + B(gate) + B(up), 1);
}
void CostBackend::SwiGluBackward(const Stream&, const TV& dgate, const TV& dup, const TV& gate, const TV& up,
                                 const TV& dout) {
  Add(OpName(Op::kSwiGluBackward), Flat(dout), 0, B(dgate) + B(dup) + B(gate) + B(up) + B(dout), 1);
}
void CostBackend::GeluForward(const Stream&, const TV& out, const TV& inp) {
  Add(OpName(Op::kGeluForward), Flat(out), 0, B(out) + B(inp), 1);
}
void CostBackend::GeluBackward(const Stream&, const TV& dinp, const TV& inp, const TV& dout) {
  Add(OpName(Op::kGeluBackward), Flat(dout), 0, B(dinp) + B(inp) + B(dout), 1);
}
void CostBackend::ResidualForward(const Stream&, const TV& out, const TV& a, const TV& b) {
  Add(OpName(Op::kResidualForward), Flat(out), 0, B(out) + B(a) + B(b), 1);
}
void CostBackend::Accumulate(const Stream&, const TV& dst, const TV& src) {
  Add(OpName(Op::kAccumulate), Flat(dst), 0, 2 * B(dst) + B(src), 1);
}

// ---- loss, norm, optimizer: the ops that return a scalar read it back (a host synchronisation) ----
double CostBackend::CrossEntropy(const Stream&, const TV& logits, const TV& losses, const TV& targets, int,
                                 float dscale) {
  // The log-sum-exp pass and the gradient pass each read the logits; the gradient is written in place;
  // the losses come back to the host (a copy and a stream synchronisation).
  Add(OpName(Op::kCrossEntropy), Dims(logits), 0, (dscale != 0 ? 3 : 1) * B(logits) + 2 * B(losses) + B(targets), 2,
      1);
  return 0;
}
void CostBackend::VocabLossStats(const Stream&, const TV& stats, const TV& logits, const TV& targets, int64_t, int) {
  Add(OpName(Op::kVocabLossStats), Dims(logits), 0, B(logits) + B(stats) + B(targets), 1);
}
double CostBackend::VocabLossCombine(const Stream&, const TV& logits, const TV& losses, const TV& row_loss,
                                     const TV& gathered, const TV& targets, int64_t, int, float dscale) {
  Add(OpName(Op::kVocabLossCombine), Dims(logits),
      0, (dscale != 0 ? 2 : 0) * B(logits) + B(losses) + 2 * B(row_loss) + B(gathered) + B(targets), 2, 1);
  return 0;
}
double CostBackend::SumSquares(const Stream&, const TV& g) {
  Add(OpName(Op::kSumSquares), "", 0, B(g), 2, 1);  // the kernel, the read back (one row for all sizes)
  return 0;
}
void CostBackend::SumSquaresEach(const Stream&, const std::vector<TV>& gs, double* out) {
  double bytes = 0;
  for (size_t i = 0; i < gs.size(); ++i) {
    bytes += B(gs[i]);
    out[i] = 0;
  }
  // One launch over every view's blocks (one dtype, as gradients are), then one read back of them all.
  if (!gs.empty()) Add("sum_squares (every view)", std::to_string(gs.size()) + " views", 0, bytes, 2, 1);
}
void CostBackend::Scale(const Stream&, const TV& g, float) { Add(OpName(Op::kScale), Flat(g), 0, 2 * B(g), 1); }
void CostBackend::AdamW(const Stream&, const TV& p, const TV& g, const TV& m, const TV& v, float, float, float, float,
                        float, int) {
  Add(OpName(Op::kAdamW), "", 0, 2 * (B(p) + B(m) + B(v)) + B(g), 1);  // one row: every tensor's call
}
void CostBackend::AdamWEach(const Stream&, const TV& p, const TV& g, const TV& m, const TV& v, const TV& working,
                            const std::vector<AdamWRange>& ranges, float, float, float, float, int) {
  // One launch over every range (kernels/cuda: AdamWChunks), the working copy written in the same pass.
  double n = 0;
  for (const AdamWRange& r : ranges) n += static_cast<double>(r.n);
  const double bytes = n * (2 * (E(p) + E(m) + E(v)) + E(g)) + (working.empty() ? 0 : n * E(working));
  Add("adamw (every tensor)", std::to_string(ranges.size()) + " ranges" + (working.empty() ? "" : ", bf16 copy"), 0,
      bytes, 1);
}
void CostBackend::Zero(const Stream&, const TV& x) {
  if (!x.empty()) Add(OpName(Op::kZero), Flat(x), 0, B(x), 1);
}
void CostBackend::Copy(const Stream&, const TV& dst, const TV& src) {
  Add(OpName(Op::kCopy), Flat(dst) + (dst.dtype() != src.dtype() ? " (convert)" : ""), 0, B(dst) + B(src), 1);
}

}  // namespace anneal
