// Optimized CPU operators of the model families: OpenBLAS sgemm (the OpenMP build, so BLAS and these loops share one
// thread pool), OpenMP over rows, loops the compiler vectorizes for AVX2. Deterministic for a given
// thread count: every reduction either belongs to one thread (rows, or columns looped over rows in
// order) or adds fixed-size chunk partials in a fixed order. Shapes as in kernels/ops.h.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/ops.h"

namespace anneal {
namespace {

constexpr float kLnEps = 1e-5f;
constexpr float kGeluC = 0.7978845608028654f;

void EmbeddingForward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int B, int T, int C) {
#pragma omp parallel for schedule(static)
  for (int bt = 0; bt < B * T; ++bt) {
    const float* e = wte + static_cast<size_t>(tokens[bt]) * C;
    const float* p = wpe + static_cast<size_t>(bt % T) * C;
    float* o = out + static_cast<size_t>(bt) * C;
    for (int c = 0; c < C; ++c) o[c] = e[c] + p[c];
  }
}

void EmbeddingBackward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B, int T, int C) {
  // Rows of dwte repeat (a token seen twice), so threads split the channels, not the rows.
#pragma omp parallel
  {
    const int nt = omp_get_num_threads(), id = omp_get_thread_num();
    const int c0 = C * id / nt, c1 = C * (id + 1) / nt;
    for (int bt = 0; bt < B * T; ++bt) {
      const float* d = dout + static_cast<size_t>(bt) * C;
      float* de = dwte + static_cast<size_t>(tokens[bt]) * C;
      float* dp = dwpe + static_cast<size_t>(bt % T) * C;
      for (int c = c0; c < c1; ++c) {
        de[c] += d[c];
        dp[c] += d[c];
      }
    }
  }
}

// A norm's weight gradients: dw += xhat * dout with xhat = (x - mean) * rstd (RMSNorm: no mean), db +=
// dout (LayerNorm; null for none). Each thread owns a range of channels and sums the rows in order.
void NormWeightGrads(float* dw, float* db, const float* dout, const float* inp, const float* mean, const float* rstd,
                     int N, int C) {
#pragma omp parallel
  {
    const int nt = omp_get_num_threads(), id = omp_get_thread_num();
    const int c0 = C * id / nt, c1 = C * (id + 1) / nt;
    for (int i = 0; i < N; ++i) {
      const float* x = inp + static_cast<size_t>(i) * C;
      const float* d = dout + static_cast<size_t>(i) * C;
      const float m = mean ? mean[i] : 0.0f;
      if (db) {
        for (int c = c0; c < c1; ++c) db[c] += d[c];
      }
      for (int c = c0; c < c1; ++c) dw[c] += (x[c] - m) * rstd[i] * d[c];
    }
  }
}

void LayerNormForward(float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b, int N,
                      int C) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const float* x = inp + static_cast<size_t>(i) * C;
    float m = 0;
    for (int c = 0; c < C; ++c) m += x[c];
    m /= static_cast<float>(C);
    float var = 0;
    for (int c = 0; c < C; ++c) var += (x[c] - m) * (x[c] - m);
    var /= static_cast<float>(C);
    const float r = 1.0f / std::sqrt(var + kLnEps);
    float* o = out + static_cast<size_t>(i) * C;
    for (int c = 0; c < C; ++c) o[c] = (x[c] - m) * r * w[c] + b[c];
    mean[i] = m;
    rstd[i] = r;
  }
}

void LayerNormBackward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                       const float* mean, const float* rstd, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const float* x = inp + static_cast<size_t>(i) * C;
    const float* d = dout + static_cast<size_t>(i) * C;
    float* dx = dinp + static_cast<size_t>(i) * C;
    float mean_dnorm = 0, mean_dnorm_xhat = 0;
    for (int c = 0; c < C; ++c) {
      const float xhat = (x[c] - mean[i]) * rstd[i];
      const float dnorm = d[c] * w[c];
      mean_dnorm += dnorm;
      mean_dnorm_xhat += dnorm * xhat;
    }
    mean_dnorm /= static_cast<float>(C);
    mean_dnorm_xhat /= static_cast<float>(C);
    for (int c = 0; c < C; ++c) {
      const float xhat = (x[c] - mean[i]) * rstd[i];
      dx[c] += rstd[i] * (d[c] * w[c] - mean_dnorm - xhat * mean_dnorm_xhat);
    }
  }
  NormWeightGrads(dw, db, dout, inp, mean, rstd, N, C);
}

// Column sums of a (N, OC) matrix added into out (OC): threads own column ranges, rows in order,
// accumulated in double (a bias gradient can be a sum of many cancelling terms, e.g. the key bias,
// whose true gradient is zero).
void AddColumnSums(float* out, const float* a, int N, int OC) {
#pragma omp parallel
  {
    const int nt = omp_get_num_threads(), id = omp_get_thread_num();
    const int o0 = OC * id / nt, o1 = OC * (id + 1) / nt;
    std::vector<double> acc(static_cast<size_t>(std::max(0, o1 - o0)), 0.0);
    for (int i = 0; i < N; ++i) {
      const float* row = a + static_cast<size_t>(i) * OC;
      for (int o = o0; o < o1; ++o) acc[o - o0] += row[o];
    }
    for (int o = o0; o < o1; ++o) out[o] += static_cast<float>(acc[o - o0]);
  }
}

