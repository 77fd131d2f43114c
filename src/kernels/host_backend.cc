#include "kernels/host_backend.h"

#ifndef ANNEAL_NO_BLAS
#include <cblas.h>
#endif
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/progress.h"
#include "kernels/ref/row_ops.h"

namespace anneal {

namespace {

// Rows and columns of a view seen as a matrix (last dimension = columns).
int64_t Cols(const TV& v) { return v.ndim() ? v.dim(v.ndim() - 1) : 1; }
int64_t Rows(const TV& v) { return v.numel() / std::max<int64_t>(1, Cols(v)); }
float* F(const TV& v) { return v.empty() ? nullptr : v.f32(); }

// Key/value heads of an attention whose q (B,T,C) has H heads and k (B,T,Ckv) Ckv/(C/H).
int KvHeads(const TV& q, const TV& k, int H) {
  const int64_t hs = q.dim(2) / H;
  ANNEAL_CHECK(hs > 0 && k.dim(2) % hs == 0 && H % (k.dim(2) / hs) == 0, "key/value heads that do not group the query heads");
  return static_cast<int>(k.dim(2) / hs);
}

// Runs f(r0, r1) over [0, n): once, on this thread, or (threaded) once per OpenMP thread over one
// contiguous range each, as `omp parallel for schedule(static)` splits. The row ops compute each row
// by itself, so no split changes a bit.
template <class F>
void ForRanges(bool threaded, int64_t n, const F& f) {
  if (!threaded || n < 2) {
    f(0, n);
    return;
  }
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t a = n * t / nt, b = n * (t + 1) / nt;
    if (a < b) f(a, b);
  }
}

bool AnyBf16(std::initializer_list<const TV*> vs) {
  for (const TV* v : vs) {
    if (!v->empty() && v->dtype() == DType::kBF16) return true;
  }
  return false;
}

// Runs an op's f32 arithmetic on bf16 views (ref only): every bf16 view is widened to an f32 copy
// (exact), the op runs on the copies, and the views the op writes are rounded back to bf16 (to
// nearest even) once, when the emulation ends. f32 and i32 views pass through.
class Bf16Emulation {
 public:
  TV In(const TV& v) { return Widen(v, false); }
  TV Out(const TV& v) { return Widen(v, true); }
  ~Bf16Emulation() {
    for (size_t i = 0; i < outs_.size(); ++i) FloatsToBf16(store_[outs_[i].second].data(), outs_[i].first.bf16(),
                                                           store_[outs_[i].second].size());
  }

 private:
  TV Widen(const TV& v, bool out) {
    if (v.empty() || v.dtype() != DType::kBF16) return v;
    ANNEAL_CHECK(v.contiguous(), "a bf16 view to widen must be contiguous");
    store_.emplace_back(static_cast<size_t>(v.numel()));
    Bf16ToFloats(v.bf16(), store_.back().data(), store_.back().size());
    if (out) outs_.push_back({v, store_.size() - 1});
    return v.WithData(store_.back().data(), DType::kF32);
  }
  std::vector<std::vector<float>> store_;
  std::vector<std::pair<TV, size_t>> outs_;
};

}  // namespace

HostBackend::HostBackend(std::string name, const KernelTable& k, bool threaded, bool emulate_bf16)
    : name_(std::move(name)), k_(k), threaded_(threaded), emulate_bf16_(emulate_bf16) {}

bool HostBackend::Supports(Op op, DType t) const {
  if (op >= Op::kCount) return false;
  return t == DType::kF32 || (t == DType::kBF16 && emulate_bf16_);
}

void HostBackend::CopyFromHost(const TV& dst, const void* src, const Stream&) {
  ANNEAL_CHECK(dst.contiguous(), "CopyFromHost into a strided view");
  std::memcpy(dst.data(), src, dst.bytes());
}

void HostBackend::CopyToHost(void* dst, const TV& src, const Stream&) {
  ANNEAL_CHECK(src.contiguous(), "CopyToHost from a strided view");
  std::memcpy(dst, src.data(), src.bytes());
}

