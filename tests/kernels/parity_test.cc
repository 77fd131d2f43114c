// The parity harness (ggml's test-backend-ops style): every op of every optimized backend against
// kernels/ref on small shapes including odd sizes, as a normalized error; plus finite-difference
// checks of the reference backward ops. An op a backend lacks is reported as skipped, never passed,
// and an op without a case here fails the harness.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "kernels/ops.h"

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

constexpr double kTol = 2e-5;  // fp32 kernels against the double-accumulating reference

// A case runs an op on backend `k` and returns its outputs, concatenated.
using Case = std::function<Vec(const KernelTable& k)>;

struct Shape {
  int B, T, C, H;
};
const Shape kShapes[] = {{1, 1, 4, 1}, {2, 7, 12, 3}, {3, 17, 20, 4}, {2, 33, 64, 4}};

std::map<std::string, Case> Cases() {
  std::map<std::string, Case> cs;
  cs["encoder_forward"] = [](const KernelTable& k) {
    Vec all;
    for (auto s : kShapes) {
      const int V = 11, N = s.B * s.T;
      std::vector<int32_t> tok(N);
      for (int i = 0; i < N; ++i) tok[i] = (i * 7 + 3) % V;
      Vec wte = Rand(static_cast<size_t>(V) * s.C, 1), wpe = Rand(static_cast<size_t>(s.T) * s.C, 2), out(static_cast<size_t>(N) * s.C);
      k.encoder_forward(out.data(), tok.data(), wte.data(), wpe.data(), s.B, s.T, s.C);
      all.insert(all.end(), out.begin(), out.end());
    }
    return all;
  };
  cs["encoder_backward"] = [](const KernelTable& k) {
    Vec all;
    for (auto s : kShapes) {
      const int V = 5, N = s.B * s.T;
      std::vector<int32_t> tok(N);
      for (int i = 0; i < N; ++i) tok[i] = (i * 3) % V;  // repeated tokens accumulate
      Vec dwte = Rand(static_cast<size_t>(V) * s.C, 3), dwpe = Rand(static_cast<size_t>(s.T) * s.C, 4);
      Vec dout = Rand(static_cast<size_t>(N) * s.C, 5);
      k.encoder_backward(dwte.data(), dwpe.data(), dout.data(), tok.data(), s.B, s.T, s.C);
      all.insert(all.end(), dwte.begin(), dwte.end());
      all.insert(all.end(), dwpe.begin(), dwpe.end());
    }
    return all;
  };
  cs["layernorm_forward"] = [](const KernelTable& k) {
    Vec all;
    for (auto s : kShapes) {
      const int N = s.B * s.T;
      Vec x = Rand(static_cast<size_t>(N) * s.C, 6, 3.0f), w = Rand(s.C, 7), b = Rand(s.C, 8);
      Vec out(x.size()), mean(N), rstd(N);
      k.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, s.C);
      for (auto* v : {&out, &mean, &rstd}) all.insert(all.end(), v->begin(), v->end());
    }
    return all;
  };
  cs["layernorm_backward"] = [](const KernelTable& k) {
    Vec all;
    for (auto s : kShapes) {
      const int N = s.B * s.T;
      Vec x = Rand(static_cast<size_t>(N) * s.C, 9), w = Rand(s.C, 10), b = Rand(s.C, 11), out(x.size()), mean(N), rstd(N);
      RefKernels().layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, s.C);
      Vec dout = Rand(x.size(), 12), dx = Rand(x.size(), 13), dw = Rand(s.C, 14), db = Rand(s.C, 15);
      k.layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(), rstd.data(), N,
                           s.C);
      for (auto* v : {&dx, &dw, &db}) all.insert(all.end(), v->begin(), v->end());
    }
    return all;
  };
  cs["matmul_forward"] = [](const KernelTable& k) {
    Vec all;
    for (auto s : kShapes) {
      const int N = s.B * s.T, OC = 3 * s.C + 1;
      Vec x = Rand(static_cast<size_t>(N) * s.C, 16), w = Rand(static_cast<size_t>(OC) * s.C, 17), b = Rand(OC, 18);
      Vec out(static_cast<size_t>(N) * OC), out2(out.size());
      k.matmul_forward(out.data(), x.data(), w.data(), b.data(), N, s.C, OC);
      k.matmul_forward(out2.data(), x.data(), w.data(), nullptr, N, s.C, OC);
      all.insert(all.end(), out.begin(), out.end());
      all.insert(all.end(), out2.begin(), out2.end());
    }
    return all;
  };
  cs["matmul_backward"] = [](const KernelTable& k) {
    Vec all;
    for (auto s : kShapes) {
      const int N = s.B * s.T, OC = 2 * s.C + 3;
      Vec x = Rand(static_cast<size_t>(N) * s.C, 19), w = Rand(static_cast<size_t>(OC) * s.C, 20);
      Vec dout = Rand(static_cast<size_t>(N) * OC, 21), dx = Rand(x.size(), 22), dw = Rand(w.size(), 23), db = Rand(OC, 24);
      k.matmul_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), N, s.C, OC);
      for (auto* v : {&dx, &dw, &db}) all.insert(all.end(), v->begin(), v->end());
    }
    return all;
  };
  cs["attention_forward"] = [](const KernelTable& k) {
    Vec all;
    for (auto s : kShapes) {
      const size_t n = static_cast<size_t>(s.B) * s.T * s.C;
      Vec q = Rand(n, 25), kk = Rand(n, 26), v = Rand(n, 27), out(n), lse(static_cast<size_t>(s.B) * s.H * s.T);
      k.attention_forward(out.data(), lse.data(), q.data(), kk.data(), v.data(), s.B, s.T, s.C, s.H);
      all.insert(all.end(), out.begin(), out.end());
      all.insert(all.end(), lse.begin(), lse.end());
    }
    return all;
  };
  cs["attention_backward"] = [](const KernelTable& k) {
    Vec all;
    for (auto s : kShapes) {
      const size_t n = static_cast<size_t>(s.B) * s.T * s.C;
      Vec q = Rand(n, 28), kk = Rand(n, 29), v = Rand(n, 30), out(n), lse(static_cast<size_t>(s.B) * s.H * s.T);
      RefKernels().attention_forward(out.data(), lse.data(), q.data(), kk.data(), v.data(), s.B, s.T, s.C, s.H);
      Vec dout = Rand(n, 31), dq(n), dk(n), dv(n);
      k.attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), kk.data(), v.data(), out.data(),
                           lse.data(), s.B, s.T, s.C, s.H);
      for (auto* x : {&dq, &dk, &dv}) all.insert(all.end(), x->begin(), x->end());
    }
    return all;
  };
  cs["gelu_forward"] = [](const KernelTable& k) {
    Vec x = Rand(1001, 32, 3.0f), out(x.size());
    k.gelu_forward(out.data(), x.data(), x.size());
    return out;
  };
  cs["gelu_backward"] = [](const KernelTable& k) {
    Vec x = Rand(1001, 33, 3.0f), d = Rand(1001, 34), out(x.size());
    k.gelu_backward(out.data(), x.data(), d.data(), x.size());
    return out;
  };
  cs["residual_forward"] = [](const KernelTable& k) {
    Vec a = Rand(777, 35), b = Rand(777, 36), out(777);
    k.residual_forward(out.data(), a.data(), b.data(), out.size());
    return out;
  };
  cs["crossentropy_forward_backward"] = [](const KernelTable& k) {
    Vec all;
    for (int N : {1, 5, 33}) {
      const int V = 300, Vp = 384;
      Vec logits = Rand(static_cast<size_t>(N) * Vp, 37, 2.0f), losses(N);
      std::vector<int32_t> tgt(N);
      for (int i = 0; i < N; ++i) tgt[i] = (i * 37) % V;
      Vec eval = logits;
      double total = k.crossentropy_forward_backward(eval.data(), losses.data(), tgt.data(), N, V, Vp, 0.0f);
      all.insert(all.end(), losses.begin(), losses.end());
      all.push_back(static_cast<float>(total));
      k.crossentropy_forward_backward(logits.data(), losses.data(), tgt.data(), N, V, Vp, 1.0f / N);
      all.insert(all.end(), logits.begin(), logits.end());  // the gradient, padding included (must be 0)
    }
    return all;
  };
  cs["sum_squares"] = [](const KernelTable& k) {
    Vec g = Rand(100003, 38);
    return Vec{static_cast<float>(k.sum_squares(g.data(), g.size()))};
  };
  cs["scale"] = [](const KernelTable& k) {
    Vec g = Rand(1003, 39);
    k.scale(g.data(), 0.37f, g.size());
    return g;
  };
  cs["adamw"] = [](const KernelTable& k) {
    Vec p = Rand(999, 40), g = Rand(999, 41), m = Rand(999, 42, 0.1f), v = Rand(999, 43, 0.1f);
    for (auto& x : v) x = x * x;
    for (int t = 1; t <= 3; ++t) k.adamw(p.data(), g.data(), m.data(), v.data(), p.size(), 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, t);
    Vec all = p;
    all.insert(all.end(), m.begin(), m.end());
    all.insert(all.end(), v.begin(), v.end());
    return all;
  };
  return cs;
}