void LinearForward(float* out, const float* inp, const float* w, const float* bias, int N, int C, int OC) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, w, C, 0.0f, out, OC);
  if (bias) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; ++i) {
      float* o = out + static_cast<size_t>(i) * OC;
      for (int j = 0; j < OC; ++j) o[j] += bias[j];
    }
  }
}

void LinearBackward(float* dinp, float* dw, float* dbias, const float* dout, const float* inp, const float* w, int N,
                    int C, int OC) {
  // dinp (N,C) += dout (N,OC) @ w (OC,C)
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, w, C, 1.0f, dinp, C);
  // dw (OC,C) += dout^T @ inp
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dw, C);
  if (dbias) AddColumnSums(dbias, dout, N, OC);
}

// One (T, T) score block per thread: S = Q K^T * scale for head h of batch b, causal.
// Query head h reads key/value head h / (H/Hkv): q rows are C = H*hs wide, k and v rows Ckv = Hkv*hs.
void AttentionForward(float* out, float* lse, const float* q, const float* k, const float* v, int B, int T, int C,
                      int H, int Hkv) {
  const int hs = C / H, Ckv = Hkv * hs, group = H / Hkv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel
  {
    std::vector<float> S(static_cast<size_t>(T) * T);
#pragma omp for schedule(static)
    for (int bh = 0; bh < B * H; ++bh) {
      const int b = bh / H, h = bh % H;
      const size_t base = static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * hs;
      const size_t kbase = static_cast<size_t>(b) * T * Ckv + static_cast<size_t>(h / group) * hs;
      // S (T,T) = Q (T,hs) @ K^T (hs,T), rows strided by C (Ckv) in the (B,T,C) layout.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q + base, C, k + kbase, Ckv, 0.0f, S.data(),
                  T);
      for (int t = 0; t < T; ++t) {
        float* s = S.data() + static_cast<size_t>(t) * T;
        float mx = s[0];
        for (int u = 1; u <= t; ++u) mx = std::max(mx, s[u]);
        float sum = 0;
        for (int u = 0; u <= t; ++u) {
          s[u] = std::exp(s[u] - mx);
          sum += s[u];
        }
        const float inv = 1.0f / sum;
        for (int u = 0; u <= t; ++u) s[u] *= inv;
        for (int u = t + 1; u < T; ++u) s[u] = 0.0f;
        lse[static_cast<size_t>(bh) * T + t] = mx + std::log(sum);
      }
      // out (T,hs) = P (T,T) @ V (T,hs)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, S.data(), T, v + kbase, Ckv, 0.0f,
                  out + base, C);
    }
  }
}
// Parallel over (batch, key/value head): the query heads sharing one key/value head add their dK and
// dV into it one after another, in head order, on one thread.
void AttentionBackward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                       const float* v, const float* /*out: D comes from P and dP*/, const float* lse, int B, int T, int C,
                       int H, int Hkv) {
  const int hs = C / H, Ckv = Hkv * hs, group = H / Hkv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel
  {
    std::vector<float> P(static_cast<size_t>(T) * T), dP(static_cast<size_t>(T) * T);
#pragma omp for schedule(static)
    for (int bg = 0; bg < B * Hkv; ++bg) {
      const int b = bg / Hkv, g = bg % Hkv;
      const size_t kbase = static_cast<size_t>(b) * T * Ckv + static_cast<size_t>(g) * hs;
      for (int j = 0; j < group; ++j) {
        const int h = g * group + j, bh = b * H + h;
        const size_t base = static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * hs;
        const float beta = j == 0 ? 0.0f : 1.0f;  // the first head writes dK, dV; the others add
        // Recompute P = exp(S - lse) from Q, K.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q + base, C, k + kbase, Ckv, 0.0f,
                    P.data(), T);
        // dP (T,T) = dOut (T,hs) @ V^T (hs,T)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dout + base, C, v + kbase, Ckv, 0.0f,
                    dP.data(), T);
        for (int t = 0; t < T; ++t) {
          float* p = P.data() + static_cast<size_t>(t) * T;
          float* dp = dP.data() + static_cast<size_t>(t) * T;
          const float l = lse[static_cast<size_t>(bh) * T + t];
          // D_t = sum_u P_tu dP_tu (equal to dOut_t . Out_t, but taken from the same P and dP values, so
          // each row of dS sums to ~0 in float as it does exactly in math: the key bias's gradient)
          float D = 0;
          for (int u = 0; u <= t; ++u) {
            p[u] = std::exp(p[u] - l);
            D += p[u] * dp[u];
          }
          for (int u = 0; u <= t; ++u) dp[u] = p[u] * (dp[u] - D) * scale;  // dS, times the score scale
          for (int u = t + 1; u < T; ++u) p[u] = dp[u] = 0.0f;
        }
        // dQ = dS @ K; dK (+)= dS^T @ Q; dV (+)= P^T @ dOut
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, dP.data(), T, k + kbase, Ckv, 0.0f,
                    dq + base, C);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, dP.data(), T, q + base, C, beta,
                    dk + kbase, Ckv);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, P.data(), T, dout + base, C, beta,
                    dv + kbase, Ckv);
      }
    }
  }
}