double HostBackend::MeasurePeakGflops(DType) {
#ifdef ANNEAL_NO_BLAS
  const int n = 256;  // the reference GEMM is slow: a smaller product
#else
  const int n = 768;
#endif
  std::vector<float> a(static_cast<size_t>(n) * n, 0.5f), b(a.size(), 0.25f), c(a.size(), 0.0f);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = MonotonicSeconds();
#ifdef ANNEAL_NO_BLAS  // the slim build: this backend's own GEMM
    k_.linear_forward(c.data(), a.data(), b.data(), nullptr, n, n, n);
#else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
#endif
    const double sec = MonotonicSeconds() - t0;
    if (rep > 0) best = std::max(best, 2.0 * n * n * n / sec / 1e9);
  }
  return best;
}

void HostBackend::SetThreads(int n) {
  if (n > 0) omp_set_num_threads(n);
}

int HostBackend::Threads() const { return omp_get_max_threads(); }

// ---- embeddings ----

void HostBackend::EmbeddingForward(const Stream& s, const TV& out, const TV& tokens, const TV& wte, const TV& wpe) {
  if (AnyBf16({&out, &wte, &wpe})) {
    Bf16Emulation e;
    return EmbeddingForward(s, e.Out(out), tokens, e.In(wte), e.In(wpe));
  }
  k_.embedding_forward(out.f32(), tokens.i32(), wte.f32(), wpe.f32(), tokens.dim(0), tokens.dim(1), Cols(out));
}

void HostBackend::EmbeddingBackward(const Stream& s, const TV& dwte, const TV& dwpe, const TV& dout,
                                    const TV& tokens) {
  if (AnyBf16({&dwte, &dwpe, &dout})) {
    Bf16Emulation e;
    return EmbeddingBackward(s, e.Out(dwte), e.Out(dwpe), e.In(dout), tokens);
  }
  k_.embedding_backward(dwte.f32(), dwpe.f32(), dout.f32(), tokens.i32(), tokens.dim(0), tokens.dim(1), Cols(dout));
}

void HostBackend::VocabEmbeddingForward(const Stream& s, const TV& rows, const TV& tokens, const TV& wte_slice,
                                        int64_t v0) {
  if (AnyBf16({&rows, &wte_slice})) {
    Bf16Emulation e;
    return VocabEmbeddingForward(s, e.Out(rows), tokens, e.In(wte_slice), v0);
  }
  const int N = static_cast<int>(Rows(rows)), C = static_cast<int>(Cols(rows)), Vl = static_cast<int>(Rows(wte_slice));
  ForRanges(threaded_, N, [&](int r0, int r1) {
    row_ops::vocab_embedding_forward(rows.f32(), tokens.i32(), wte_slice.f32(), v0, Vl, C, r0, r1);
  });
}

void HostBackend::VocabEmbeddingBackward(const Stream& s, const TV& dwte_slice, const TV& dwpe, const TV& dall,
                                         const TV& tokens, int64_t v0, int T) {
  if (AnyBf16({&dwte_slice, &dwpe, &dall})) {
    Bf16Emulation e;
    return VocabEmbeddingBackward(s, e.Out(dwte_slice), e.Out(dwpe),
                                  e.In(dall), tokens, v0, T);
  }
  row_ops::vocab_embedding_backward(dwte_slice.f32(), F(dwpe), dall.f32(), tokens.i32(), v0,
                                    static_cast<int>(Rows(dwte_slice)), static_cast<int>(Rows(dall)),
                                    static_cast<int>(Cols(dall)), T);  // F(dwpe) null: no positions (rotary)
}

void HostBackend::AddPositions(const Stream& s, const TV& out, const TV& wpe, int64_t row0, int T) {
  if (AnyBf16({&out, &wpe})) {
    Bf16Emulation e;
    return AddPositions(s, e.Out(out), e.In(wpe), row0, T);
  }
  const int C = static_cast<int>(Cols(out));
  ForRanges(threaded_, Rows(out), [&](int r0, int r1) { row_ops::add_positions(out.f32(), wpe.f32(), row0, T, C, r0, r1); });
}

