// The parity harness (ggml's test-backend-ops style): every op of every registered backend
// (kernels/registry.h), in every dtype, against the reference backend "ref" in f32, on small shapes
// including odd sizes and strided views where an op takes them, as a normalized error with a
// tolerance per op and dtype. Inputs and outputs travel through the backend's own buffers and copies,
// so a device backend runs here unchanged. An op a backend lacks in a dtype is reported as skipped —
// counted and printed, neither passed nor failed — and an op without a case fails the harness. Plus
// finite-difference checks of the reference backward kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "kernels/ops.h"
#include "kernels/registry.h"

namespace anneal {
namespace {

using Vec = std::vector<float>;

Vec Rand(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  Vec v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// ||a - b|| / (||b|| + tiny)
double NormErr(const Vec& a, const Vec& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num) / (std::sqrt(den) + 1e-30);
}

// A tensor of a case in backend b's memory: made from f32 host values converted to dtype t (ids and
// f64 statistics keep their own types), read back widened to f32.
class Arg {
 public:
  Arg(Backend& b, DType t, const Vec& host, std::initializer_list<int64_t> shape) : b_(b) {
    buf_ = b.Allocate(t, host.size(), "parity input").value();
    view_ = buf_.View(t, shape);
    if (t == DType::kBF16) {
      std::vector<uint16_t> h(host.size());
      FloatsToBf16(host.data(), h.data(), h.size());
      b.CopyFromHost(view_, h.data(), b.DefaultStream());
    } else if (t == DType::kF64) {
      std::vector<double> h(host.begin(), host.end());
      b.CopyFromHost(view_, h.data(), b.DefaultStream());
    } else {
      b.CopyFromHost(view_, host.data(), b.DefaultStream());
    }
    b.Synchronize(b.DefaultStream());
  }
  static Arg Ids(Backend& b, const std::vector<int32_t>& ids) {
    Arg a(b, DType::kI32, Vec(ids.size()), {static_cast<int64_t>(ids.size())});
    a.b_.CopyFromHost(a.view_, ids.data(), b.DefaultStream());
    return a;
  }
  const TV& v() const { return view_; }
  Vec Get() const {
    const size_t n = static_cast<size_t>(view_.numel());
    Vec out(n);
    if (view_.dtype() == DType::kBF16) {
      std::vector<uint16_t> h(n);
      b_.CopyToHost(h.data(), view_, b_.DefaultStream());
      b_.Synchronize(b_.DefaultStream());
      Bf16ToFloats(h.data(), out.data(), n);
    } else if (view_.dtype() == DType::kF64) {
      std::vector<double> h(n);
      b_.CopyToHost(h.data(), view_, b_.DefaultStream());
      b_.Synchronize(b_.DefaultStream());
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(h[i]);
    } else {
      b_.CopyToHost(out.data(), view_, b_.DefaultStream());
      b_.Synchronize(b_.DefaultStream());
    }
    return out;
  }