void RmsNormForward(float* out, float* rstd, const float* inp, const float* w, int N, int C, float eps) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const float* x = inp + static_cast<size_t>(i) * C;
    float ms = 0;
    for (int c = 0; c < C; ++c) ms += x[c] * x[c];
    const float r = 1.0f / std::sqrt(ms / static_cast<float>(C) + eps);
    float* o = out + static_cast<size_t>(i) * C;
    for (int c = 0; c < C; ++c) o[c] = x[c] * r * w[c];
    rstd[i] = r;
  }
}

void RmsNormBackward(float* dinp, float* dw, const float* dout, const float* inp, const float* w, const float* rstd,
                     int N, int C) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const float* x = inp + static_cast<size_t>(i) * C;
    const float* d = dout + static_cast<size_t>(i) * C;
    float* dx = dinp + static_cast<size_t>(i) * C;
    float m = 0;
    for (int c = 0; c < C; ++c) m += d[c] * w[c] * x[c] * rstd[i];
    m /= static_cast<float>(C);
    for (int c = 0; c < C; ++c) dx[c] += rstd[i] * (d[c] * w[c] - x[c] * rstd[i] * m);
  }
  NormWeightGrads(dw, nullptr, dout, inp, nullptr, rstd, N, C);
}

void GeluForward(float* out, const float* inp, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const float x = inp[i];
    out[i] = 0.5f * x * (1.0f + std::tanh(kGeluC * (x + 0.044715f * x * x * x)));
  }
}

void GeluBackward(float* dinp, const float* inp, const float* dout, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const float x = inp[i];
    const float th = std::tanh(kGeluC * (x + 0.044715f * x * x * x));
    const float grad = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * kGeluC * (1.0f + 3.0f * 0.044715f * x * x);
    dinp[i] = grad * dout[i];
  }
}

void ResidualForward(float* out, const float* a, const float* b, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

double CrossEntropy(float* logits, float* losses, const int32_t* targets, int N, int V, int Vp, float dscale) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    float* row = logits + static_cast<size_t>(i) * Vp;
    float mx = row[0];
    for (int j = 1; j < V; ++j) mx = std::max(mx, row[j]);
    const float target_logit = row[targets[i]];
    if (dscale == 0.0f) {
      float sum = 0;
      for (int j = 0; j < V; ++j) sum += std::exp(row[j] - mx);
      losses[i] = mx + std::log(sum) - target_logit;
      continue;
    }
    // One exp per logit: the row holds exp(x - max) until it is scaled into the gradient in place.
    float sum = 0;
    for (int j = 0; j < V; ++j) {
      row[j] = std::exp(row[j] - mx);
      sum += row[j];
    }
    losses[i] = mx + std::log(sum) - target_logit;
    const float k = dscale / sum;
    for (int j = 0; j < V; ++j) row[j] *= k;
    row[targets[i]] -= dscale;
    for (int j = V; j < Vp; ++j) row[j] = 0.0f;
  }
  double total = 0;
  for (int i = 0; i < N; ++i) total += losses[i];
  return total;
}

// Fixed-size chunks, so the sum does not depend on the thread count.
constexpr size_t kChunk = 1 << 14;

double SumSquares(const float* g, size_t n) {
  const size_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> part(chunks, 0.0);
#pragma omp parallel for schedule(static)
  for (size_t c = 0; c < chunks; ++c) {
    const size_t e = std::min(n, (c + 1) * kChunk);
    double s = 0;
    for (size_t i = c * kChunk; i < e; ++i) s += static_cast<double>(g[i]) * g[i];
    part[c] = s;
  }
  double total = 0;
  for (double p : part) total += p;
  return total;
}

void Scale(float* g, float s, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) g[i] *= s;
}

void AdamW(float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1, float beta2, float eps,
           float wd, int t) {
  const float bc1 = 1.0f - std::pow(beta1, static_cast<float>(t));
  const float bc2 = 1.0f - std::pow(beta2, static_cast<float>(t));
  const float decay = 1.0f - lr * wd;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const float mi = beta1 * m[i] + (1.0f - beta1) * g[i];
    const float vi = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - lr * (mi / bc1) / (std::sqrt(vi / bc2) + eps);
  }
}

}  // namespace

const KernelTable& CpuKernels() {
  static const KernelTable t{"cpu",           EmbeddingForward, EmbeddingBackward, LayerNormForward,
                             LayerNormBackward, LinearForward,    LinearBackward,    AttentionForward,
                             AttentionBackward, GeluForward,      GeluBackward,      ResidualForward,
                             CrossEntropy,      SumSquares,       Scale,             AdamW,
                             RmsNormForward,    RmsNormBackward};
  return t;
}

}  // namespace anneal