// ---- LayerNorm ----

void HostBackend::LayerNormForward(const Stream& s, const TV& out, const TV& mean, const TV& rstd, const TV& inp,
                                   const TV& w, const TV& b) {
  if (AnyBf16({&out, &mean, &rstd, &inp, &w, &b})) {
    Bf16Emulation e;
    return LayerNormForward(s, e.Out(out), e.Out(mean), e.Out(rstd), e.In(inp), e.In(w),
                            e.In(b));
  }
  k_.layernorm_forward(out.f32(), mean.f32(), rstd.f32(), inp.f32(), w.f32(), b.f32(), Rows(inp), Cols(inp));
}

void HostBackend::LayerNormBackward(const Stream& s, const TV& dinp, const TV& dw, const TV& db, const TV& dout,
                                    const TV& inp, const TV& w, const TV& mean, const TV& rstd) {
  if (AnyBf16({&dinp, &dw, &db, &dout, &inp, &w, &mean, &rstd})) {
    Bf16Emulation e;
    return LayerNormBackward(s, e.Out(dinp), e.Out(dw), e.Out(db), e.In(dout),
                             e.In(inp), e.In(w), e.In(mean), e.In(rstd));
  }
  k_.layernorm_backward(dinp.f32(), dw.f32(), db.f32(), dout.f32(), inp.f32(), w.f32(), mean.f32(), rstd.f32(),
                        Rows(inp), Cols(inp));
}

void HostBackend::ResidualLayerNormForward(const Stream& s, const TV& resid, const TV& out, const TV& mean,
                                           const TV& rstd, const TV& a, const TV& b, const TV& w, const TV& bias) {
  ResidualForward(s, resid, a, b);
  LayerNormForward(s, out, mean, rstd, resid, w, bias);
}

// ---- linear ----

void HostBackend::LinearForward(const Stream& s, const TV& out, const TV& inp, const TV& w, const TV& bias,
                                const TV& gelu_out) {
  if (AnyBf16({&out, &inp, &w, &bias, &gelu_out})) {
    Bf16Emulation e;
    return LinearForward(s, e.Out(out), e.In(inp), e.In(w), e.In(bias),
                         e.Out(gelu_out));
  }
  k_.linear_forward(out.f32(), inp.f32(), w.f32(), F(bias), Rows(inp), Cols(inp), Rows(w));
  if (!gelu_out.empty()) k_.gelu_forward(gelu_out.f32(), out.f32(), out.numel());
}

void HostBackend::LinearBackward(const Stream& s, const TV& dinp, const TV& dw, const TV& dbias, const TV& dout,
                                 const TV& inp, const TV& w) {
  if (AnyBf16({&dinp, &dw, &dbias, &dout, &inp, &w})) {
    Bf16Emulation e;
    return LinearBackward(s, e.Out(dinp), e.Out(dw), e.Out(dbias), e.In(dout),
                          e.In(inp), e.In(w));
  }
  k_.linear_backward(dinp.f32(), dw.f32(), F(dbias), dout.f32(), inp.f32(), w.f32(), Rows(inp), Cols(inp), Rows(w));
}

void HostBackend::BiasAdd(const Stream& s, const TV& out, const TV& bias) {
  if (AnyBf16({&out, &bias})) {
    Bf16Emulation e;
    return BiasAdd(s, e.Out(out), e.In(bias));
  }
  const int OC = static_cast<int>(Cols(out));
  ForRanges(threaded_, Rows(out), [&](int r0, int r1) { row_ops::bias_add(out.f32(), bias.f32(), OC, r0, r1); });
}

// ---- attention ----