 private:
  Backend& b_;
  Buffer buf_;
  TV view_;
};

void Append(Vec* all, std::initializer_list<const Arg*> outs) {
  for (const Arg* a : outs) {
    Vec v = a->Get();
    all->insert(all->end(), v.begin(), v.end());
  }
}

// A case runs an op on backend b in dtype t and returns its outputs, concatenated.
using Case = std::function<Vec(Backend& b, DType t)>;
struct OpCase {
  Case run;
  double tol_f32;   // fp32 kernels against the double-accumulating reference
  double tol_bf16;  // bf16 storage (8 mantissa bits): against the f32 reference
};

struct Shape {
  int B, T, C, H;
};
const Shape kShapes[] = {{1, 1, 4, 1}, {2, 7, 12, 3}, {3, 17, 20, 4}, {2, 33, 64, 4}};
// Attention shapes with their key/value heads: every classic shape (Hkv = H), then grouped-query
// ones: multi-query (Hkv 1), two key/value heads, head sizes 64 and 128, T not a multiple of 16;
// then one key/value head a query head at head sizes 32, 64 and 128 (T not a multiple of 16 either),
// the shapes CUDA's attention path 2 has kernels for — without them the harness never reaches it.
struct AttnShape {
  int B, T, C, H, Hkv;
};
std::vector<AttnShape> AttnShapes() {
  std::vector<AttnShape> v;
  for (auto s : kShapes) v.push_back({s.B, s.T, s.C, s.H, s.H});
  for (AttnShape a : {AttnShape{2, 7, 12, 3, 1}, {3, 17, 20, 4, 2}, {2, 33, 64, 4, 1}, {1, 19, 256, 4, 2},
                      {1, 17, 256, 2, 1}, {2, 19, 64, 2, 2}, {1, 33, 128, 2, 2}, {1, 17, 256, 2, 2}}) {
    v.push_back(a);
  }
  return v;
}
std::vector<int32_t> Tokens(int N, int mul, int add, int V) {
  std::vector<int32_t> t(N);
  for (int i = 0; i < N; ++i) t[i] = (i * mul + add) % V;
  return t;
}
int64_t I(size_t n) { return static_cast<int64_t>(n); }

std::map<Op, OpCase> Cases() {
  std::map<Op, OpCase> cs;
  // f32 against the double-accumulating reference: 1e-7 where every backend does the same float
  // operations in the same order (measured 0 on cpu), 2e-5 where sums are reordered (BLAS, chunked
  // reductions) or vector math approximates (measured <= 2e-7 on cpu). bf16: about three times the
  // error the ref emulation measured against f32 (2026-12-01: 3.6e-4 cross-entropy ... 6.1e-3
  // attention backward), so a backend that rounds more often than once per op fails.
  const double kExact = 1e-7, kSums = 2e-5;
  cs[Op::kEmbeddingForward] = {[](Backend& b, DType t) {
    Vec all;
    for (auto s : kShapes) {
      const int V = 11, N = s.B * s.T;
      Arg tok = Arg::Ids(b, Tokens(N, 7, 3, V));
      Arg wte(b, t, Rand(V * s.C, 1), {V, s.C}), wpe(b, t, Rand(s.T * s.C, 2), {s.T, s.C});
      Arg out(b, t, Vec(N * s.C), {s.B, s.T, s.C});
      b.EmbeddingForward(b.DefaultStream(), out.v(), tok.v().Reshape({s.B, s.T}), wte.v(), wpe.v());
      Append(&all, {&out});
    }
    return all;
  }, kExact, 1e-2};
  cs[Op::kEmbeddingBackward] = {[](Backend& b, DType t) {
    Vec all;
    for (auto s : kShapes) {
      const int V = 5, N = s.B * s.T;
      Arg tok = Arg::Ids(b, Tokens(N, 3, 0, V));  // repeated tokens accumulate
      Arg dwte(b, t, Rand(V * s.C, 3), {V, s.C}), dwpe(b, t, Rand(s.T * s.C, 4), {s.T, s.C});
      Arg dout(b, t, Rand(N * s.C, 5), {s.B, s.T, s.C});
      b.EmbeddingBackward(b.DefaultStream(), dwte.v(), dwpe.v(), dout.v(), tok.v().Reshape({s.B, s.T}));
      Append(&all, {&dwte, &dwpe});
    }
    return all;
  }, kSums, 1e-2};  // a token's rows may be summed before they are added
  cs[Op::kVocabEmbeddingForward] = {[](Backend& b, DType t) {
    Vec all;
    for (auto s : kShapes) {
      const int V = 13, Vl = 5, N = s.B * s.T;
      Arg tok = Arg::Ids(b, Tokens(N, 7, 1, V));
      Arg wte(b, t, Rand(Vl * s.C, 6), {Vl, s.C}), rows(b, t, Rand(N * s.C, 7), {N, s.C});
      b.VocabEmbeddingForward(b.DefaultStream(), rows.v(), tok.v(), wte.v(), 4);
      Append(&all, {&rows});
    }
    return all;
  }, kExact, 1e-2};
  cs[Op::kVocabEmbeddingBackward] = {[](Backend& b, DType t) {
    Vec all;
    for (auto s : kShapes) {
      const int V = 13, Vl = 5, N = s.B * s.T;
      Arg tok = Arg::Ids(b, Tokens(N, 5, 2, V));
      Arg dwte(b, t, Rand(Vl * s.C, 8), {Vl, s.C}), dwpe(b, t, Rand(s.T * s.C, 9), {s.T, s.C});
      Arg dall(b, t, Rand(N * s.C, 10), {N, s.C});
      b.VocabEmbeddingBackward(b.DefaultStream(), dwte.v(), dwpe.v(), dall.v(), tok.v(), 6, s.T);
      Append(&all, {&dwte, &dwpe});
    }
    return all;
  }, kSums, 1e-2};  // likewise
  cs[Op::kAddPositions] = {[](Backend& b, DType t) {
    Vec all;
    for (auto s : kShapes) {
      const int R = (s.B * s.T + 1) / 2;
      Arg out(b, t, Rand(R * s.C, 11), {R, s.C}), wpe(b, t, Rand(s.T * s.C, 12), {s.T, s.C});
      b.AddPositions(b.DefaultStream(), out.v(), wpe.v(), s.B * s.T - R, s.T);
      Append(&all, {&out});
    }
    return all;
  }, kExact, 1e-2};
  cs[Op::kLayerNormForward] = {[](Backend& b, DType t) {
    Vec all;
    for (auto s : kShapes) {
      const int N = s.B * s.T;
      Arg x(b, t, Rand(N * s.C, 6, 3.0f), {N, s.C}), w(b, t, Rand(s.C, 7), {s.C}), bb(b, t, Rand(s.C, 8), {s.C});
      Arg out(b, t, Vec(N * s.C), {N, s.C}), mean(b, DType::kF32, Vec(N), {N}), rstd(b, DType::kF32, Vec(N), {N});
      b.LayerNormForward(b.DefaultStream(), out.v(), mean.v(), rstd.v(), x.v(), w.v(), bb.v());
      Append(&all, {&out, &mean, &rstd});
    }
    return all;
  }, kSums, 1e-2};
  cs[Op::kLayerNormBackward] = {[](Backend& b, DType t) {
    Vec all;
    for (auto s : kShapes) {
      const int N = s.B * s.T;
      Vec x = Rand(N * s.C, 9), w = Rand(s.C, 10), bb = Rand(s.C, 11), out(x.size()), mean(N), rstd(N);
      RefKernels().layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), bb.data(), N, s.C);
      Arg ax(b, t, x, {N, s.C}), aw(b, t, w, {s.C}), am(b, DType::kF32, mean, {N}), ar(b, DType::kF32, rstd, {N});
      Arg dout(b, t, Rand(N * s.C, 12), {N, s.C}), dx(b, t, Rand(N * s.C, 13), {N, s.C});
      Arg dw(b, t, Rand(s.C, 14), {s.C}), db(b, t, Rand(s.C, 15), {s.C});
      b.LayerNormBackward(b.DefaultStream(), dx.v(), dw.v(), db.v(), dout.v(), ax.v(), aw.v(), am.v(), ar.v());
      Append(&all, {&dx, &dw, &db});
    }
    return all;
  }, kSums, 1e-2};
  cs[Op::kResidualLayerNormForward] = {[](Backend& b, DType t) {
    Vec all;
    for (auto s : kShapes) {
      const int N = s.B * s.T;
      Arg x(b, t, Rand(N * s.C, 16, 2.0f), {N, s.C}), y(b, t, Rand(N * s.C, 17), {N, s.C});
      Arg w(b, t, Rand(s.C, 18), {s.C}), bb(b, t, Rand(s.C, 19), {s.C});
      Arg res(b, t, Vec(N * s.C), {N, s.C}), out(b, t, Vec(N * s.C), {N, s.C}), mean(b, DType::kF32, Vec(N), {N}),
          rstd(b, DType::kF32, Vec(N), {N});
      b.ResidualLayerNormForward(b.DefaultStream(), res.v(), out.v(), mean.v(), rstd.v(), x.v(), y.v(), w.v(), bb.v());
      Append(&all, {&res, &out, &mean, &rstd});
    }
    return all;
  }, kSums, 1e-2};
  cs[Op::kLinearForward] = {[](Backend& b, DType t) {
    Vec all;
    for (auto s : kShapes) {
      const int N = s.B * s.T, OC = 3 * s.C + 1;
      Arg x(b, t, Rand(N * s.C, 16), {N, s.C}), w(b, t, Rand(OC * s.C, 17), {OC, s.C}), bias(b, t, Rand(OC, 18), {OC});
      Arg out(b, t, Vec(N * OC), {N, OC}), out2(b, t, Vec(N * OC), {N, OC}), g(b, t, Vec(N * OC), {N, OC});
      b.LinearForward(b.DefaultStream(), out.v(), x.v(), w.v(), bias.v(), g.v());
      b.LinearForward(b.DefaultStream(), out2.v(), x.v(), w.v(), TV());
      Append(&all, {&out, &out2, &g});
      // OC a multiple of 8 (GPT-2's 4C): where a backend fuses GELU into the GEMM (cuda, bf16).
      const int OC8 = 8 * (s.C / 2 + 1);
      Arg w8(b, t, Rand(OC8 * s.C, 19), {OC8, s.C}), bias8(b, t, Rand(OC8, 20), {OC8});
      Arg pre(b, t, Vec(N * OC8), {N, OC8}), act(b, t, Vec(N * OC8), {N, OC8}), act2(b, t, Vec(N * OC8), {N, OC8});
      Arg pre2(b, t, Vec(N * OC8), {N, OC8});
      b.LinearForward(b.DefaultStream(), pre.v(), x.v(), w8.v(), bias8.v(), act.v());
      b.LinearForward(b.DefaultStream(), pre2.v(), x.v(), w8.v(), TV(), act2.v());
      Append(&all, {&pre, &act, &pre2, &act2});
    }
    return all;
  }, kSums, 1e-2};
  cs[Op::kLinearBackward] = {[](Backend& b, DType t) {
    Vec all;
    for (auto s : kShapes) {
      const int N = s.B * s.T, OC = 2 * s.C + 3;
      Arg x(b, t, Rand(N * s.C, 19), {N, s.C}), w(b, t, Rand(OC * s.C, 20), {OC, s.C});
      Arg dout(b, t, Rand(N * OC, 21), {N, OC}), dx(b, t, Rand(N * s.C, 22), {N, s.C});
      Arg dw(b, t, Rand(OC * s.C, 23), {OC, s.C}), db(b, t, Rand(OC, 24), {OC}), dw2(b, t, Rand(OC * s.C, 25), {OC, s.C});
      b.LinearBackward(b.DefaultStream(), dx.v(), dw.v(), db.v(), dout.v(), x.v(), w.v());
      b.LinearBackward(b.DefaultStream(), dx.v(), dw2.v(), TV(), dout.v(), x.v(), w.v());
      Append(&all, {&dx, &dw, &db, &dw2});
    }
    return all;
  }, kSums, 1e-2};
  cs[Op::kBiasAdd] = {[](Backend& b, DType t) {
    Vec all;
    for (auto s : kShapes) {
      const int N = s.B * s.T, OC = s.C + 3;
      Arg out(b, t, Rand(N * OC, 26), {N, OC}), bias(b, t, Rand(OC, 27), {OC});
      b.BiasAdd(b.DefaultStream(), out.v(), bias.v());
      Append(&all, {&out});
    }
    return all;
  }, kExact, 1e-2};
  cs[Op::kAttentionForward] = {[](Backend& b, DType t) {
    Vec all;
    for (auto s : AttnShapes()) {
      const int n = s.B * s.T * s.C, Ckv = s.C / s.H * s.Hkv, nkv = s.B * s.T * Ckv;
      Arg q(b, t, Rand(n, 25), {s.B, s.T, s.C}), k(b, t, Rand(nkv, 26), {s.B, s.T, Ckv});
      Arg v(b, t, Rand(nkv, 27), {s.B, s.T, Ckv});
      Arg out(b, t, Vec(n), {s.B, s.T, s.C}), lse(b, DType::kF32, Vec(s.B * s.H * s.T), {s.B * s.H * s.T});
      b.AttentionForward(b.DefaultStream(), out.v(), lse.v(), q.v(), k.v(), v.v(), s.H);
      Append(&all, {&out, &lse});
    }
    return all;
  }, kSums, 1e-2};
  cs[Op::kAttentionBackward] = {[](Backend& b, DType t) {
    Vec all;
    for (auto s : AttnShapes()) {
      const int n = s.B * s.T * s.C, Ckv = s.C / s.H * s.Hkv, nkv = s.B * s.T * Ckv;
      Vec q = Rand(n, 28), kk = Rand(nkv, 29), v = Rand(nkv, 30), out(n), lse(s.B * s.H * s.T);
      RefKernels().attention_forward(out.data(), lse.data(), q.data(), kk.data(), v.data(), s.B, s.T, s.C, s.H, s.Hkv);
      Arg aq(b, t, q, {s.B, s.T, s.C}), ak(b, t, kk, {s.B, s.T, Ckv}), av(b, t, v, {s.B, s.T, Ckv});
      Arg ao(b, t, out, {s.B, s.T, s.C}), al(b, DType::kF32, lse, {I(lse.size())}), dout(b, t, Rand(n, 31), {s.B, s.T, s.C});
      Arg dq(b, t, Vec(n), {s.B, s.T, s.C}), dk(b, t, Vec(nkv), {s.B, s.T, Ckv}), dv(b, t, Vec(nkv), {s.B, s.T, Ckv});
      b.AttentionBackward(b.DefaultStream(), dq.v(), dk.v(), dv.v(), dout.v(), aq.v(), ak.v(), av.v(), ao.v(), al.v(),
                          s.H);
      Append(&all, {&dq, &dk, &dv});
    }
    return all;
  }, kSums, 2e-2};
  cs[Op::kAttentionDecode] = {[](Backend& b, DType t) {
    Vec all;
    for (auto s : AttnShapes()) {
      const int maxT = s.T + 3, Ckv = s.C / s.H * s.Hkv;  // the cache is longer than the rows attended: a strided view
      Arg q(b, t, Rand(s.C, 32), {s.C}), kc(b, t, Rand(maxT * Ckv, 33), {maxT, Ckv});
      Arg vc(b, t, Rand(maxT * Ckv, 34), {maxT, Ckv}), out(b, t, Vec(s.C), {s.C}), sc(b, DType::kF32, Vec(maxT), {maxT});
      b.AttentionDecode(b.DefaultStream(), out.v(), q.v(), kc.v().Rows(0, s.T), vc.v().Rows(0, s.T), sc.v(), s.H);
      Append(&all, {&out});
    }
    return all;
  }, kSums, 1e-2};  // a reordered softmax and weighted sum (a GPU's tree order)
  cs[Op::kRmsNormForward] = {[](Backend& b, DType t) {
    Vec all;
    for (auto s : kShapes) {
      const int N = s.B * s.T;
      Arg x(b, t, Rand(N * s.C, 70, 2.0f), {N, s.C}), w(b, t, Rand(s.C, 71), {s.C});
      Arg out(b, t, Vec(N * s.C), {N, s.C}), rstd(b, DType::kF32, Vec(N), {N});
      b.RmsNormForward(b.DefaultStream(), out.v(), rstd.v(), x.v(), w.v(), 1e-5f);
      Append(&all, {&out, &rstd});
    }
    return all;
  }, kSums, 1e-2};
  cs[Op::kRmsNormBackward] = {[](Backend& b, DType t) {
    Vec all;
    for (auto s : kShapes) {
      const int N = s.B * s.T;
      Vec x = Rand(N * s.C, 72, 2.0f), w = Rand(s.C, 73), out(N * s.C), rstd(N);
      RefKernels().rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, s.C, 1e-6f);
      Arg ax(b, t, x, {N, s.C}), aw(b, t, w, {s.C}), ar(b, DType::kF32, rstd, {N});
      Arg dout(b, t, Rand(N * s.C, 74), {N, s.C}), dx(b, t, Rand(N * s.C, 75), {N, s.C}), dw(b, t, Rand(s.C, 76), {s.C});
      b.RmsNormBackward(b.DefaultStream(), dx.v(), dw.v(), dout.v(), ax.v(), aw.v(), ar.v());
      Append(&all, {&dx, &dw});
    }
    return all;
  }, kSums, 1e-2};
  cs[Op::kRotary] = {[](Backend& b, DType t) {
    Vec all;
    for (auto s : AttnShapes()) {
      const int hs = s.C / s.H, half = hs / 2, n = s.B * s.T * s.C;
      if (hs % 2) continue;
      Vec cs(s.T * half), sn(s.T * half);
      for (int p = 0; p < s.T; ++p) {
        for (int i = 0; i < half; ++i) {
          const float ang = static_cast<float>(p) * std::pow(10000.0f, -2.0f * i / hs);
          cs[p * half + i] = std::cos(ang);
          sn[p * half + i] = std::sin(ang);
        }
      }
      Arg c(b, DType::kF32, cs, {s.T, half}), sv(b, DType::kF32, sn, {s.T, half});
      for (bool inverse : {false, true}) {
        Arg x(b, t, Rand(n, inverse ? 78 : 77), {s.B, s.T, s.C});
        b.Rotary(b.DefaultStream(), x.v(), c.v(), sv.v(), s.H, inverse);
        Append(&all, {&x});
      }
    }
    return all;
  }, kExact, 1e-2};
  cs[Op::kSwiGluForward] = {[](Backend& b, DType t) {
    Arg g(b, t, Rand(1001, 79, 3.0f), {1001}), u(b, t, Rand(1001, 80), {1001}), out(b, t, Vec(1001), {1001});
    b.SwiGluForward(b.DefaultStream(), out.v(), g.v(), u.v());
    return out.Get();
  }, kSums, 1e-2};  // exp may be approximated (vector math)
  cs[Op::kSwiGluBackward] = {[](Backend& b, DType t) {
    Arg g(b, t, Rand(1001, 81, 3.0f), {1001}), u(b, t, Rand(1001, 82), {1001}), d(b, t, Rand(1001, 83), {1001});
    Arg dg(b, t, Vec(1001), {1001}), du(b, t, Vec(1001), {1001});
    b.SwiGluBackward(b.DefaultStream(), dg.v(), du.v(), g.v(), u.v(), d.v());
    Vec all;
    Append(&all, {&dg, &du});
    return all;
  }, kSums, 1e-2};
  cs[Op::kGeluForward] = {[](Backend& b, DType t) {
    Arg x(b, t, Rand(1001, 32, 3.0f), {1001}), out(b, t, Vec(1001), {1001});
    b.GeluForward(b.DefaultStream(), out.v(), x.v());
    return out.Get();
  }, kSums, 1e-2};
  cs[Op::kGeluBackward] = {[](Backend& b, DType t) {
    Arg x(b, t, Rand(1001, 33, 3.0f), {1001}), d(b, t, Rand(1001, 34), {1001}), out(b, t, Vec(1001), {1001});
    b.GeluBackward(b.DefaultStream(), out.v(), x.v(), d.v());
    return out.Get();
  }, kSums, 1e-2};
  cs[Op::kResidualForward] = {[](Backend& b, DType t) {
    Arg x(b, t, Rand(777, 35), {777}), y(b, t, Rand(777, 36), {777}), out(b, t, Vec(777), {777});
    b.ResidualForward(b.DefaultStream(), out.v(), x.v(), y.v());
    return out.Get();
  }, kExact, 1e-2};
  cs[Op::kAccumulate] = {[](Backend& b, DType t) {
    Arg x(b, t, Rand(777, 37), {777}), y(b, t, Rand(777, 38), {777});
    b.Accumulate(b.DefaultStream(), x.v(), y.v());
    return x.Get();
  }, kExact, 1e-2};
  cs[Op::kCrossEntropy] = {[](Backend& b, DType t) {
    Vec all;
    for (int N : {1, 5, 33}) {
      const int V = 300, Vp = 384;
      Vec logits = Rand(N * Vp, 37, 2.0f);
      Arg tgt = Arg::Ids(b, Tokens(N, 37, 0, V));
      Arg eval(b, t, logits, {N, Vp}), grad(b, t, logits, {N, Vp}), losses(b, DType::kF32, Vec(N), {N});
      const double total = b.CrossEntropy(b.DefaultStream(), eval.v(), losses.v(), tgt.v(), V, 0.0f);
      Append(&all, {&losses});
      all.push_back(static_cast<float>(total));
      b.CrossEntropy(b.DefaultStream(), grad.v(), losses.v(), tgt.v(), V, 1.0f / N);
      Append(&all, {&grad});  // the gradient, padding included (must be 0)
    }
    return all;
  }, kSums, 2e-3};
  cs[Op::kVocabLossStats] = {[](Backend& b, DType t) {
    Vec all;
    for (int nreal : {0, 40, 64}) {
      const int N = 9, Vl = 64;
      Arg tgt = Arg::Ids(b, Tokens(N, 29, 3, 200));
      Arg logits(b, t, Rand(N * Vl, 39, 2.0f), {N, Vl}), stats(b, DType::kF64, Vec(2 * N), {N, 2});
      b.VocabLossStats(b.DefaultStream(), stats.v(), logits.v(), tgt.v(), 128, nreal);
      Vec st = stats.Get();
      for (float& x : st) x = std::isinf(x) ? -1e4f : x;  // the empty slice's -inf, comparable
      all.insert(all.end(), st.begin(), st.end());
    }
    return all;
  }, kExact, 1e-5};
  cs[Op::kVocabLossCombine] = {[](Backend& b, DType t) {
    Vec all;
    const int N = 7, Vl = 32, tp = 3;
    Vec g = Rand(tp * N * 2, 40, 1.0f);
    for (int i = 0; i < tp * N; ++i) g[2 * i] = 3.0f + std::fabs(g[2 * i]);  // plausible log-sum-exps
    Arg tgt = Arg::Ids(b, Tokens(N, 11, 1, 96));
    Arg gathered(b, DType::kF64, g, {tp, N, 2}), row(b, DType::kF64, Vec(2 * N), {N, 2});
    for (float dscale : {0.0f, 0.25f}) {
      Arg logits(b, t, Rand(N * Vl, 41), {N, Vl}), losses(b, DType::kF32, Vec(N), {N});
      const double total = b.VocabLossCombine(b.DefaultStream(), logits.v(), losses.v(), row.v(), gathered.v(), tgt.v(),
                                              32, 30, dscale);
      Append(&all, {&logits, &losses});
      all.push_back(static_cast<float>(total));
    }
    return all;
  }, kExact, 5e-3};
  cs[Op::kSumSquares] = {[](Backend& b, DType t) {
    Arg g(b, t, Rand(100003, 38), {100003});
    return Vec{static_cast<float>(b.SumSquares(b.DefaultStream(), g.v()))};
  }, kSums, 1e-4};
  cs[Op::kScale] = {[](Backend& b, DType t) {
    Arg g(b, t, Rand(1003, 39), {1003});
    b.Scale(b.DefaultStream(), g.v(), 0.37f);
    return g.Get();
  }, kExact, 1e-2};
  cs[Op::kAdamW] = {[](Backend& b, DType t) {
    Vec v0 = Rand(999, 43, 0.1f);
    for (auto& x : v0) x = x * x;
    // fp32 masters and moments, gradients in the compute dtype (the precision policy)
    Arg p(b, DType::kF32, Rand(999, 40), {999}), g(b, t, Rand(999, 41), {999}), m(b, DType::kF32, Rand(999, 42, 0.1f), {999});
    Arg v(b, DType::kF32, v0, {999});
    for (int step = 1; step <= 3; ++step) {
      b.AdamW(b.DefaultStream(), p.v(), g.v(), m.v(), v.v(), 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step);
    }
    Vec all;
    Append(&all, {&p, &m, &v});
    return all;
  }, kSums, 2e-2};
  cs[Op::kZero] = {[](Backend& b, DType t) {
    Arg x(b, t, Rand(1001, 44), {1001});
    b.Zero(b.DefaultStream(), x.v().Rows(100, 801));
    Vec got = x.Get();
    for (int i = 0; i < 1001; ++i) got[i] += (i >= 100 && i < 901) ? 1.0f : 0.0f;  // zeroed part reads as 1
    return got;
  }, kExact, 5e-3};
  cs[Op::kCopy] = {[](Backend& b, DType t) {
    // contiguous, then a strided column block (rows 5, columns 3..9 of a 5x13 matrix) both ways
    Arg src(b, t, Rand(65, 45), {5, 13}), dst(b, t, Rand(65, 46), {5, 13}), blk(b, t, Vec(35), {5, 7});
    b.Copy(b.DefaultStream(), dst.v().Rows(1, 3), src.v().Rows(2, 3));
    const TV cols = src.v().Strided({5, 7}, {13, 1}).WithData(static_cast<char*>(src.v().data()) + 3 * SizeOf(t), t);
    b.Copy(b.DefaultStream(), blk.v(), cols);
    // from f32 into dtype t (bf16: rounded to nearest even)
    Arg wide(b, DType::kF32, Rand(50, 47), {50}), narrow(b, t, Vec(50), {50});
    b.Copy(b.DefaultStream(), narrow.v(), wide.v());
    Vec all;
    Append(&all, {&dst, &blk, &narrow});
    return all;
  }, kExact, 5e-3};
  return cs;
}

