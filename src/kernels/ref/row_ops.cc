// The reference arithmetic of the row-wise ops (kernels/ref/row_ops.h): plain loops, one row at a
// time. Moved here from kernels/host_backend.cc unchanged, operation for operation, so the bits of
// every run stay as they were.
#include "kernels/ref/row_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace anneal::row_ops {

void vocab_embedding_forward(float* out, const int32_t* tokens, const float* wte_slice, int64_t v0, int Vl, int C,
                             int r0, int r1) {
  for (int n = r0; n < r1; ++n) {
    float* o = out + static_cast<size_t>(n) * C;
    const int t = tokens[n];
    if (t >= v0 && t < v0 + Vl) std::memcpy(o, wte_slice + static_cast<size_t>(t - v0) * C, C * sizeof(float));
    else std::memset(o, 0, C * sizeof(float));
  }
}

void vocab_embedding_backward(float* dwte_slice, float* dwpe, const float* dall, const int32_t* tokens, int64_t v0,
                              int Vl, int N, int C, int T) {
  for (int n = 0; n < N; ++n) {
    const float* g = dall + static_cast<size_t>(n) * C;
    const int t = tokens[n];
    if (t >= v0 && t < v0 + Vl) {
      float* w = dwte_slice + static_cast<size_t>(t - v0) * C;
      for (int c = 0; c < C; ++c) w[c] += g[c];
    }
    if (!dwpe) continue;
    float* pe = dwpe + static_cast<size_t>(n % T) * C;
    for (int c = 0; c < C; ++c) pe[c] += g[c];
  }
}

void add_positions(float* out, const float* wpe, int64_t row0, int T, int C, int r0, int r1) {
  for (int n = r0; n < r1; ++n) {
    float* o = out + static_cast<size_t>(n) * C;
    const float* pe = wpe + static_cast<size_t>((row0 + n) % T) * C;
    for (int c = 0; c < C; ++c) o[c] += pe[c];
  }
}

void bias_add(float* out, const float* bias, int OC, int r0, int r1) {
  for (int n = r0; n < r1; ++n) {
    float* o = out + static_cast<size_t>(n) * OC;
    for (int j = 0; j < OC; ++j) o[j] += bias[j];
  }
}

void attention_decode(float* out, const float* q, const float* kcache, int64_t ks, const float* vcache, int64_t vs,
                      float* scores, int rows, int H, int hs, int group) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (int h = 0; h < H; ++h) {
    // scores over cached positions, softmax, weighted sum of cached values
    float mx = -INFINITY;
    for (int u = 0; u < rows; ++u) {
      float sum = 0;
      for (int i = 0; i < hs; ++i) sum += q[h * hs + i] * kcache[static_cast<size_t>(u) * ks + (h / group) * hs + i];
      scores[u] = sum * scale;
      mx = std::max(mx, scores[u]);
    }
    float sum = 0;
    for (int u = 0; u < rows; ++u) sum += (scores[u] = std::exp(scores[u] - mx));
    for (int i = 0; i < hs; ++i) {
      float acc = 0;
      for (int u = 0; u < rows; ++u) acc += scores[u] * vcache[static_cast<size_t>(u) * vs + (h / group) * hs + i];
      out[h * hs + i] = acc / sum;
    }
  }
}

void rotary(float* x, const float* cos, const float* sin, int T, int H, int hs, bool inverse, int r0, int r1) {
  const int half = hs / 2, C = H * hs;
  const double sign = inverse ? -1.0 : 1.0;
  for (int bt = r0; bt < r1; ++bt) {
    const int t = bt % T;
    const float* c = cos + static_cast<size_t>(t) * half;
    const float* sn = sin + static_cast<size_t>(t) * half;
    for (int h = 0; h < H; ++h) {
      float* v = x + static_cast<size_t>(bt) * C + static_cast<size_t>(h) * hs;
      for (int i = 0; i < half; ++i) {
        const double a = v[i], b = v[i + half], ci = c[i], si = sign * sn[i];
        v[i] = static_cast<float>(a * ci - b * si);
        v[i + half] = static_cast<float>(b * ci + a * si);
      }
    }
  }
}

void swiglu_forward(float* out, const float* gate, const float* up, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) {
    const double gi = gate[i];
    out[i] = static_cast<float>(gi / (1.0 + std::exp(-gi)) * up[i]);
  }
}

// d/dg silu(g) = sig(g) (1 + g (1 - sig(g))).
void swiglu_backward(float* dgate, float* dup, const float* gate, const float* up, const float* dout, int64_t i0,
                     int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) {
    const double gi = gate[i], sig = 1.0 / (1.0 + std::exp(-gi));
    dup[i] = static_cast<float>(gi * sig * dout[i]);
    dgate[i] = static_cast<float>(static_cast<double>(dout[i]) * up[i] * sig * (1.0 + gi * (1.0 - sig)));
  }
}

void accumulate(float* dst, const float* src, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) dst[i] += src[i];
}

void vocab_loss_stats(double* stats, const float* logits, const int32_t* targets, int64_t v0, int nreal, int Vl,
                      int r0, int r1) {
  const double ninf = -std::numeric_limits<double>::infinity();
  for (int i = r0; i < r1; ++i) {
    const float* row = logits + static_cast<size_t>(i) * Vl;
    double mx = ninf;
    for (int j = 0; j < nreal; ++j) mx = std::max(mx, static_cast<double>(row[j]));
    double sum = 0;
    for (int j = 0; j < nreal; ++j) sum += std::exp(static_cast<double>(row[j]) - mx);
    const int t = targets[i];
    stats[2 * i] = nreal ? mx + std::log(sum) : ninf;
    stats[2 * i + 1] = t >= v0 && t < v0 + nreal ? row[t - v0] : 0.0;
  }
}

void vocab_loss_combine(float* logits, float* losses, double* row_loss, const double* gathered, const int32_t* targets,
                        int64_t v0, int nreal, int Vl, int N, int tp, float dscale, int r0, int r1) {
  const double ninf = -std::numeric_limits<double>::infinity();
  for (int i = r0; i < r1; ++i) {
    double mx = ninf, tl = 0;
    for (int r = 0; r < tp; ++r) mx = std::max(mx, gathered[static_cast<size_t>(r) * 2 * N + 2 * i]);
    double sum = 0;
    for (int r = 0; r < tp; ++r) {  // the slices in rank order: every rank gets the same loss, bit for bit
      sum += std::exp(gathered[static_cast<size_t>(r) * 2 * N + 2 * i] - mx);
      tl += gathered[static_cast<size_t>(r) * 2 * N + 2 * i + 1];
    }
    const double lse = mx + std::log(sum);
    row_loss[2 * i] = lse - tl;
    losses[i] = static_cast<float>(lse - tl);
    if (dscale == 0.0f) continue;
    float* row = logits + static_cast<size_t>(i) * Vl;
    const int t = targets[i];
    for (int j = 0; j < nreal; ++j) {
      const double p = std::exp(static_cast<double>(row[j]) - lse);
      row[j] = static_cast<float>(dscale * (p - (v0 + j == t ? 1.0 : 0.0)));
    }
    for (int j = nreal; j < Vl; ++j) row[j] = 0.0f;
  }
}

}  // namespace anneal::row_ops