void HostBackend::AttentionForward(const Stream& s, const TV& out, const TV& lse, const TV& q, const TV& k,
                                   const TV& v, int H) {
  if (AnyBf16({&out, &lse, &q, &k, &v})) {
    Bf16Emulation e;
    return AttentionForward(s, e.Out(out), e.Out(lse), e.In(q), e.In(k),
                            e.In(v), H);
  }
  k_.attention_forward(out.f32(), lse.f32(), q.f32(), k.f32(), v.f32(), q.dim(0), q.dim(1), q.dim(2), H,
                       KvHeads(q, k, H));
}

void HostBackend::AttentionBackward(const Stream& s, const TV& dq, const TV& dk, const TV& dv, const TV& dout,
                                    const TV& q, const TV& k, const TV& v, const TV& out, const TV& lse, int H) {
  if (AnyBf16({&dq, &dk, &dv, &dout, &q, &k, &v, &out, &lse})) {
    Bf16Emulation e;
    return AttentionBackward(s, e.Out(dq), e.Out(dk), e.Out(dv),
                             e.In(dout), e.In(q), e.In(k), e.In(v),
                             e.In(out), e.In(lse), H);
  }
  k_.attention_backward(dq.f32(), dk.f32(), dv.f32(), dout.f32(), q.f32(), k.f32(), v.f32(), out.f32(), lse.f32(),
                        q.dim(0), q.dim(1), q.dim(2), H, KvHeads(q, k, H));
}

void HostBackend::AttentionDecode(const Stream& s, const TV& out, const TV& q, const TV& kcache, const TV& vcache,
                                  const TV& scores, int H) {
  if (AnyBf16({&out, &q, &kcache, &vcache, &scores})) {
    Bf16Emulation e;
    return AttentionDecode(s, e.Out(out), e.In(q), e.In(kcache), e.In(vcache),
                           e.Out(scores), H);
  }
  const int C = static_cast<int>(q.numel()), hs = C / H;
  const int group = H / static_cast<int>(kcache.dim(1) / hs);  // query heads per key/value head
  row_ops::attention_decode(out.f32(), q.f32(), kcache.f32(), kcache.stride(0), vcache.f32(), vcache.stride(0),
                            scores.f32(), static_cast<int>(kcache.dim(0)), H, hs, group);
}

// ---- the Llama family's ops ----

void HostBackend::RmsNormForward(const Stream& s, const TV& out, const TV& rstd, const TV& inp, const TV& w,
                                 float eps) {
  if (AnyBf16({&out, &rstd, &inp, &w})) {
    Bf16Emulation e;
    return RmsNormForward(s, e.Out(out), e.Out(rstd), e.In(inp), e.In(w), eps);
  }
  k_.rmsnorm_forward(out.f32(), rstd.f32(), inp.f32(), w.f32(), Rows(inp), Cols(inp), eps);
}

void HostBackend::RmsNormBackward(const Stream& s, const TV& dinp, const TV& dw, const TV& dout, const TV& inp,
                                  const TV& w, const TV& rstd) {
  if (AnyBf16({&dinp, &dw, &dout, &inp, &w, &rstd})) {
    Bf16Emulation e;
    return RmsNormBackward(s, e.Out(dinp), e.Out(dw), e.In(dout), e.In(inp), e.In(w), e.In(rstd));
  }
  k_.rmsnorm_backward(dinp.f32(), dw.f32(), dout.f32(), inp.f32(), w.f32(), rstd.f32(), Rows(inp), Cols(inp));
}

// Each pair is rotated in double and rounded once: the same bits on every thread count.
void HostBackend::Rotary(const Stream& st, const TV& x, const TV& cos, const TV& sin, int H, bool inverse) {
  if (AnyBf16({&x})) {
    Bf16Emulation e;
    return Rotary(st, e.Out(x), cos, sin, H, inverse);
  }
  const int T = static_cast<int>(x.dim(1)), hs = static_cast<int>(x.dim(2)) / H;
  ForRanges(threaded_, x.dim(0) * T, [&](int r0, int r1) {
    row_ops::rotary(x.f32(), cos.f32(), sin.f32(), T, H, hs, inverse, r0, r1);
  });
}