TEST(ParityTest, EveryOpHasACase) {
  auto cases = Cases();
  for (Op op : AllOps()) EXPECT_TRUE(cases.count(op)) << "op without a parity case: " << OpName(op);
}

// One (backend, dtype) pair: every op against ref in f32. The table lists each op's error against its
// tolerance, or the ops the backend lacks in that dtype; a pair that supports no op at all is not a
// case (Pairs), so no test is skipped for it.
class BackendParity : public ::testing::TestWithParam<std::pair<std::string, DType>> {};

TEST_P(BackendParity, EveryOpMatchesTheReference) {
  const auto& [name, dtype] = GetParam();
  Backend* b = BackendByName(name);
  ASSERT_NE(b, nullptr) << name;
  auto cases = Cases();
  int passed = 0, skipped = 0;
  std::printf("  %-28s %-5s %-5s %s\n", "op", "back", "dtype", "normalized error / tolerance");
  for (Op op : AllOps()) {
    if (!b->Supports(op, dtype)) {
      ++skipped;
      std::printf("  %-28s %-5s %-5s skipped (the backend lacks it)\n", OpName(op), name.c_str(), DTypeName(dtype));
      continue;
    }
    const OpCase& c = cases.at(op);
    const double tol = dtype == DType::kF32 ? c.tol_f32 : c.tol_bf16;
    const Vec want = c.run(RefBackend(), DType::kF32), got = c.run(*b, dtype);
    ASSERT_EQ(want.size(), got.size()) << OpName(op);
    const double err = NormErr(got, want);
    std::printf("  %-28s %-5s %-5s %.3g / %.3g\n", OpName(op), name.c_str(), DTypeName(dtype), err, tol);
    EXPECT_LE(err, tol) << OpName(op) << " on " << name << " in " << DTypeName(dtype);
    if (err <= tol) ++passed;
  }
  std::printf("  %s %s: %d ops passed, %d not supported by the backend\n", name.c_str(), DTypeName(dtype), passed,
              skipped);
  EXPECT_GT(passed, 0) << name << " supports no op in " << DTypeName(dtype);
}

