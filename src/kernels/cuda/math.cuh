// The per-element and per-row math of the CUDA kernels, written once for both sides: nvcc compiles
// it into the kernels (__host__ __device__), the host compiler into CPU tests that hold it to
// kernels/ref (tests/kernels/cuda_math_test.cc). Everything is fp32 arithmetic with fp32
// accumulation, as the device does it; bf16 values are rounded to nearest even exactly as
// tensor/dtype.h's FloatToBf16 (the test compares them bit for bit).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define ANNEAL_HD __host__ __device__ __forceinline__
#else
#define ANNEAL_HD inline
#endif

namespace anneal::cudamath {

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kLnEps = 1e-5f;

// ---- bf16 ----
ANNEAL_HD uint32_t FloatBits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
#endif
}
ANNEAL_HD float BitsFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, 4);
  return x;
#endif
}
// Round to nearest even; a NaN stays a (quiet) NaN.
ANNEAL_HD uint16_t RoundBf16(float x) {
  const uint32_t u = FloatBits(x);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}
ANNEAL_HD float WidenBf16(uint16_t h) { return BitsFloat(static_cast<uint32_t>(h) << 16); }

// ---- GELU (tanh approximation) ----
ANNEAL_HD float Gelu(float x) {
  const float u = kGeluC * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanhf(u));
}
// d GELU(x) / dx.
ANNEAL_HD float GeluGrad(float x) {
  const float u = kGeluC * (x + 0.044715f * x * x * x);
  const float th = tanhf(u);
  const float sech2 = 1.0f - th * th;
  return 0.5f * (1.0f + th) + 0.5f * x * sech2 * kGeluC * (1.0f + 3.0f * 0.044715f * x * x);
}

// ---- online softmax / log-sum-exp ----
// A running (max, sum of exp(x - max)) over values pushed one at a time or merged from parts (the
// parts of a row held by the threads of a block, or the key blocks of flash attention): the same
// log-sum-exp whatever the order, up to rounding. An empty state has max = -inf and sum = 0.
struct OnlineLse {
  float max = -INFINITY;
  float sum = 0.0f;
  ANNEAL_HD void Push(float x) {
    if (x == -INFINITY) return;  // a masked score adds exp(-inf) = 0 (and -inf - -inf would be NaN)
    if (x > max) {
      sum = sum * expf(max - x) + 1.0f;  // expf(-inf) = 0 for the first value
      max = x;
    } else {
      sum += expf(x - max);
    }
  }
  ANNEAL_HD void Merge(const OnlineLse& o) {
    if (o.max == -INFINITY) return;
    if (max == -INFINITY) {
      *this = o;
      return;
    }
    const float m = fmaxf(max, o.max);
    sum = sum * expf(max - m) + o.sum * expf(o.max - m);
    max = m;
  }
  ANNEAL_HD float Lse() const { return max == -INFINITY ? -INFINITY : max + logf(sum); }
};

// ---- cross-entropy ----
// A logit's gradient once the row's log-sum-exp is known: dscale * (softmax - onehot).
ANNEAL_HD float CrossEntropyGrad(float logit, float lse, bool is_target, float dscale) {
  return dscale * (expf(logit - lse) - (is_target ? 1.0f : 0.0f));
}

// ---- LayerNorm ----
// A row's mean and reciprocal standard deviation from its sum and sum of squared deviations from
// the mean (the kernel's two passes), over C values.
ANNEAL_HD float LayerNormRstd(float sum_sq_dev, int C) { return 1.0f / sqrtf(sum_sq_dev / C + kLnEps); }
ANNEAL_HD float LayerNormOut(float x, float mean, float rstd, float w, float b) { return (x - mean) * rstd * w + b; }
// Backward of one element, given the row's two sums over c of g = dout * w:
// mean_g = mean(g), mean_gx = mean(g * xhat); dinp = rstd * (g - mean_g - xhat * mean_gx).
ANNEAL_HD float LayerNormInputGrad(float dout, float w, float xhat, float rstd, float mean_g, float mean_gx) {
  const float g = dout * w;
  return rstd * (g - mean_g - xhat * mean_gx);
}

// ---- RMSNorm (the Llama family) ----
// A row's reciprocal root mean square from its sum of squares over C values.
ANNEAL_HD float RmsNormRstd(float sum_sq, int C, float eps) { return 1.0f / sqrtf(sum_sq / C + eps); }
// Backward of one element, given the row's mean over c of (dout * w) * xhat (xhat = x * rstd):
// dinp = rstd * (dout * w - xhat * mean_gx).
ANNEAL_HD float RmsNormInputGrad(float dout, float w, float xhat, float rstd, float mean_gx) {
  return rstd * (dout * w - xhat * mean_gx);
}

// ---- SwiGLU ----
ANNEAL_HD float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
ANNEAL_HD float SwiGlu(float gate, float up) { return gate * Sigmoid(gate) * up; }
// d/dgate and d/dup of SwiGlu(gate, up) * dout.
ANNEAL_HD void SwiGluGrads(float gate, float up, float dout, float* dgate, float* dup) {
  const float sg = Sigmoid(gate);
  *dup = gate * sg * dout;
  *dgate = dout * up * sg * (1.0f + gate * (1.0f - sg));
}

// ---- rotary position embedding ----
// One pair (a, b) = (x_i, x_{i + hs/2}) of a head rotated by the angle with cos c and sin s (s
// negated: the inverse rotation, the backward).
ANNEAL_HD void Rotate(float a, float b, float c, float s, float* ra, float* rb) {
  *ra = a * c - b * s;
  *rb = b * c + a * s;
}

// ---- AdamW (torch.optim.AdamW semantics) ----
// One element: decoupled decay, then the moments, then the bias-corrected step. bc1 = 1 - beta1^t,
// bc2 = 1 - beta2^t, computed once per step on the host.
struct AdamWElement {
  float p, m, v;
};
ANNEAL_HD AdamWElement AdamWStep(float p, float g, float m, float v, float lr, float beta1, float beta2, float eps,
                                 float wd, float bc1, float bc2) {
  AdamWElement r;
  const float decayed = p * (1.0f - lr * wd);
  r.m = beta1 * m + (1.0f - beta1) * g;
  r.v = beta2 * v + (1.0f - beta2) * g * g;
  const float denom = sqrtf(r.v / bc2) + eps;
  r.p = decayed - lr * (r.m / bc1) / denom;
  return r;
}

}  // namespace anneal::cudamath