void HostBackend::SwiGluForward(const Stream& s, const TV& out, const TV& gate, const TV& up) {
  if (AnyBf16({&out, &gate, &up})) {
    Bf16Emulation e;
    return SwiGluForward(s, e.Out(out), e.In(gate), e.In(up));
  }
  ForRanges(threaded_, out.numel(), [&](int64_t i0, int64_t i1) {
    row_ops::swiglu_forward(out.f32(), gate.f32(), up.f32(), i0, i1);
  });
}

// d/dg silu(g) = sig(g) (1 + g (1 - sig(g))).
void HostBackend::SwiGluBackward(const Stream& s, const TV& dgate, const TV& dup, const TV& gate, const TV& up,
                                 const TV& dout) {
  if (AnyBf16({&dgate, &dup, &gate, &up, &dout})) {
    Bf16Emulation e;
    return SwiGluBackward(s, e.Out(dgate), e.Out(dup), e.In(gate), e.In(up), e.In(dout));
  }
  ForRanges(threaded_, gate.numel(), [&](int64_t i0, int64_t i1) {
    row_ops::swiglu_backward(dgate.f32(), dup.f32(), gate.f32(), up.f32(), dout.f32(), i0, i1);
  });
}

// ---- elementwise ----

void HostBackend::GeluForward(const Stream& s, const TV& out, const TV& inp) {
  if (AnyBf16({&out, &inp})) {
    Bf16Emulation e;
    return GeluForward(s, e.Out(out), e.In(inp));
  }
  k_.gelu_forward(out.f32(), inp.f32(), inp.numel());
}

void HostBackend::GeluBackward(const Stream& s, const TV& dinp, const TV& inp, const TV& dout) {
  if (AnyBf16({&dinp, &inp, &dout})) {
    Bf16Emulation e;
    return GeluBackward(s, e.Out(dinp), e.In(inp), e.In(dout));
  }
  k_.gelu_backward(dinp.f32(), inp.f32(), dout.f32(), inp.numel());
}

void HostBackend::ResidualForward(const Stream& s, const TV& out, const TV& a, const TV& b) {
  if (AnyBf16({&out, &a, &b})) {
    Bf16Emulation e;
    return ResidualForward(s, e.Out(out), e.In(a), e.In(b));
  }
  k_.residual_forward(out.f32(), a.f32(), b.f32(), a.numel());
}

void HostBackend::Accumulate(const Stream& s, const TV& dst, const TV& src) {
  if (AnyBf16({&dst, &src})) {
    Bf16Emulation e;
    return Accumulate(s, e.Out(dst), e.In(src));
  }
  row_ops::accumulate(dst.f32(), src.f32(), 0, dst.numel());  // one thread, as before
}

// ---- loss ----

double HostBackend::CrossEntropy(const Stream& s, const TV& logits, const TV& losses, const TV& targets, int V,
                                 float dscale) {
  if (AnyBf16({&logits, &losses})) {
    Bf16Emulation e;
    return CrossEntropy(s, e.Out(logits), e.Out(losses), targets, V, dscale);
  }
  return k_.crossentropy(logits.f32(), losses.f32(), targets.i32(), Rows(logits), V, Cols(logits),
                                          dscale);
}

void HostBackend::VocabLossStats(const Stream& s, const TV& stats, const TV& logits, const TV& targets, int64_t v0,
                                 int nreal) {
  if (AnyBf16({&logits})) {
    Bf16Emulation e;
    return VocabLossStats(s, stats, e.In(logits), targets, v0, nreal);
  }
  const int Vl = static_cast<int>(Cols(logits));
  ForRanges(threaded_, Rows(logits), [&](int r0, int r1) {
    row_ops::vocab_loss_stats(stats.f64(), logits.f32(), targets.i32(), v0, nreal, Vl, r0, r1);
  });
}