std::vector<std::pair<std::string, DType>> Pairs() {
  std::vector<std::pair<std::string, DType>> v;
  for (const std::string& n : BackendNames()) {
    for (DType t : {DType::kF32, DType::kBF16}) {
      if (n == "ref" && t == DType::kF32) continue;  // the truth itself (checked by finite differences below)
      bool any = false;  // the cpu backend has no bf16 ops: no case, rather than a skipped one
      for (Op op : AllOps()) any = any || BackendByName(n)->Supports(op, t);
      if (any) v.push_back({n, t});
    }
  }
  return v;
}
INSTANTIATE_TEST_SUITE_P(Registered, BackendParity, ::testing::ValuesIn(Pairs()),
                         [](const auto& info) { return info.param.first + "_" + DTypeName(info.param.second); });

// SumSquaresEach (the gradient norm's one read back) gives each view's SumSquares bit for bit, on every
// backend in both dtypes it has: views of several sizes (one chunk, several, empty) in one call.
TEST(ParityTest, SumSquaresEachEqualsOneCallPerView) {
  for (const auto& [name, t] : Pairs()) {
    Backend& b = *BackendByName(name);
    if (!b.Supports(Op::kSumSquares, t)) continue;
    std::vector<Arg> args;
    int seed = 90;
    for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{200003}, int64_t{65536}, int64_t{7}}) {
      args.emplace_back(b, t, Rand(static_cast<size_t>(n), seed++), std::initializer_list<int64_t>{n});
    }
    std::vector<TV> views;
    for (const Arg& a : args) views.push_back(a.v());
    views.push_back(TV(args[0].v().data(), t, {0}, b.device()));  // an empty view: 0
    std::vector<double> each(views.size(), -1);
    b.SumSquaresEach(b.DefaultStream(), views, each.data());
    for (size_t i = 0; i < views.size(); ++i) {
      const double one = i + 1 < views.size() ? b.SumSquares(b.DefaultStream(), views[i]) : 0.0;
      EXPECT_EQ(each[i], one) << name << " " << DTypeName(t) << " view " << i;
    }
  }
}

