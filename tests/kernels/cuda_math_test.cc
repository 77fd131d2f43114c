// The CUDA kernels' per-element and per-row math (kernels/cuda/math.cuh), compiled by the host
// compiler and held to the reference kernels (kernels/ref, double accumulation) and to the one bf16
// conversion (tensor/dtype.h), bit for bit where the operation is exact.
#include "kernels/cuda/math.cuh"

#include <gtest/gtest.h>

#include "testing/numeric.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/ops.h"
#include "kernels/registry.h"
#include "tensor/dtype.h"

namespace anneal {
namespace {

using testing::NormErr;
std::vector<float> Random(size_t n, uint64_t seed, float scale = 1.0f) { return testing::RandomNormal(n, seed, scale); }

using namespace cudamath;

TEST(CudaMathTest, Bf16RoundingIsTheDtypeConversionBitForBit) {
  std::vector<float> xs = Random(200000, 1, 3.0f);
  for (float x : {0.0f, -0.0f, 1.0f, 1.00390625f, 1.01171875f, 3.3895314e38f, std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::denorm_min(), 1e-40f, -1e-39f, std::nanf("")}) {
    xs.push_back(x);
  }
  std::mt19937 g(7);
  for (int i = 0; i < 100000; ++i) {  // every bit pattern class, including halfway cases and NaN payloads
    uint32_t u = g();
    float x;
    std::memcpy(&x, &u, 4);
    xs.push_back(x);
  }
  for (float x : xs) {
    ASSERT_EQ(RoundBf16(x), FloatToBf16(x)) << x;
    ASSERT_EQ(FloatBits(WidenBf16(RoundBf16(x))), FloatBits(Bf16ToFloat(FloatToBf16(x)))) << x;
  }
}

TEST(CudaMathTest, GeluAndItsGradientMatchTheReference) {
  const std::vector<float> x = Random(100003, 2, 3.0f), d = Random(100003, 3);
  std::vector<float> ref(x.size()), got(x.size()), gref(x.size()), ggot(x.size());
  RefKernels().gelu_forward(ref.data(), x.data(), x.size());
  RefKernels().gelu_backward(gref.data(), x.data(), d.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    got[i] = Gelu(x[i]);
    ggot[i] = GeluGrad(x[i]) * d[i];
  }
  EXPECT_LT(NormErr(got, ref), 1e-6);
  EXPECT_LT(NormErr(ggot, gref), 1e-6);
}

double LseDouble(const std::vector<float>& v) {
  double m = -INFINITY;
  for (float x : v) m = std::max(m, static_cast<double>(x));
  double s = 0;
  for (float x : v) s += std::exp(x - m);
  return m + std::log(s);
}

TEST(CudaMathTest, OnlineLogSumExpIsOrderIndependentUpToRounding) {
  for (size_t n : {1u, 2u, 31u, 1000u, 50257u}) {
    const std::vector<float> v = Random(n, 10 + n, 4.0f);
    const double want = LseDouble(v);
    OnlineLse fwd, rev, parts[7];
    for (float x : v) fwd.Push(x);
    for (size_t i = v.size(); i-- > 0;) rev.Push(v[i]);
    for (size_t i = 0; i < v.size(); ++i) parts[i % 7].Push(v[i]);  // as 7 threads would hold them
    OnlineLse merged;
    for (auto& p : parts) merged.Merge(p);  // some parts are empty when n < 7
    for (const OnlineLse* s : {&fwd, &rev, &merged}) {
      // fp32 accumulation of up to 50257 terms in one sum: a few 1e-6 relative
      EXPECT_NEAR(s->Lse(), want, 1e-5 * std::max(1.0, std::fabs(want))) << n;
    }
  }
  OnlineLse empty;
  EXPECT_EQ(empty.Lse(), -INFINITY);
  OnlineLse masked;  // a causal row's masked scores are -inf, the first one included
  masked.Push(-INFINITY);
  masked.Push(2.0f);
  masked.Push(-INFINITY);
  EXPECT_FLOAT_EQ(masked.Lse(), 2.0f);
}

TEST(CudaMathTest, CrossEntropyRowsMatchTheReference) {
  const int N = 5, V = 1000, Vp = 1024;
  std::vector<float> logits = Random(static_cast<size_t>(N) * Vp, 20, 2.0f);
  std::vector<int32_t> targets = {0, 999, 17, 500, 3};
  std::vector<float> ref = logits, losses_ref(N), got(logits.size()), losses(N);
  const float dscale = 1.0f / 7;
  RefKernels().crossentropy(ref.data(), losses_ref.data(), targets.data(), N, V, Vp, dscale);
  for (int i = 0; i < N; ++i) {
    const float* row = logits.data() + static_cast<size_t>(i) * Vp;
    OnlineLse s;
    for (int j = 0; j < V; ++j) s.Push(row[j]);
    const float lse = s.Lse();
    losses[i] = lse - row[targets[i]];
    for (int j = 0; j < Vp; ++j) {
      got[static_cast<size_t>(i) * Vp + j] = j < V ? CrossEntropyGrad(row[j], lse, j == targets[i], dscale) : 0.0f;
    }
  }
  EXPECT_LT(NormErr(losses, losses_ref), 1e-6);
  EXPECT_LT(NormErr(got, ref), 1e-5);
  for (int i = 0; i < N; ++i) {  // the padding columns are written as zeros
    for (int j = V; j < Vp; ++j) EXPECT_EQ(got[static_cast<size_t>(i) * Vp + j], 0.0f);
  }
}

TEST(CudaMathTest, LayerNormRowsMatchTheReference) {
  const int N = 7, C = 768;
  const std::vector<float> x = Random(static_cast<size_t>(N) * C, 30, 2.0f), w = Random(C, 31), b = Random(C, 32),
                           dout = Random(static_cast<size_t>(N) * C, 33);
  std::vector<float> out_ref(x.size()), mean_ref(N), rstd_ref(N);
  RefKernels().layernorm_forward(out_ref.data(), mean_ref.data(), rstd_ref.data(), x.data(), w.data(), b.data(), N, C);
  std::vector<float> dinp_ref(x.size(), 0.0f), dw_ref(C, 0.0f), db_ref(C, 0.0f);
  RefKernels().layernorm_backward(dinp_ref.data(), dw_ref.data(), db_ref.data(), dout.data(), x.data(), w.data(),
                                  mean_ref.data(), rstd_ref.data(), N, C);
  std::vector<float> out(x.size()), mean(N), rstd(N), dinp(x.size());
  for (int i = 0; i < N; ++i) {
    const float* r = x.data() + static_cast<size_t>(i) * C;
    float sum = 0;
    for (int c = 0; c < C; ++c) sum += r[c];
    mean[i] = sum / C;
    float ssd = 0;
    for (int c = 0; c < C; ++c) ssd += (r[c] - mean[i]) * (r[c] - mean[i]);
    rstd[i] = LayerNormRstd(ssd, C);
    float sg = 0, sgx = 0;
    for (int c = 0; c < C; ++c) {
      out[static_cast<size_t>(i) * C + c] = LayerNormOut(r[c], mean[i], rstd[i], w[c], b[c]);
      const float xhat = (r[c] - mean[i]) * rstd[i], g = dout[static_cast<size_t>(i) * C + c] * w[c];
      sg += g;
      sgx += g * xhat;
    }
    for (int c = 0; c < C; ++c) {
      const float xhat = (r[c] - mean[i]) * rstd[i];
      dinp[static_cast<size_t>(i) * C + c] =
          LayerNormInputGrad(dout[static_cast<size_t>(i) * C + c], w[c], xhat, rstd[i], sg / C, sgx / C);
    }
  }
  EXPECT_LT(NormErr(out, out_ref), 1e-6);
  EXPECT_LT(NormErr(mean, mean_ref), 1e-5);
  EXPECT_LT(NormErr(rstd, rstd_ref), 1e-6);
  EXPECT_LT(NormErr(dinp, dinp_ref), 1e-5);
}

TEST(CudaMathTest, RmsNormRowsMatchTheReference) {
  const int N = 7, C = 2048;
  const float eps = 1e-5f;
  const std::vector<float> x = Random(static_cast<size_t>(N) * C, 40, 2.0f), w = Random(C, 41),
                           dout = Random(static_cast<size_t>(N) * C, 42);
  std::vector<float> out_ref(x.size()), rstd_ref(N), dinp_ref(x.size(), 0.0f), dw_ref(C, 0.0f);
  RefKernels().rmsnorm_forward(out_ref.data(), rstd_ref.data(), x.data(), w.data(), N, C, eps);
  RefKernels().rmsnorm_backward(dinp_ref.data(), dw_ref.data(), dout.data(), x.data(), w.data(), rstd_ref.data(), N, C);
  std::vector<float> out(x.size()), rstd(N), dinp(x.size());
  for (int i = 0; i < N; ++i) {  // the kernel's two sums of a row, then each element
    const float* r = x.data() + static_cast<size_t>(i) * C;
    float ss = 0;
    for (int c = 0; c < C; ++c) ss += r[c] * r[c];
    rstd[i] = RmsNormRstd(ss, C, eps);
    float sgx = 0;
    for (int c = 0; c < C; ++c) {
      out[static_cast<size_t>(i) * C + c] = r[c] * rstd[i] * w[c];
      sgx += dout[static_cast<size_t>(i) * C + c] * w[c] * r[c] * rstd[i];
    }
    for (int c = 0; c < C; ++c) {
      dinp[static_cast<size_t>(i) * C + c] =
          RmsNormInputGrad(dout[static_cast<size_t>(i) * C + c], w[c], r[c] * rstd[i], rstd[i], sgx / C);
    }
  }
  EXPECT_LT(NormErr(out, out_ref), 1e-6);
  EXPECT_LT(NormErr(rstd, rstd_ref), 1e-6);
  EXPECT_LT(NormErr(dinp, dinp_ref), 1e-5);
}

TEST(CudaMathTest, SwiGluAndRotaryMatchTheHostBackend) {
  Backend& ref = *BackendByName("ref");
  const Stream st = ref.DefaultStream();
  auto V = [](std::vector<float>& v, std::initializer_list<int64_t> shape) {
    return TensorView(v.data(), DType::kF32, shape, Device::Cpu());
  };
  const size_t n = 4001;
  std::vector<float> g = Random(n, 43, 4.0f), u = Random(n, 44), d = Random(n, 45);
  std::vector<float> out_ref(n), dg_ref(n), du_ref(n), out(n), dg(n), du(n);
  ref.SwiGluForward(st, V(out_ref, {4001}), V(g, {4001}), V(u, {4001}));
  ref.SwiGluBackward(st, V(dg_ref, {4001}), V(du_ref, {4001}), V(g, {4001}), V(u, {4001}), V(d, {4001}));
  for (size_t i = 0; i < n; ++i) {
    out[i] = SwiGlu(g[i], u[i]);
    SwiGluGrads(g[i], u[i], d[i], &dg[i], &du[i]);
  }
  EXPECT_LT(NormErr(out, out_ref), 1e-6);
  EXPECT_LT(NormErr(dg, dg_ref), 1e-6);
  EXPECT_LT(NormErr(du, du_ref), 1e-6);
  // Rotary: B=2, T=5, 3 heads of 8; forward then inverse, against the host backend's op.
  const int B = 2, T = 5, H = 3, hs = 8, half = hs / 2, C = H * hs;
  std::vector<float> cs(T * half), sn(T * half);
  for (int i = 0; i < T * half; ++i) {
    cs[i] = std::cos(0.37f * i);
    sn[i] = std::sin(0.37f * i);
  }
  for (bool inverse : {false, true}) {
    std::vector<float> x = Random(static_cast<size_t>(B) * T * C, inverse ? 47 : 46), y = x;
    ref.Rotary(st, V(x, {B, T, C}), V(cs, {T, half}), V(sn, {T, half}), H, inverse);
    for (int bt = 0; bt < B * T; ++bt) {
      for (int h = 0; h < H; ++h) {
        float* v = y.data() + static_cast<size_t>(bt) * C + h * hs;
        for (int i = 0; i < half; ++i) {
          const float c = cs[(bt % T) * half + i], s = sn[(bt % T) * half + i];
          Rotate(v[i], v[i + half], c, inverse ? -s : s, &v[i], &v[i + half]);
        }
      }
    }
    EXPECT_LT(NormErr(y, x), 1e-6) << (inverse ? "inverse" : "forward");
  }
}

TEST(CudaMathTest, AdamWMatchesTheReferenceOverSteps) {
  const size_t n = 10007;
  std::vector<float> p = Random(n, 40), m(n, 0.0f), v(n, 0.0f);
  std::vector<float> pr = p, mr = m, vr = v;
  const float lr = 6e-4f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
  for (int t = 1; t <= 3; ++t) {
    const std::vector<float> g = Random(n, 41 + t, 0.01f);
    RefKernels().adamw(pr.data(), g.data(), mr.data(), vr.data(), n, lr, b1, b2, eps, wd, t);
    const float bc1 = 1.0f - std::pow(b1, static_cast<float>(t)), bc2 = 1.0f - std::pow(b2, static_cast<float>(t));
    for (size_t i = 0; i < n; ++i) {
      const AdamWElement e = AdamWStep(p[i], g[i], m[i], v[i], lr, b1, b2, eps, wd, bc1, bc2);
      p[i] = e.p;
      m[i] = e.m;
      v[i] = e.v;
    }
    EXPECT_LT(NormErr(p, pr), 1e-6) << t;
    EXPECT_LT(NormErr(m, mr), 1e-6) << t;
    EXPECT_LT(NormErr(v, vr), 1e-6) << t;
  }
}

}  // namespace
}  // namespace anneal
