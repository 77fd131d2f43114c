// Reference operators of the model families: the readable truth every optimized backend is checked against
// (tests/kernels/parity_test.cc). Plain loops, double accumulators, one thread. Shapes as in
// kernels/ops.h.
#include <cmath>
#include <vector>

#include "kernels/ops.h"

namespace anneal {
namespace {

constexpr double kLnEps = 1e-5;
constexpr double kGeluC = 0.7978845608028654;  // sqrt(2 / pi)

void EmbeddingForward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int B, int T, int C) {
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      // out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]
      const float* e = wte + static_cast<size_t>(tokens[b * T + t]) * C;
      const float* p = wpe + static_cast<size_t>(t) * C;
      float* o = out + (static_cast<size_t>(b) * T + t) * C;
      for (int c = 0; c < C; ++c) o[c] = e[c] + p[c];
    }
  }
}

void EmbeddingBackward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B, int T, int C) {
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const float* d = dout + (static_cast<size_t>(b) * T + t) * C;
      float* de = dwte + static_cast<size_t>(tokens[b * T + t]) * C;
      float* dp = dwpe + static_cast<size_t>(t) * C;
      for (int c = 0; c < C; ++c) {
        de[c] += d[c];
        dp[c] += d[c];
      }
    }
  }
}

void LayerNormForward(float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b, int N,
                      int C) {
  for (int i = 0; i < N; ++i) {
    const float* x = inp + static_cast<size_t>(i) * C;
    double m = 0;
    for (int c = 0; c < C; ++c) m += x[c];
    m /= C;
    double var = 0;
    for (int c = 0; c < C; ++c) var += (x[c] - m) * (x[c] - m);
    var /= C;
    double r = 1.0 / std::sqrt(var + kLnEps);
    float* o = out + static_cast<size_t>(i) * C;
    for (int c = 0; c < C; ++c) o[c] = static_cast<float>((x[c] - m) * r * w[c] + b[c]);
    mean[i] = static_cast<float>(m);
    rstd[i] = static_cast<float>(r);
  }
}

void LayerNormBackward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                       const float* mean, const float* rstd, int N, int C) {
  for (int i = 0; i < N; ++i) {
    const float* x = inp + static_cast<size_t>(i) * C;
    const float* d = dout + static_cast<size_t>(i) * C;
    float* dx = dinp + static_cast<size_t>(i) * C;
    // xhat = (x - mean) * rstd; dnorm = d * w
    // dx += rstd * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat))
    double mean_dnorm = 0, mean_dnorm_xhat = 0;
    for (int c = 0; c < C; ++c) {
      double xhat = (x[c] - mean[i]) * static_cast<double>(rstd[i]);
      double dnorm = static_cast<double>(d[c]) * w[c];
      mean_dnorm += dnorm;
      mean_dnorm_xhat += dnorm * xhat;
    }
    mean_dnorm /= C;
    mean_dnorm_xhat /= C;
    for (int c = 0; c < C; ++c) {
      double xhat = (x[c] - mean[i]) * static_cast<double>(rstd[i]);
      double dnorm = static_cast<double>(d[c]) * w[c];
      db[c] += d[c];
      dw[c] += static_cast<float>(xhat * d[c]);
      dx[c] += static_cast<float>(rstd[i] * (dnorm - mean_dnorm - xhat * mean_dnorm_xhat));
    }
  }
}

void LinearForward(float* out, const float* inp, const float* w, const float* bias, int N, int C, int OC) {
  for (int i = 0; i < N; ++i) {
    for (int o = 0; o < OC; ++o) {
      double acc = bias ? bias[o] : 0.0;
      for (int c = 0; c < C; ++c) acc += static_cast<double>(inp[static_cast<size_t>(i) * C + c]) * w[static_cast<size_t>(o) * C + c];
      out[static_cast<size_t>(i) * OC + o] = static_cast<float>(acc);
    }
  }
}

void LinearBackward(float* dinp, float* dw, float* dbias, const float* dout, const float* inp, const float* w, int N,
                    int C, int OC) {
  // dinp (N,C) += dout (N,OC) @ w (OC,C)
  for (int i = 0; i < N; ++i) {
    for (int c = 0; c < C; ++c) {
      double acc = 0;
      for (int o = 0; o < OC; ++o) acc += static_cast<double>(dout[static_cast<size_t>(i) * OC + o]) * w[static_cast<size_t>(o) * C + c];
      dinp[static_cast<size_t>(i) * C + c] += static_cast<float>(acc);
    }
  }
  // dw (OC,C) += dout^T (OC,N) @ inp (N,C); dbias += sum_i dout
  for (int o = 0; o < OC; ++o) {
    for (int c = 0; c < C; ++c) {
      double acc = 0;
      for (int i = 0; i < N; ++i) acc += static_cast<double>(dout[static_cast<size_t>(i) * OC + o]) * inp[static_cast<size_t>(i) * C + c];
      dw[static_cast<size_t>(o) * C + c] += static_cast<float>(acc);
    }
    if (dbias) {
      double acc = 0;
      for (int i = 0; i < N; ++i) acc += dout[static_cast<size_t>(i) * OC + o];
      dbias[o] += static_cast<float>(acc);
    }
  }
}