// LinearBackwardWrite (the input gradient written, not added: no memset before it) gives what Zero then
// LinearBackward gives, on every backend in both its dtypes, whatever the input gradient held before.
TEST(ParityTest, LinearBackwardWriteEqualsZeroThenLinearBackward) {
  const int64_t N = 37, C = 24, OC = 40;
  for (const auto& [name, t] : Pairs()) {
    Backend& b = *BackendByName(name);
    if (!b.Supports(Op::kLinearBackward, t)) continue;
    Arg dout(b, t, Rand(N * OC, 71), {N, OC}), inp(b, t, Rand(N * C, 72), {N, C}), w(b, t, Rand(OC * C, 73), {OC, C});
    Arg d1(b, t, Rand(N * C, 74), {N, C}), d2(b, t, Rand(N * C, 74), {N, C});  // stale values: overwritten
    Arg w1(b, t, Rand(OC * C, 75), {OC, C}), w2(b, t, Rand(OC * C, 75), {OC, C});
    Arg b1(b, t, Rand(OC, 76), {OC}), b2(b, t, Rand(OC, 76), {OC});
    b.LinearBackwardWrite(b.DefaultStream(), d1.v(), w1.v(), b1.v(), dout.v(), inp.v(), w.v());
    b.Zero(b.DefaultStream(), d2.v());
    b.LinearBackward(b.DefaultStream(), d2.v(), w2.v(), b2.v(), dout.v(), inp.v(), w.v());
    if (b.device().is_cpu()) {  // the default: the same calls, the same bits
      EXPECT_EQ(d1.Get(), d2.Get()) << name << " " << DTypeName(t);
      EXPECT_EQ(w1.Get(), w2.Get()) << name << " " << DTypeName(t);
      EXPECT_EQ(b1.Get(), b2.Get()) << name << " " << DTypeName(t);
    } else {  // a GEMM with beta 0 may be given another algorithm than with beta 1: equal to rounding
      const double bound = t == DType::kBF16 ? 1e-2 : 1e-5;
      EXPECT_LT(NormErr(d1.Get(), d2.Get()), bound) << name << " " << DTypeName(t);
      EXPECT_EQ(w1.Get(), w2.Get()) << name << " " << DTypeName(t);
      EXPECT_EQ(b1.Get(), b2.Get()) << name << " " << DTypeName(t);
    }
  }
}