double HostBackend::VocabLossCombine(const Stream& s, const TV& logits, const TV& losses, const TV& row_loss,
                                     const TV& gathered, const TV& targets, int64_t v0, int nreal, float dscale) {
  if (AnyBf16({&logits, &losses})) {
    Bf16Emulation e;
    return VocabLossCombine(s, e.Out(logits), e.Out(losses), row_loss, gathered, targets, v0, nreal,
                            dscale);
  }
  const int N = static_cast<int>(Rows(logits)), Vl = static_cast<int>(Cols(logits));
  const int tp = static_cast<int>(gathered.dim(0));
  ForRanges(threaded_, N, [&](int r0, int r1) {
    row_ops::vocab_loss_combine(logits.f32(), losses.f32(), row_loss.f64(), gathered.f64(), targets.i32(), v0, nreal,
                                Vl, N, tp, dscale, r0, r1);
  });
  const double* rl = row_loss.f64();
  double total = 0;
  for (int i = 0; i < N; ++i) total += rl[2 * i];
  return total;
}

// ---- optimizer ----

double HostBackend::SumSquares(const Stream& s, const TV& g) {
  if (AnyBf16({&g})) {
    Bf16Emulation e;
    return SumSquares(s, e.In(g));
  }
  return k_.sum_squares(g.f32(), g.numel());
}

void HostBackend::Scale(const Stream& s, const TV& g, float f) {
  if (AnyBf16({&g})) {
    Bf16Emulation e;
    return Scale(s, e.Out(g), f);
  }
  k_.scale(g.f32(), f, g.numel());
}

void HostBackend::AdamW(const Stream& s, const TV& p, const TV& g, const TV& m, const TV& v, float lr, float beta1,
                        float beta2, float eps, float wd, int t) {
  if (AnyBf16({&p, &g, &m, &v})) {
    Bf16Emulation e;
    return AdamW(s, e.Out(p), e.In(g), e.Out(m), e.Out(v), lr, beta1, beta2, eps, wd, t);
  }
  k_.adamw(p.f32(), g.f32(), m.f32(), v.f32(), p.numel(), lr, beta1, beta2, eps, wd, t);
}

// ---- memory ops ----

void HostBackend::Zero(const Stream&, const TV& x) {
  if (x.empty()) return;
  ANNEAL_CHECK(x.contiguous(), "Zero of a strided view");
  std::memset(x.data(), 0, x.bytes());
}

void HostBackend::Copy(const Stream&, const TV& dst, const TV& src) {
  ANNEAL_CHECK(dst.numel() == src.numel() && dst.ndim() == src.ndim(), "Copy between views of different shapes");
  if (dst.empty()) return;
  if (dst.dtype() != src.dtype()) {  // f32 <-> bf16, contiguous: widened exactly or rounded to nearest even
    ANNEAL_CHECK(dst.contiguous() && src.contiguous(), "a converting Copy needs contiguous views");
    if (dst.dtype() == DType::kBF16 && src.dtype() == DType::kF32) return FloatsToBf16(src.f32(), dst.bf16(), dst.numel());
    if (dst.dtype() == DType::kF32 && src.dtype() == DType::kBF16) return Bf16ToFloats(src.bf16(), dst.f32(), dst.numel());
    ANNEAL_FAIL("a Copy between dtypes other than f32 and bf16");
  }
  if (dst.contiguous() && src.contiguous()) {
    std::memmove(dst.data(), src.data(), dst.bytes());
    return;
  }
  // Strided: walk every index of the (at most 4-D) shape, innermost dimension fastest.
  const size_t es = SizeOf(dst.dtype());
  const int nd = dst.ndim();
  int64_t idx[TensorView::kMaxDims] = {0, 0, 0, 0};
  for (int64_t e = 0; e < dst.numel(); ++e) {
    int64_t od = 0, os = 0;
    for (int d = 0; d < nd; ++d) {
      od += idx[d] * dst.stride(d);
      os += idx[d] * src.stride(d);
    }
    std::memcpy(static_cast<char*>(dst.data()) + od * es, static_cast<const char*>(src.data()) + os * es, es);
    for (int d = nd - 1; d >= 0; --d) {
      if (++idx[d] < dst.dim(d)) break;
      idx[d] = 0;
    }
  }
}

}  // namespace anneal