TEST(ParityTest, EveryOpHasACase) {
  auto cases = Cases();
  for (const auto& [name, fn] : OpsOf(RefKernels())) EXPECT_TRUE(cases.count(name)) << "op without a parity case: " << name;
}

TEST(ParityTest, CpuMatchesReference) {
  auto cases = Cases();
  const KernelTable& cpu = CpuKernels();
  int skipped = 0;
  for (const auto& [name, fn] : OpsOf(cpu)) {
    if (fn == nullptr) {
      ++skipped;
      std::printf("  %-32s skipped (backend lacks it)\n", name.c_str());
      continue;
    }
    Vec ref = cases[name](RefKernels()), got = cases[name](cpu);
    ASSERT_EQ(ref.size(), got.size()) << name;
    double err = NormErr(got, ref);
    std::printf("  %-32s normalized error %.3g\n", name.c_str(), err);
    EXPECT_LE(err, kTol) << name;
  }
  EXPECT_EQ(skipped, 0);
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
      r.matmul_forward(out.data(), x.data(), w.data(), b.data(), N, C, OC);
      return Dot(out, R);
    };
    Vec dx(N * C, 0), dw(OC * C, 0), db(OC, 0);
    r.matmul_backward(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(), N, C, OC);
    CheckFd("matmul dinp", x, loss, dx);
    CheckFd("matmul dw", w, loss, dw);
    CheckFd("matmul dbias", b, loss, db);
  }
  {  // attention
    Vec q = Rand(N * C, 58), k = Rand(N * C, 59), v = Rand(N * C, 60), R = Rand(N * C, 61), out(N * C), lse(B * H * T);
    auto loss = [&] {
      r.attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), B, T, C, H);
      return Dot(out, R);
    };
    loss();
    Vec dq(N * C), dk(N * C), dv(N * C);
    r.attention_backward(dq.data(), dk.data(), dv.data(), R.data(), q.data(), k.data(), v.data(), out.data(), lse.data(),
                         B, T, C, H);
    CheckFd("attention dq", q, loss, dq);
    CheckFd("attention dk", k, loss, dk);
    CheckFd("attention dv", v, loss, dv);
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
      return r.crossentropy_forward_backward(l2.data(), losses.data(), tgt.data(), N, V, Vp, 0.0f);
    };
    r.crossentropy_forward_backward(g.data(), losses.data(), tgt.data(), N, V, Vp, 1.0f);
    CheckFd("cross-entropy", logits, loss, g);
  }
  {  // encoder
    const int V = 7;
    std::vector<int32_t> tok(N);
    for (int i = 0; i < N; ++i) tok[i] = (i * 3) % V;
    Vec wte = Rand(V * C, 65), wpe = Rand(T * C, 66), R = Rand(N * C, 67), out(N * C);
    auto loss = [&] {
      r.encoder_forward(out.data(), tok.data(), wte.data(), wpe.data(), B, T, C);
      return Dot(out, R);
    };
    Vec dwte(V * C, 0), dwpe(T * C, 0);
    r.encoder_backward(dwte.data(), dwpe.data(), R.data(), tok.data(), B, T, C);
    CheckFd("encoder dwte", wte, loss, dwte);
    CheckFd("encoder dwpe", wpe, loss, dwpe);
  }
}

}  // namespace
}  // namespace anneal