// LinearBackwardGelu (the down projection's backward through the GELU before it) gives what
// LinearBackwardWrite then GeluBackward into another buffer give: bit for bit on the host; on a GPU,
// whose bf16 path is cuBLASLt's DGELU epilogue, to bf16's rounding.
TEST(ParityTest, LinearBackwardGeluEqualsTheTwoOps) {
  const int64_t N = 33, F = 48, C = 16;  // dout (N,C), w (C,F), inp = GELU(pre) (N,F)
  for (const auto& [name, t] : Pairs()) {
    Backend& b = *BackendByName(name);
    if (!b.Supports(Op::kLinearBackward, t) || !b.Supports(Op::kGeluBackward, t)) continue;
    Arg dout(b, t, Rand(N * C, 81), {N, C}), pre(b, t, Rand(N * F, 82), {N, F}), w(b, t, Rand(C * F, 83), {C, F});
    Arg inp(b, t, Vec(N * F), {N, F});
    b.GeluForward(b.DefaultStream(), inp.v(), pre.v());
    Arg d1(b, t, Rand(N * F, 84), {N, F}), mid(b, t, Vec(N * F), {N, F}), d2(b, t, Vec(N * F), {N, F});
    Arg w1(b, t, Rand(C * F, 85), {C, F}), w2(b, t, Rand(C * F, 85), {C, F});
    Arg b1(b, t, Rand(C, 86), {C}), b2(b, t, Rand(C, 86), {C});
    b.LinearBackwardGelu(b.DefaultStream(), d1.v(), w1.v(), b1.v(), dout.v(), inp.v(), w.v(), pre.v());
    b.LinearBackwardWrite(b.DefaultStream(), mid.v(), w2.v(), b2.v(), dout.v(), inp.v(), w.v());
    b.GeluBackward(b.DefaultStream(), d2.v(), pre.v(), mid.v());
    if (b.device().is_cpu()) {
      EXPECT_EQ(d1.Get(), d2.Get()) << name << " " << DTypeName(t);
    } else {
      EXPECT_LT(NormErr(d1.Get(), d2.Get()), t == DType::kBF16 ? 2e-2 : 1e-5) << name << " " << DTypeName(t);
    }
    EXPECT_EQ(w1.Get(), w2.Get()) << name << " " << DTypeName(t);
    EXPECT_EQ(b1.Get(), b2.Get()) << name << " " << DTypeName(t);
  }
}