// Scaled, causal scores of query row t of head h against keys 0..t of its key/value head h / (H/Hkv):
// s[u] = q_t . k_u / sqrt(hs). q rows are C = H*hs wide, k rows Ckv = Hkv*hs.
void Scores(std::vector<double>& s, const float* q, const float* k, int b, int t, int h, int T, int C, int Ckv,
            int hs, int group) {
  const float* qt = q + (static_cast<size_t>(b) * T + t) * C + static_cast<size_t>(h) * hs;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  for (int u = 0; u <= t; ++u) {
    const float* ku = k + (static_cast<size_t>(b) * T + u) * Ckv + static_cast<size_t>(h / group) * hs;
    double acc = 0;
    for (int i = 0; i < hs; ++i) acc += static_cast<double>(qt[i]) * ku[i];
    s[u] = acc * scale;
  }
}

void AttentionForward(float* out, float* lse, const float* q, const float* k, const float* v, int B, int T, int C,
                      int H, int Hkv) {
  const int hs = C / H, Ckv = Hkv * hs, group = H / Hkv;
  std::vector<double> s(T);
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < H; ++h) {
      const size_t kvh = static_cast<size_t>(h / group) * hs;
      for (int t = 0; t < T; ++t) {
        Scores(s, q, k, b, t, h, T, C, Ckv, hs, group);
        double mx = s[0];
        for (int u = 1; u <= t; ++u) mx = std::max(mx, s[u]);
        double sum = 0;
        for (int u = 0; u <= t; ++u) sum += std::exp(s[u] - mx);
        double l = mx + std::log(sum);
        lse[(static_cast<size_t>(b) * H + h) * T + t] = static_cast<float>(l);
        float* o = out + (static_cast<size_t>(b) * T + t) * C + static_cast<size_t>(h) * hs;
        for (int i = 0; i < hs; ++i) {
          double acc = 0;
          for (int u = 0; u <= t; ++u) {
            acc += std::exp(s[u] - l) * v[(static_cast<size_t>(b) * T + u) * Ckv + kvh + i];
          }
          o[i] = static_cast<float>(acc);
        }
      }
    }
  }
}
void AttentionBackward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                       const float* v, const float* out, const float* lse, int B, int T, int C, int H, int Hkv) {
  const int hs = C / H, Ckv = Hkv * hs, group = H / Hkv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  const size_t n = static_cast<size_t>(B) * T * C, nkv = static_cast<size_t>(B) * T * Ckv;
  std::vector<double> gq(n, 0.0), gk(nkv, 0.0), gv(nkv, 0.0), s(T);
  auto at = [&](int b, int t, int h) { return (static_cast<size_t>(b) * T + t) * C + static_cast<size_t>(h) * hs; };
  auto kv = [&](int b, int t, int h) {
    return (static_cast<size_t>(b) * T + t) * Ckv + static_cast<size_t>(h / group) * hs;
  };
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < H; ++h) {
      for (int t = 0; t < T; ++t) {
        Scores(s, q, k, b, t, h, T, C, Ckv, hs, group);
        const double l = lse[(static_cast<size_t>(b) * H + h) * T + t];
        // D = sum_i dout_i * out_i = sum_u P_u * dP_u (the softmax backward's row term)
        double D = 0;
        for (int i = 0; i < hs; ++i) D += static_cast<double>(dout[at(b, t, h) + i]) * out[at(b, t, h) + i];
        for (int u = 0; u <= t; ++u) {
          const double p = std::exp(s[u] - l);
          double dp = 0;  // dP_u = dout_t . v_u
          for (int i = 0; i < hs; ++i) dp += static_cast<double>(dout[at(b, t, h) + i]) * v[kv(b, u, h) + i];
          const double ds = p * (dp - D) * scale;  // d(score before scaling)
          for (int i = 0; i < hs; ++i) {
            gv[kv(b, u, h) + i] += p * dout[at(b, t, h) + i];
            gq[at(b, t, h) + i] += ds * k[kv(b, u, h) + i];
            gk[kv(b, u, h) + i] += ds * q[at(b, t, h) + i];
          }
        }
      }
    }
  }
  for (size_t i = 0; i < n; ++i) dq[i] = static_cast<float>(gq[i]);
  for (size_t i = 0; i < nkv; ++i) {
    dk[i] = static_cast<float>(gk[i]);
    dv[i] = static_cast<float>(gv[i]);
  }
}