// The bf16 emulation rounds once: a value bf16 holds exactly goes through an op unchanged.
TEST(ParityTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(RoundToBf16(1.0f + 1.0f / 256), 1.0f);             // a tie: to the even mantissa
  EXPECT_EQ(RoundToBf16(1.0f + 3.0f / 256), 1.0f + 4.0f / 256);  // a tie: up to the even one
  EXPECT_EQ(RoundToBf16(1.0f + 1.5f / 256), 1.0f + 2.0f / 256);  // above half: up
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(NAN))));
  EXPECT_TRUE(std::isinf(RoundToBf16(INFINITY)));
}

// Finite differences on the reference backward ops: L = sum(out * R) for a fixed random R.
double Dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// Checks analytic dL/dx against central differences at a few coordinates of x.
void CheckFd(const std::string& what, Vec& x, const std::function<double()>& loss, const Vec& analytic) {
  const float h = 1e-2f;
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); i += std::max<size_t>(1, x.size() / 23)) {
    float keep = x[i];
    x[i] = keep + h;
    double lp = loss();
    x[i] = keep - h;
    double lm = loss();
    x[i] = keep;
    double fd = (lp - lm) / (2 * h);
    num += (fd - analytic[i]) * (fd - analytic[i]);
    den += fd * fd;
  }
  EXPECT_LE(std::sqrt(num / (den + 1e-30)), 2e-3) << what;
}

TEST(ParityTest, ReferenceBackwardMatchesFiniteDifferences) {
  const KernelTable& r = RefKernels();
  const int B = 2, T = 5, C = 8, H = 2, N = B * T;
  {  // layernorm
    Vec x = Rand(N * C, 50), w = Rand(C, 51), b = Rand(C, 52), R = Rand(N * C, 53), out(N * C), mean(N), rstd(N);
    auto loss = [&] {
      r.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
      return Dot(out, R);
    };
    loss();
    Vec dx(N * C, 0), dw(C, 0), db(C, 0);
    r.layernorm_backward(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C);
    CheckFd("layernorm dinp", x, loss, dx);
    CheckFd("layernorm dw", w, loss, dw);
    CheckFd("layernorm db", b, loss, db);
  }
  {  // matmul
    const int OC = 6;
    Vec x = Rand(N * C, 54), w = Rand(OC * C, 55), b = Rand(OC, 56), R = Rand(N * OC, 57), out(N * OC);
    auto loss = [&] {
      r.linear_forward(out.data(), x.data(), w.data(), b.data(), N, C, OC);
      return Dot(out, R);
    };
    Vec dx(N * C, 0), dw(OC * C, 0), db(OC, 0);
    r.linear_backward(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(), N, C, OC);
    CheckFd("matmul dinp", x, loss, dx);
    CheckFd("matmul dw", w, loss, dw);
    CheckFd("matmul dbias", b, loss, db);
  }
  {  // attention
    Vec q = Rand(N * C, 58), k = Rand(N * C, 59), v = Rand(N * C, 60), R = Rand(N * C, 61), out(N * C), lse(B * H * T);
    auto loss = [&] {
      r.attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), B, T, C, H, H);
      return Dot(out, R);
    };
    loss();
    Vec dq(N * C), dk(N * C), dv(N * C);
    r.attention_backward(dq.data(), dk.data(), dv.data(), R.data(), q.data(), k.data(), v.data(), out.data(), lse.data(),
                         B, T, C, H, H);
    CheckFd("attention dq", q, loss, dq);
    CheckFd("attention dk", k, loss, dk);
    CheckFd("attention dv", v, loss, dv);
  }
  {  // grouped-query attention: 4 query heads over 2 key/value heads
    const int Hq = 4, Hkv = 2, Ckv = C / Hq * Hkv;
    Vec q = Rand(N * C, 90), k = Rand(N * Ckv, 91), v = Rand(N * Ckv, 92), R = Rand(N * C, 93), out(N * C),
        lse(B * Hq * T);
    auto loss = [&] {
      r.attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), B, T, C, Hq, Hkv);
      return Dot(out, R);
    };
    loss();
    Vec dq(N * C), dk(N * Ckv), dv(N * Ckv);
    r.attention_backward(dq.data(), dk.data(), dv.data(), R.data(), q.data(), k.data(), v.data(), out.data(), lse.data(),
                         B, T, C, Hq, Hkv);
    CheckFd("grouped attention dq", q, loss, dq);
    CheckFd("grouped attention dk", k, loss, dk);
    CheckFd("grouped attention dv", v, loss, dv);
  }
  {  // rmsnorm
    Vec x = Rand(N * C, 94), w = Rand(C, 95), R = Rand(N * C, 96), out(N * C), rstd(N);
    auto loss = [&] {
      r.rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
      return Dot(out, R);
    };
    loss();
    Vec dx(N * C, 0), dw(C, 0);
    r.rmsnorm_backward(dx.data(), dw.data(), R.data(), x.data(), w.data(), rstd.data(), N, C);
    CheckFd("rmsnorm dinp", x, loss, dx);
    CheckFd("rmsnorm dw", w, loss, dw);
  }
  {  // the ops written once for the host backends: rotary (backward = the inverse rotation) and SwiGLU
    Backend& ref = *BackendByName("ref");
    const Stream st = ref.DefaultStream();
    const int hs = C / H, half = hs / 2;
    Vec cs(T * half), sn(T * half);
    for (int i = 0; i < T * half; ++i) {
      cs[i] = std::cos(0.3f * i);
      sn[i] = std::sin(0.3f * i);
    }
    auto V = [&](Vec& x, std::initializer_list<int64_t> shape) { return TensorView(x.data(), DType::kF32, shape, Device::Cpu()); };
    Vec x = Rand(N * C, 97), R = Rand(N * C, 98);
    auto loss = [&] {
      Vec y = x;
      ref.Rotary(st, V(y, {B, T, C}), V(cs, {T, half}), V(sn, {T, half}), H, false);
      return Dot(y, R);
    };
    Vec dx = R;
    ref.Rotary(st, V(dx, {B, T, C}), V(cs, {T, half}), V(sn, {T, half}), H, true);
    CheckFd("rotary", x, loss, dx);
    Vec g = Rand(40, 99, 2.0f), u = Rand(40, 100), R2 = Rand(40, 101), out(40), dg(40), du(40);
    auto sloss = [&] {
      ref.SwiGluForward(st, V(out, {40}), V(g, {40}), V(u, {40}));
      return Dot(out, R2);
    };
    ref.SwiGluBackward(st, V(dg, {40}), V(du, {40}), V(g, {40}), V(u, {40}), V(R2, {40}));
    CheckFd("swiglu dgate", g, sloss, dg);
    CheckFd("swiglu dup", u, sloss, du);
  }
  {  // gelu
    Vec x = Rand(40, 62, 2.0f), R = Rand(40, 63), out(40), dx(40);
    auto loss = [&] {
      r.gelu_forward(out.data(), x.data(), x.size());
      return Dot(out, R);
    };
    r.gelu_backward(dx.data(), x.data(), R.data(), x.size());
    CheckFd("gelu", x, loss, dx);
  }
  {  // cross-entropy: d(sum losses)/d(logits) with dscale 1
    const int V = 10, Vp = 16;
    Vec logits = Rand(N * Vp, 64), losses(N), g = logits;
    std::vector<int32_t> tgt(N);
    for (int i = 0; i < N; ++i) tgt[i] = i % V;
    auto loss = [&] {
      Vec l2 = logits;
      return r.crossentropy(l2.data(), losses.data(), tgt.data(), N, V, Vp, 0.0f);
    };
    r.crossentropy(g.data(), losses.data(), tgt.data(), N, V, Vp, 1.0f);
    CheckFd("cross-entropy", logits, loss, g);
  }
  {  // encoder
    const int V = 7;
    std::vector<int32_t> tok(N);
    for (int i = 0; i < N; ++i) tok[i] = (i * 3) % V;
    Vec wte = Rand(V * C, 65), wpe = Rand(T * C, 66), R = Rand(N * C, 67), out(N * C);
    auto loss = [&] {
      r.embedding_forward(out.data(), tok.data(), wte.data(), wpe.data(), B, T, C);
      return Dot(out, R);
    };
    Vec dwte(V * C, 0), dwpe(T * C, 0);
    r.embedding_backward(dwte.data(), dwpe.data(), R.data(), tok.data(), B, T, C);
    CheckFd("encoder dwte", wte, loss, dwte);
    CheckFd("encoder dwpe", wpe, loss, dwpe);
  }
}

}  // namespace
}  // namespace anneal