// RMSNorm: out = x / sqrt(mean(x^2) + eps) * w; rstd saved.
void RmsNormForward(float* out, float* rstd, const float* inp, const float* w, int N, int C, float eps) {
  for (int i = 0; i < N; ++i) {
    const float* x = inp + static_cast<size_t>(i) * C;
    double ms = 0;
    for (int c = 0; c < C; ++c) ms += static_cast<double>(x[c]) * x[c];
    const double r = 1.0 / std::sqrt(ms / C + static_cast<double>(eps));
    float* o = out + static_cast<size_t>(i) * C;
    for (int c = 0; c < C; ++c) o[c] = static_cast<float>(x[c] * r * w[c]);
    rstd[i] = static_cast<float>(r);
  }
}
// xhat = x * rstd, dnorm = d * w: dx += rstd * (dnorm - xhat * mean(dnorm * xhat)); dw += xhat * d.
void RmsNormBackward(float* dinp, float* dw, const float* dout, const float* inp, const float* w, const float* rstd,
                     int N, int C) {
  std::vector<double> gw(C, 0.0);
  for (int i = 0; i < N; ++i) {
    const float* x = inp + static_cast<size_t>(i) * C;
    const float* d = dout + static_cast<size_t>(i) * C;
    float* dx = dinp + static_cast<size_t>(i) * C;
    const double r = rstd[i];
    double m = 0;
    for (int c = 0; c < C; ++c) m += static_cast<double>(d[c]) * w[c] * x[c] * r;
    m /= C;
    for (int c = 0; c < C; ++c) {
      const double xhat = x[c] * r;
      gw[c] += xhat * d[c];
      dx[c] += static_cast<float>(r * (static_cast<double>(d[c]) * w[c] - xhat * m));
    }
  }
  for (int c = 0; c < C; ++c) dw[c] += static_cast<float>(gw[c]);
}

void GeluForward(float* out, const float* inp, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    double x = inp[i];
    out[i] = static_cast<float>(0.5 * x * (1.0 + std::tanh(kGeluC * (x + 0.044715 * x * x * x))));
  }
}

void GeluBackward(float* dinp, const float* inp, const float* dout, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    double x = inp[i];
    double u = kGeluC * (x + 0.044715 * x * x * x);
    double th = std::tanh(u);
    double sech2 = 1.0 - th * th;
    double grad = 0.5 * (1.0 + th) + 0.5 * x * sech2 * kGeluC * (1.0 + 3.0 * 0.044715 * x * x);
    dinp[i] = static_cast<float>(grad * dout[i]);
  }
}

void ResidualForward(float* out, const float* a, const float* b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

double CrossEntropy(float* logits, float* losses, const int32_t* targets, int N, int V, int Vp, float dscale) {
  double total = 0;
  for (int i = 0; i < N; ++i) {
    float* row = logits + static_cast<size_t>(i) * Vp;
    double mx = row[0];
    for (int j = 1; j < V; ++j) mx = std::max(mx, static_cast<double>(row[j]));
    double sum = 0;
    for (int j = 0; j < V; ++j) sum += std::exp(row[j] - mx);
    const double lse = mx + std::log(sum);
    losses[i] = static_cast<float>(lse - row[targets[i]]);
    total += losses[i];
    if (dscale != 0.0f) {
      for (int j = 0; j < V; ++j) {
        double p = std::exp(row[j] - lse);
        row[j] = static_cast<float>(dscale * (p - (j == targets[i] ? 1.0 : 0.0)));
      }
      for (int j = V; j < Vp; ++j) row[j] = 0.0f;
    }
  }
  return total;
}

double SumSquares(const float* g, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(g[i]) * g[i];
  return s;
}

void Scale(float* g, float s, size_t n) {
  for (size_t i = 0; i < n; ++i) g[i] *= s;
}

void AdamW(float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1, float beta2, float eps,
           float wd, int t) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), t);
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), t);
  for (size_t i = 0; i < n; ++i) {
    // torch.optim.AdamW: p -= lr * wd * p; m, v updated; p -= lr * mhat / (sqrt(vhat) + eps)
    double pi = p[i] * (1.0 - static_cast<double>(lr) * wd);
    double mi = beta1 * static_cast<double>(m[i]) + (1.0 - beta1) * g[i];
    double vi = beta2 * static_cast<double>(v[i]) + (1.0 - beta2) * static_cast<double>(g[i]) * g[i];
    m[i] = static_cast<float>(mi);
    v[i] = static_cast<float>(vi);
    double denom = std::sqrt(static_cast<double>(v[i]) / bc2) + eps;
    p[i] = static_cast<float>(pi - lr * (static_cast<double>(m[i]) / bc1) / denom);
  }
}

}  // namespace

const KernelTable& RefKernels() {
  static const KernelTable t{"ref",           EmbeddingForward, EmbeddingBackward, LayerNormForward,
                             LayerNormBackward, LinearForward,    LinearBackward,    AttentionForward,
                             AttentionBackward, GeluForward,      GeluBackward,      ResidualForward,
                             CrossEntropy,      SumSquares,       Scale,             AdamW,
                             RmsNormForward,    RmsNormBackward};
  return t;
}

}  // namespace anneal
