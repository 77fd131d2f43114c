#include "kernels/cuda/rows.h"

#include <algorithm>
#include <cmath>

#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/math.cuh"

namespace anneal::cuda {

Scratch::~Scratch() {
  if (p_) cudaFree(p_);
}

Result<void*> Scratch::Get(size_t bytes) {
  if (bytes <= bytes_) return p_;
  if (p_) ANNEAL_CUDA_CHECK(cudaFree(p_));
  p_ = nullptr;
  bytes_ = 0;
  if (const cudaError_t e = cudaMalloc(&p_, bytes); e != cudaSuccess) {
    p_ = nullptr;
    cudaGetLastError();  // not left pending for the next launch's check
    return CudaStatus(e, "cudaMalloc (scratch)", __FILE__, __LINE__);
  }
  bytes_ = bytes;
  return p_;
}

namespace {

constexpr int kThreads = 256;

template <class T>
__device__ __forceinline__ float Ld(const void* p, int64_t i);
template <>
__device__ __forceinline__ float Ld<float>(const void* p, int64_t i) {
  return static_cast<const float*>(p)[i];
}
template <>
__device__ __forceinline__ float Ld<uint16_t>(const void* p, int64_t i) {
  return cudamath::WidenBf16(static_cast<const uint16_t*>(p)[i]);
}
template <class T>
__device__ __forceinline__ void St(void* p, int64_t i, float x);
template <>
__device__ __forceinline__ void St<float>(void* p, int64_t i, float x) {
  static_cast<float*>(p)[i] = x;
}
template <>
__device__ __forceinline__ void St<uint16_t>(void* p, int64_t i, float x) {
  static_cast<uint16_t*>(p)[i] = cudamath::RoundBf16(x);
}

// The warp's sum in a fixed butterfly order, lane 0's value given to every lane.
__device__ __forceinline__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return __shfl_sync(0xffffffffu, v, 0);
}

// The block's OnlineLse in a fixed tree order (blockDim.x == kThreads); every thread gets the lse.
__device__ float BlockLse(cudamath::OnlineLse s) {
  __shared__ float mx[kThreads], sm[kThreads];
  __shared__ float result;
  mx[threadIdx.x] = s.max;
  sm[threadIdx.x] = s.sum;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) {
      cudamath::OnlineLse a, b;
      a.max = mx[threadIdx.x], a.sum = sm[threadIdx.x];
      b.max = mx[threadIdx.x + half], b.sum = sm[threadIdx.x + half];
      a.Merge(b);
      mx[threadIdx.x] = a.max, sm[threadIdx.x] = a.sum;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    cudamath::OnlineLse a;
    a.max = mx[0], a.sum = sm[0];
    result = a.Lse();
  }
  __syncthreads();
  return result;
}

// The block's sum in a fixed tree order; every thread gets it.
template <class A>
__device__ A BlockSum(A v) {
  __shared__ A buf[kThreads];
  __shared__ A result;
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) buf[threadIdx.x] += buf[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) result = buf[0];
  __syncthreads();
  return result;
}

uint32_t GridFor(int64_t n, int sms) {
  return static_cast<uint32_t>(std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, sms * 16LL)));
}

#define ANNEAL_GRID_STRIDE(i, n) \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// ---- LayerNorm ----

template <class T>
__global__ void LnForward(cudalaunch::Rows r, void* out, float* mean, float* rstd, const void* inp, const void* w,
                          const void* b, void* resid, const void* ra, const void* rb) {
  const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = r.RowOf(blockIdx.x, warp);
  if (row < 0) return;
  const int64_t C = r.cols, base = row * C;
  const void* src = resid ? resid : inp;
  float s = 0;
  for (int64_t c = lane; c < C; c += 32) {
    if (resid) St<T>(resid, base + c, Ld<T>(ra, base + c) + Ld<T>(rb, base + c));
    s += Ld<T>(src, base + c);
  }
  const float m = WarpSum(s) / C;
  float ss = 0;
  for (int64_t c = lane; c < C; c += 32) {
    const float x = Ld<T>(src, base + c) - m;
    ss += x * x;
  }
  const float rs = cudamath::LayerNormRstd(WarpSum(ss), static_cast<int>(C));
  for (int64_t c = lane; c < C; c += 32) {
    St<T>(out, base + c, cudamath::LayerNormOut(Ld<T>(src, base + c), m, rs, Ld<T>(w, c), Ld<T>(b, c)));
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = rs;
  }
}

template <class T>
__global__ void LnBackwardRows(cudalaunch::Rows r, void* dinp, const void* dout, const void* inp, const void* w,
                               const float* mean, const float* rstd) {
  const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = r.RowOf(blockIdx.x, warp);
  if (row < 0) return;
  const int64_t C = r.cols, base = row * C;
  const float m = mean[row], rs = rstd[row];
  float sg = 0, sgx = 0;
  for (int64_t c = lane; c < C; c += 32) {
    const float g = Ld<T>(dout, base + c) * Ld<T>(w, c);
    sg += g;
    sgx += g * (Ld<T>(inp, base + c) - m) * rs;
  }
  const float mg = WarpSum(sg) / C, mgx = WarpSum(sgx) / C;
  for (int64_t c = lane; c < C; c += 32) {
    const float xhat = (Ld<T>(inp, base + c) - m) * rs;
    const float d = cudamath::LayerNormInputGrad(Ld<T>(dout, base + c), Ld<T>(w, c), xhat, rs, mg, mgx);
    St<T>(dinp, base + c, Ld<T>(dinp, base + c) + d);
  }
}

// ---- RMSNorm ----

template <class T>
__global__ void RmsForward(cudalaunch::Rows r, void* out, float* rstd, const void* inp, const void* w, float eps) {
  const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = r.RowOf(blockIdx.x, warp);
  if (row < 0) return;
  const int64_t C = r.cols, base = row * C;
  float ss = 0;
  for (int64_t c = lane; c < C; c += 32) {
    const float x = Ld<T>(inp, base + c);
    ss += x * x;
  }
  const float rs = cudamath::RmsNormRstd(WarpSum(ss), static_cast<int>(C), eps);
  for (int64_t c = lane; c < C; c += 32) St<T>(out, base + c, Ld<T>(inp, base + c) * rs * Ld<T>(w, c));
  if (lane == 0) rstd[row] = rs;
}

template <class T>
__global__ void RmsBackwardRows(cudalaunch::Rows r, void* dinp, const void* dout, const void* inp, const void* w,
                                const float* rstd) {
  const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = r.RowOf(blockIdx.x, warp);
  if (row < 0) return;
  const int64_t C = r.cols, base = row * C;
  const float rs = rstd[row];
  float sgx = 0;
  for (int64_t c = lane; c < C; c += 32) sgx += Ld<T>(dout, base + c) * Ld<T>(w, c) * Ld<T>(inp, base + c) * rs;
  const float mgx = WarpSum(sgx) / C;
  for (int64_t c = lane; c < C; c += 32) {
    const float d = cudamath::RmsNormInputGrad(Ld<T>(dout, base + c), Ld<T>(w, c), Ld<T>(inp, base + c) * rs, rs, mgx);
    St<T>(dinp, base + c, Ld<T>(dinp, base + c) + d);
  }
}

// ---- rotary position embedding ----

// x (B,T,H*hs) in place: each pair (i, i + hs/2) of each head rotated by row t's angle.
template <class T>
__global__ void RotaryKernel(int64_t BT, int64_t T_, int64_t H, int64_t hs, void* x, const float* cos_t,
                             const float* sin_t, float sign) {
  const int64_t half = hs / 2;
  ANNEAL_GRID_STRIDE(i, BT * H * half) {
    const int64_t e = i % half, h = (i / half) % H, bt = i / (half * H), t = bt % T_;
    const int64_t a = bt * H * hs + h * hs + e;
    float ra, rb;
    cudamath::Rotate(Ld<T>(x, a), Ld<T>(x, a + half), cos_t[t * half + e], sign * sin_t[t * half + e], &ra, &rb);
    St<T>(x, a, ra);
    St<T>(x, a + half, rb);
  }
}

// Column sums over rows, deterministic and parallel in two passes: block (x, y) sums rows
// [y * kRowChunk, (y + 1) * kRowChunk) of its columns into partial row y (one thread per column,
// rows in order); the second pass adds the chunks' partials in chunk order. With inp given, the
// first sum is of dout * xhat (LayerNorm's dw) and the second of dout (db); without, only dout.
constexpr int64_t kRowChunk = 128;

template <class T>
__global__ void ColumnPartials(int64_t N, int64_t C, const void* dout, const void* inp, const float* mean,
                               const float* rstd, float* pw, float* pb) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kRowChunk, r1 = r0 + kRowChunk < N ? r0 + kRowChunk : N;
  float aw = 0, ab = 0;
  for (int64_t n = r0; n < r1; ++n) {
    const float d = Ld<T>(dout, n * C + c);
    if (inp) aw += d * (Ld<T>(inp, n * C + c) - (mean ? mean[n] : 0.0f)) * rstd[n];  // RMSNorm: no mean
    ab += d;
  }
  if (pw) pw[blockIdx.y * C + c] = aw;
  pb[blockIdx.y * C + c] = ab;
}

template <class T>
__global__ void ColumnFinish(int64_t chunks, int64_t C, void* dw, void* db, const float* pw, const float* pb) {
  ANNEAL_GRID_STRIDE(c, C) {
    float aw = 0, ab = 0;
    for (int64_t k = 0; k < chunks; ++k) {
      if (pw) aw += pw[k * C + c];
      ab += pb[k * C + c];
    }
    if (dw) St<T>(dw, c, Ld<T>(dw, c) + aw);
    if (db) St<T>(db, c, Ld<T>(db, c) + ab);
  }
}

template <class T>
__global__ void BiasAddKernel(int64_t N, int64_t OC, void* out, const void* bias) {
  ANNEAL_GRID_STRIDE(i, N * OC) { St<T>(out, i, Ld<T>(out, i) + Ld<T>(bias, i % OC)); }
}

// ---- losses ----

template <class T>
__global__ void CrossEntropyRows(void* logits, float* losses, const int32_t* targets, int64_t Vp, int V, float dscale) {
  const int64_t row = blockIdx.x, base = row * Vp;
  const int tgt = targets[row];
  cudamath::OnlineLse s;
  for (int64_t j = threadIdx.x; j < V; j += kThreads) s.Push(Ld<T>(logits, base + j));
  const float lse = BlockLse(s);
  if (threadIdx.x == 0) losses[row] = lse - Ld<T>(logits, base + tgt);
  __syncthreads();  // the target's logit is read before anything is overwritten
  if (dscale == 0.0f) return;
  for (int64_t j = threadIdx.x; j < Vp; j += kThreads) {
    St<T>(logits, base + j, j < V ? cudamath::CrossEntropyGrad(Ld<T>(logits, base + j), lse, j == tgt, dscale) : 0.0f);
  }
}

template <class T>
__global__ void VocabStatsRows(double* stats, const void* logits, const int32_t* targets, int64_t Vl, int64_t v0,
                               int nreal) {
  const int64_t row = blockIdx.x, base = row * Vl;
  cudamath::OnlineLse s;
  for (int64_t j = threadIdx.x; j < nreal; j += kThreads) s.Push(Ld<T>(logits, base + j));
  const float lse = BlockLse(s);
  if (threadIdx.x == 0) {
    const int64_t tj = targets[row] - v0;
    stats[2 * row] = nreal == 0 ? -INFINITY : static_cast<double>(lse);
    stats[2 * row + 1] = (tj >= 0 && tj < nreal) ? static_cast<double>(Ld<T>(logits, base + tj)) : 0.0;
  }
}

template <class T>
__global__ void VocabCombineRows(void* logits, float* losses, double* row_loss, const double* gathered, int tp,
                                 int64_t N, const int32_t* targets, int64_t Vl, int64_t v0, int nreal, float dscale) {
  const int64_t row = blockIdx.x, base = row * Vl;
  __shared__ double lse_s;
  if (threadIdx.x == 0) {
    double m = -INFINITY, tl = 0;
    for (int r = 0; r < tp; ++r) {  // the slices in rank order
      m = fmax(m, gathered[(r * N + row) * 2]);
      tl += gathered[(r * N + row) * 2 + 1];
    }
    double s = 0;
    for (int r = 0; r < tp; ++r) {
      const double l = gathered[(r * N + row) * 2];
      if (l != -INFINITY) s += exp(l - m);
    }
    const double lse = m + log(s);
    losses[row] = static_cast<float>(lse - tl);
    row_loss[2 * row] = lse - tl;
    lse_s = lse;
  }
  __syncthreads();
  if (dscale == 0.0f) return;
  const float lse = static_cast<float>(lse_s);
  const int64_t tj = targets[row] - v0;
  for (int64_t j = threadIdx.x; j < Vl; j += kThreads) {
    St<T>(logits, base + j, j < nreal ? cudamath::CrossEntropyGrad(Ld<T>(logits, base + j), lse, j == tj, dscale) : 0.0f);
  }
}

template <class T>
__global__ void SumSquaresChunks(cudalaunch::ChunkedSum plan, const void* g, double* partial) {
  double a = 0;
  plan.Visit(blockIdx.x, threadIdx.x, [&](size_t i) {
    const double x = Ld<T>(g, static_cast<int64_t>(i));
    a = __dadd_rn(a, __dmul_rn(x, x));  // never fused into an FMA: the host reproduces this order exactly
  });
  const double s = BlockSum<double>(a);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// One block of SumSquaresEach: block `block` of view g's chunked sum (SumSquaresChunks's own block).
struct SumSquaresBlock {
  const void* g;
  cudalaunch::ChunkedSum plan;
  uint32_t block;
};

template <class T>
__global__ void SumSquaresBlocks(const SumSquaresBlock* blocks, double* partial) {
  const SumSquaresBlock b = blocks[blockIdx.x];
  double a = 0;
  b.plan.Visit(b.block, threadIdx.x, [&](size_t i) {
    const double x = Ld<T>(b.g, static_cast<int64_t>(i));
    a = __dadd_rn(a, __dmul_rn(x, x));  // as SumSquaresChunks: the same lanes, the same order
  });
  const double s = BlockSum<double>(a);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// ---- embeddings ----

template <class T>
__global__ void EmbedForward(int64_t N, int64_t T_, int64_t C, void* out, const int32_t* tokens, const void* wte,
                             const void* wpe) {
  ANNEAL_GRID_STRIDE(i, N * C) {
    const int64_t n = i / C, c = i % C;
    St<T>(out, i, Ld<T>(wte, static_cast<int64_t>(tokens[n]) * C + c) + Ld<T>(wpe, (n % T_) * C + c));
  }
}

template <class T>
__global__ void VocabEmbedForward(int64_t N, int64_t C, void* rows, const int32_t* tokens, const void* wte, int64_t Vl,
                                  int64_t v0) {
  ANNEAL_GRID_STRIDE(i, N * C) {
    const int64_t n = i / C, c = i % C, t = tokens[n] - v0;
    St<T>(rows, i, (t >= 0 && t < Vl) ? Ld<T>(wte, t * C + c) : 0.0f);
  }
}

// dwpe[t, c] += sum over the rows n = t, t + T, ... (< N) of dout[n, c], in row order.
template <class T>
__global__ void PositionGrad(int64_t N, int64_t T_, int64_t C, void* dwpe, const void* dout) {
  ANNEAL_GRID_STRIDE(i, T_ * C) {
    const int64_t t = i / C, c = i % C;
    float a = 0;
    for (int64_t n = t; n < N; n += T_) a += Ld<T>(dout, n * C + c);
    St<T>(dwpe, i, Ld<T>(dwpe, i) + a);
  }
}

__global__ void Iota(int64_t n, int32_t* v) {
  ANNEAL_GRID_STRIDE(i, n) { v[i] = static_cast<int32_t>(i); }
}

// Over the rows sorted by token (stable: rows ascending within a token): block i handles the run of
// equal tokens that starts at sorted position i (other blocks return at once), summing its rows per
// channel in row order and adding the sum to the token's row of dwte — tokens outside [lo, hi)
// (another slice's) skipped. No atomics: each token's row is written by one block.
template <class T>
__global__ void TokenRunGrad(int64_t N, int64_t C, void* dwte, const void* dout, const int32_t* sorted_tok,
                             const int32_t* sorted_row, int64_t lo, int64_t hi) {
  const int64_t i = blockIdx.x;
  const int32_t tok = sorted_tok[i];
  if ((i > 0 && sorted_tok[i - 1] == tok) || tok < lo || tok >= hi) return;
  int64_t end = i + 1;
  while (end < N && sorted_tok[end] == tok) ++end;
  const int64_t trow = tok - lo;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    float a = 0;
    for (int64_t k = i; k < end; ++k) a += Ld<T>(dout, static_cast<int64_t>(sorted_row[k]) * C + c);
    St<T>(dwte, trow * C + c, Ld<T>(dwte, trow * C + c) + a);
  }
}

template <class T>
__global__ void AddPositionsKernel(int64_t R, int64_t C, void* out, const void* wpe, int64_t row0, int T_) {
  ANNEAL_GRID_STRIDE(i, R * C) {
    const int64_t n = i / C, c = i % C;
    St<T>(out, i, Ld<T>(out, i) + Ld<T>(wpe, ((row0 + n) % T_) * C + c));
  }
}

struct Strides4 {
  int64_t shape[4], dst[4], src[4];
  int ndim;
};

template <class T>
__global__ void StridedCopyKernel(int64_t n, Strides4 s, void* dst, const void* src) {
  ANNEAL_GRID_STRIDE(i, n) {
    int64_t rest = i, od = 0, os = 0;
#pragma unroll
    for (int k = 3; k >= 0; --k) {  // constant indices: the strides stay in registers
      if (k < s.ndim) {
        const int64_t idx = rest % s.shape[k];
        rest /= s.shape[k];
        od += idx * s.dst[k];
        os += idx * s.src[k];
      }
    }
    static_cast<T*>(dst)[od] = static_cast<const T*>(src)[os];
  }
}

// ---- attention ----

// Grouped-query attention's keys and values, path 1: (B,T,Hkv*hs) -> (B,H,T,hs), query head h
// reading key/value head h / group; and back, each key/value head the sum of its group's heads in
// head order.
template <class T>
__global__ void ExpandKvHeadsKernel(int64_t B, int64_t T_, int64_t hs, int H, int group, void* dst, const void* src) {
  const int64_t Ckv = hs * (H / group);
  ANNEAL_GRID_STRIDE(i, B * T_ * H * hs) {
    const int64_t e = i % hs, t = (i / hs) % T_, h = (i / (hs * T_)) % H, b = i / (hs * T_ * H);
    St<T>(dst, i, Ld<T>(src, (b * T_ + t) * Ckv + (h / group) * hs + e));
  }
}
template <class T>
__global__ void SumKvHeadsKernel(int64_t B, int64_t T_, int64_t hs, int H, int group, void* dst, const void* src) {
  const int64_t Hkv = H / group, Ckv = hs * Hkv;
  ANNEAL_GRID_STRIDE(i, B * T_ * Ckv) {
    const int64_t e = i % hs, g = (i / hs) % Hkv, t = (i / Ckv) % T_, b = i / (Ckv * T_);
    float a = 0;
    for (int j = 0; j < group; ++j) a += Ld<T>(src, ((b * H + g * group + j) * T_ + t) * hs + e);
    St<T>(dst, i, a);
  }
}

template <class T>
__global__ void HeadsKernel(int64_t B, int64_t T_, int64_t C, int H, void* dst, const void* src, bool split) {
  const int64_t hs = C / H;
  ANNEAL_GRID_STRIDE(i, B * T_ * C) {
    const int64_t e = i % hs, h = (i / hs) % H, t = (i / C) % T_, b = i / (T_ * C);
    const int64_t merged = (b * T_ + t) * C + h * hs + e, heads = ((b * H + h) * T_ + t) * hs + e;
    if (split) {
      static_cast<T*>(dst)[heads] = static_cast<const T*>(src)[merged];
    } else {
      static_cast<T*>(dst)[merged] = static_cast<const T*>(src)[heads];
    }
  }
}

template <class T>
__global__ void CausalSoftmaxRows(void* scores, float* lse, int64_t T_, float scale) {
  const int64_t r = blockIdx.x, base = r * T_, i = r % T_;
  cudamath::OnlineLse s;
  for (int64_t j = threadIdx.x; j <= i; j += kThreads) s.Push(scale * Ld<T>(scores, base + j));
  const float l = BlockLse(s);
  for (int64_t j = threadIdx.x; j < T_; j += kThreads) {
    St<T>(scores, base + j, j <= i ? expf(scale * Ld<T>(scores, base + j) - l) : 0.0f);
  }
  if (threadIdx.x == 0) lse[r] = l;
}

template <class T>
__global__ void SoftmaxBackwardRows(void* dp, const void* scores, const float* lse, const void* dout_h,
                                    const void* out_h, int64_t T_, int64_t hs, float scale, void* probs) {
  const int64_t r = blockIdx.x, base = r * T_, i = r % T_;
  float a = 0;
  for (int64_t e = threadIdx.x; e < hs; e += kThreads) a += Ld<T>(dout_h, r * hs + e) * Ld<T>(out_h, r * hs + e);
  const float D = BlockSum<float>(a);
  const float l = lse[r];
  for (int64_t j = threadIdx.x; j < T_; j += kThreads) {
    const float p = j <= i ? expf(scale * Ld<T>(scores, base + j) - l) : 0.0f;
    St<T>(dp, base + j, p * (Ld<T>(dp, base + j) - D));
    if (probs) St<T>(probs, base + j, p);
  }
}

template <class T>
__global__ void DecodeHead(void* out, const void* q, const void* kcache, int64_t kstride, const void* vcache,
                           int64_t vstride, int64_t rows, int64_t hs, int64_t h, int64_t kvh, float* scores) {
  const float scale = rsqrtf(static_cast<float>(hs));
  cudamath::OnlineLse s;
  for (int64_t u = threadIdx.x; u < rows; u += kThreads) {
    float dot = 0;
    for (int64_t e = 0; e < hs; ++e) dot += Ld<T>(q, h * hs + e) * Ld<T>(kcache, u * kstride + kvh * hs + e);
    scores[u] = dot * scale;
    s.Push(dot * scale);
  }
  const float l = BlockLse(s);  // (its barriers also make every score visible to every thread)
  for (int64_t e = threadIdx.x; e < hs; e += kThreads) {
    float a = 0;
    for (int64_t u = 0; u < rows; ++u) a += expf(scores[u] - l) * Ld<T>(vcache, u * vstride + kvh * hs + e);
    St<T>(out, h * hs + e, a);
  }
}

// Launch helper: the same kernel template for f32 or bf16.
#define ANNEAL_LAUNCH_T(t, kernel, grid, block, stream, ...)                  \
  do {                                                                        \
    if ((t) == Elem::kF32) {                                                  \
      kernel<float><<<(grid), (block), 0, (stream)>>>(__VA_ARGS__);           \
    } else {                                                                  \
      kernel<uint16_t><<<(grid), (block), 0, (stream)>>>(__VA_ARGS__);        \
    }                                                                         \
    ANNEAL_CUDA_LAUNCHED(#kernel);                                            \
  } while (0)

// The token rows of dwte receive their rows' gradients: the (token, row) pairs sorted by token on
// the device (CUB's radix sort is stable, so each token's rows stay ascending), then one block per
// run of equal tokens. Deterministic, no atomics, no host round trip.
template <class T>
Status TokenGrads(const Device1D& d, void* dwte, const void* dout, const int32_t* tokens, int64_t N, int64_t C,
                  int64_t lo, int64_t hi, Scratch& scratch) {
  if (N > INT32_MAX) return Internal("embedding backward over " + std::to_string(N) + " rows (at most 2^31)");
  const int n = static_cast<int>(N);
  size_t temp = 0;
  ANNEAL_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp, static_cast<const int32_t*>(nullptr),
                                                    static_cast<int32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                                    static_cast<int32_t*>(nullptr), n, 0, 32, d.stream));
  const size_t ints = 3 * static_cast<size_t>(n);
  ANNEAL_ASSIGN_OR_RETURN(void* p, scratch.Get(ints * sizeof(int32_t) + temp + 256));
  int32_t* rows = static_cast<int32_t*>(p);
  int32_t *sorted_tok = rows + n, *sorted_row = rows + 2 * n;
  void* cub_temp = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(rows + ints) + 255) & ~uintptr_t{255});
  Iota<<<GridFor(N, d.sms), kThreads, 0, d.stream>>>(N, rows);
  ANNEAL_CUDA_LAUNCHED("Iota");
  ANNEAL_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(cub_temp, temp, tokens, sorted_tok, rows, sorted_row, n, 0, 32,
                                                    d.stream));
  TokenRunGrad<T><<<static_cast<uint32_t>(N), kThreads, 0, d.stream>>>(N, C, dwte, dout, sorted_tok, sorted_row, lo, hi);
  ANNEAL_CUDA_LAUNCHED("TokenRunGrad");
  return Status::Ok();
}

Status TokenGrads(const Device1D& d, Elem t, void* dwte, const void* dout, const int32_t* tokens, int64_t N, int64_t C,
                  int64_t lo, int64_t hi, Scratch& scratch) {
  return t == Elem::kF32 ? TokenGrads<float>(d, dwte, dout, tokens, N, C, lo, hi, scratch)
                         : TokenGrads<uint16_t>(d, dwte, dout, tokens, N, C, lo, hi, scratch);
}

}  // namespace

Status LayerNormForward(const Device1D& d, Elem t, void* out, float* mean, float* rstd, const void* inp, const void* w,
                        const void* b, int64_t N, int64_t C, void* resid, const void* ra, const void* rb) {
  if (N == 0) return Status::Ok();
  cudalaunch::Rows r;
  r.rows = N;
  r.cols = C;
  ANNEAL_LAUNCH_T(t, LnForward, r.blocks(), r.threads(), d.stream, r, out, mean, rstd, inp, w, b, resid, ra, rb);
  return Status::Ok();
}

namespace {

// dw += column sums of dout * xhat (when inp is given), db += column sums of dout.
Status ColumnSumsInto(const Device1D& d, Elem t, void* dw, void* db, const void* dout, const void* inp,
                      const float* mean, const float* rstd, int64_t N, int64_t C, Scratch& scratch) {
  const int64_t chunks = (N + kRowChunk - 1) / kRowChunk;
  if (chunks > 65535) return Internal("column sums over " + std::to_string(N) + " rows: more than 65535 chunks");
  ANNEAL_ASSIGN_OR_RETURN(void* p, scratch.Get(2 * static_cast<size_t>(chunks * C) * sizeof(float)));
  float* pb = static_cast<float*>(p);
  float* pw = inp ? pb + chunks * C : nullptr;
  const dim3 grid(static_cast<uint32_t>((C + kThreads - 1) / kThreads), static_cast<uint32_t>(chunks));
  ANNEAL_LAUNCH_T(t, ColumnPartials, grid, kThreads, d.stream, N, C, dout, inp, mean, rstd, pw, pb);
  ANNEAL_LAUNCH_T(t, ColumnFinish, GridFor(C, d.sms), kThreads, d.stream, chunks, C, dw, db, pw, pb);
  return Status::Ok();
}

}  // namespace

Status LayerNormBackward(const Device1D& d, Elem t, void* dinp, void* dw, void* db, const void* dout, const void* inp,
                         const void* w, const float* mean, const float* rstd, int64_t N, int64_t C, Scratch& scratch) {
  if (N == 0) return Status::Ok();
  cudalaunch::Rows r;
  r.rows = N;
  r.cols = C;
  ANNEAL_LAUNCH_T(t, LnBackwardRows, r.blocks(), r.threads(), d.stream, r, dinp, dout, inp, w, mean, rstd);
  return ColumnSumsInto(d, t, dw, db, dout, inp, mean, rstd, N, C, scratch);
}

Status BiasAdd(const Device1D& d, Elem t, void* out, const void* bias, int64_t N, int64_t OC) {
  if (N * OC == 0) return Status::Ok();
  ANNEAL_LAUNCH_T(t, BiasAddKernel, GridFor(N * OC, d.sms), kThreads, d.stream, N, OC, out, bias);
  return Status::Ok();
}

Status BiasGrad(const Device1D& d, Elem t, void* dbias, const void* dout, int64_t N, int64_t OC, Scratch& scratch) {
  if (OC == 0 || N == 0) return Status::Ok();
  return ColumnSumsInto(d, t, nullptr, dbias, dout, nullptr, nullptr, nullptr, N, OC, scratch);
}

Status CrossEntropy(const Device1D& d, Elem t, void* logits, float* losses, const int32_t* targets, int64_t N,
                    int64_t Vp, int V, float dscale, double* sum) {
  *sum = 0;
  if (N == 0) return Status::Ok();
  ANNEAL_LAUNCH_T(t, CrossEntropyRows, static_cast<uint32_t>(N), kThreads, d.stream, logits, losses, targets, Vp, V,
                  dscale);
  std::vector<float> host(static_cast<size_t>(N));
  ANNEAL_CUDA_CHECK(cudaMemcpyAsync(host.data(), losses, N * sizeof(float), cudaMemcpyDeviceToHost, d.stream));
  ANNEAL_CUDA_CHECK(cudaStreamSynchronize(d.stream));
  for (float x : host) *sum += x;  // row order, in double (the reference's)
  return Status::Ok();
}

Status VocabLossStats(const Device1D& d, Elem t, double* stats, const void* logits, const int32_t* targets, int64_t N,
                      int64_t Vl, int64_t v0, int nreal) {
  if (N == 0) return Status::Ok();
  ANNEAL_LAUNCH_T(t, VocabStatsRows, static_cast<uint32_t>(N), kThreads, d.stream, stats, logits, targets, Vl, v0, nreal);
  return Status::Ok();
}

Status VocabLossCombine(const Device1D& d, Elem t, void* logits, float* losses, double* row_loss, const double* gathered,
                        int tp, const int32_t* targets, int64_t N, int64_t Vl, int64_t v0, int nreal, float dscale,
                        double* sum) {
  *sum = 0;
  if (N == 0) return Status::Ok();
  ANNEAL_LAUNCH_T(t, VocabCombineRows, static_cast<uint32_t>(N), kThreads, d.stream, logits, losses, row_loss, gathered,
                  tp, N, targets, Vl, v0, nreal, dscale);
  std::vector<double> host(static_cast<size_t>(2 * N));
  ANNEAL_CUDA_CHECK(cudaMemcpyAsync(host.data(), row_loss, 2 * N * sizeof(double), cudaMemcpyDeviceToHost, d.stream));
  ANNEAL_CUDA_CHECK(cudaStreamSynchronize(d.stream));
  for (int64_t n = 0; n < N; ++n) *sum += host[2 * n];
  return Status::Ok();
}

Status SumSquares(const Device1D& d, Elem t, const void* g, size_t n, Scratch& scratch, double* out) {
  *out = 0;
  if (n == 0) return Status::Ok();
  const cudalaunch::ChunkedSum plan = cudalaunch::PlanChunkedSum(n);
  ANNEAL_ASSIGN_OR_RETURN(void* p, scratch.Get(plan.blocks() * sizeof(double)));
  ANNEAL_LAUNCH_T(t, SumSquaresChunks, plan.blocks(), plan.threads, d.stream, plan, g, static_cast<double*>(p));
  std::vector<double> host(plan.blocks());
  ANNEAL_CUDA_CHECK(cudaMemcpyAsync(host.data(), p, host.size() * sizeof(double), cudaMemcpyDeviceToHost, d.stream));
  ANNEAL_CUDA_CHECK(cudaStreamSynchronize(d.stream));
  for (double x : host) *out += x;  // block order
  return Status::Ok();
}

Status SumSquaresEach(const Device1D& d, const Elem* t, const void* const* g, const size_t* n, size_t count,
                      Scratch& scratch, DeviceTable& table, double* out) {
  std::vector<size_t> first(count + 1, 0);  // view i's partials are [first[i], first[i+1])
  std::vector<uint64_t> key;                // the views: their table's key
  bool one_dtype = true;
  for (size_t i = 0; i < count; ++i) {
    out[i] = 0;
    first[i + 1] = first[i] + (n[i] ? cudalaunch::PlanChunkedSum(n[i]).blocks() : 0);
    one_dtype = one_dtype && t[i] == t[0];
    key.push_back(reinterpret_cast<uintptr_t>(g[i]));
    key.push_back(n[i]);
  }
  if (first[count] == 0) return Status::Ok();
  ANNEAL_ASSIGN_OR_RETURN(void* p, scratch.Get(first[count] * sizeof(double)));
  double* partials = static_cast<double*>(p);
  if (one_dtype) {  // one launch over the table of every view's blocks
    ANNEAL_ASSIGN_OR_RETURN(const void* blocks, table.For(d.stream, key, [&] {
      std::vector<SumSquaresBlock> rows;
      for (size_t i = 0; i < count; ++i) {
        if (n[i] == 0) continue;
        const cudalaunch::ChunkedSum plan = cudalaunch::PlanChunkedSum(n[i]);
        for (uint32_t b = 0; b < plan.blocks(); ++b) rows.push_back({g[i], plan, b});
      }
      return rows;
    }));
    ANNEAL_LAUNCH_T(t[0], SumSquaresBlocks, static_cast<uint32_t>(table.rows()), cudalaunch::PlanChunkedSum(1).threads,
                    d.stream, static_cast<const SumSquaresBlock*>(blocks), partials);
  } else {
    for (size_t i = 0; i < count; ++i) {
      if (n[i] == 0) continue;
      const cudalaunch::ChunkedSum plan = cudalaunch::PlanChunkedSum(n[i]);
      ANNEAL_LAUNCH_T(t[i], SumSquaresChunks, plan.blocks(), plan.threads, d.stream, plan, g[i], partials + first[i]);
    }
  }
  std::vector<double> host(first[count]);
  ANNEAL_CUDA_CHECK(cudaMemcpyAsync(host.data(), partials, host.size() * sizeof(double), cudaMemcpyDeviceToHost, d.stream));
  ANNEAL_CUDA_CHECK(cudaStreamSynchronize(d.stream));
  for (size_t i = 0; i < count; ++i) {
    for (size_t b = first[i]; b < first[i + 1]; ++b) out[i] += host[b];  // block order, as SumSquares
  }
  return Status::Ok();
}

Status EmbeddingForward(const Device1D& d, Elem t, void* out, const int32_t* tokens, const void* wte, const void* wpe,
                        int64_t B, int64_t T, int64_t C) {
  if (B * T * C == 0) return Status::Ok();
  ANNEAL_LAUNCH_T(t, EmbedForward, GridFor(B * T * C, d.sms), kThreads, d.stream, B * T, T, C, out, tokens, wte, wpe);
  return Status::Ok();
}

Status EmbeddingBackward(const Device1D& d, Elem t, void* dwte, void* dwpe, const void* dout, const int32_t* tokens,
                         int64_t B, int64_t T, int64_t C, Scratch& scratch) {
  if (B * T == 0) return Status::Ok();
  ANNEAL_LAUNCH_T(t, PositionGrad, GridFor(T * C, d.sms), kThreads, d.stream, B * T, T, C, dwpe, dout);
  return TokenGrads(d, t, dwte, dout, tokens, B * T, C, 0, INT32_MAX, scratch);
}

Status VocabEmbeddingForward(const Device1D& d, Elem t, void* rows, const int32_t* tokens, const void* wte_slice,
                             int64_t N, int64_t C, int64_t Vl, int64_t v0) {
  if (N * C == 0) return Status::Ok();
  ANNEAL_LAUNCH_T(t, VocabEmbedForward, GridFor(N * C, d.sms), kThreads, d.stream, N, C, rows, tokens, wte_slice, Vl, v0);
  return Status::Ok();
}

Status VocabEmbeddingBackward(const Device1D& d, Elem t, void* dwte_slice, void* dwpe, const void* dall,
                              const int32_t* tokens, int64_t N, int64_t C, int64_t Vl, int64_t v0, int T,
                              Scratch& scratch) {
  if (N == 0) return Status::Ok();
  if (dwpe) {  // null: no position embedding (rotary families)
    ANNEAL_LAUNCH_T(t, PositionGrad, GridFor(static_cast<int64_t>(T) * C, d.sms), kThreads, d.stream, N,
                    static_cast<int64_t>(T), C, dwpe, dall);
  }
  return TokenGrads(d, t, dwte_slice, dall, tokens, N, C, v0, v0 + Vl, scratch);
}

Status AddPositions(const Device1D& d, Elem t, void* out, const void* wpe, int64_t R, int64_t C, int64_t row0, int T) {
  if (R * C == 0) return Status::Ok();
  ANNEAL_LAUNCH_T(t, AddPositionsKernel, GridFor(R * C, d.sms), kThreads, d.stream, R, C, out, wpe, row0, T);
  return Status::Ok();
}

Status StridedCopy(const Device1D& d, size_t elem_bytes, void* dst, const int64_t* dst_strides, const void* src,
                   const int64_t* src_strides, const int64_t* shape, int ndim) {
  if (ndim < 1 || ndim > 4) return Internal("StridedCopy: " + std::to_string(ndim) + " dimensions (at most 4)");
  Strides4 s{};
  s.ndim = ndim;
  int64_t n = 1;
  for (int k = 0; k < ndim; ++k) {
    s.shape[k] = shape[k];
    s.dst[k] = dst_strides[k];
    s.src[k] = src_strides[k];
    n *= shape[k];
  }
  if (n == 0) return Status::Ok();
  const uint32_t grid = GridFor(n, d.sms);
  if (elem_bytes == 2) {
    StridedCopyKernel<uint16_t><<<grid, kThreads, 0, d.stream>>>(n, s, dst, src);
  } else if (elem_bytes == 4) {
    StridedCopyKernel<uint32_t><<<grid, kThreads, 0, d.stream>>>(n, s, dst, src);
  } else if (elem_bytes == 8) {
    StridedCopyKernel<uint64_t><<<grid, kThreads, 0, d.stream>>>(n, s, dst, src);
  } else {
    return Internal("StridedCopy of " + std::to_string(elem_bytes) + "-byte elements");
  }
  ANNEAL_CUDA_LAUNCHED("StridedCopyKernel");
  return Status::Ok();
}

Status SplitHeads(const Device1D& d, Elem t, void* dst, const void* src, int64_t B, int64_t T, int64_t C, int H) {
  ANNEAL_LAUNCH_T(t, HeadsKernel, GridFor(B * T * C, d.sms), kThreads, d.stream, B, T, C, H, dst, src, true);
  return Status::Ok();
}

Status MergeHeads(const Device1D& d, Elem t, void* dst, const void* src, int64_t B, int64_t T, int64_t C, int H) {
  ANNEAL_LAUNCH_T(t, HeadsKernel, GridFor(B * T * C, d.sms), kThreads, d.stream, B, T, C, H, dst, src, false);
  return Status::Ok();
}

Status CausalSoftmax(const Device1D& d, Elem t, void* scores, float* lse, int64_t BH, int64_t T, float scale) {
  ANNEAL_LAUNCH_T(t, CausalSoftmaxRows, static_cast<uint32_t>(BH * T), kThreads, d.stream, scores, lse, T, scale);
  return Status::Ok();
}

Status SoftmaxBackward(const Device1D& d, Elem t, void* dp, const void* scores, const float* lse, const void* dout_h,
                       const void* out_h, int64_t BH, int64_t T, int64_t hs, float scale, void* probs) {
  ANNEAL_LAUNCH_T(t, SoftmaxBackwardRows, static_cast<uint32_t>(BH * T), kThreads, d.stream, dp, scores, lse, dout_h,
                  out_h, T, hs, scale, probs);
  return Status::Ok();
}

Status AttentionDecode(const Device1D& d, Elem t, void* out, const void* q, const void* kcache, int64_t kstride,
                       const void* vcache, int64_t vstride, int64_t rows, int64_t C, int H, float* scores, int Hkv) {
  const int64_t hs = C / H, group = H / (Hkv > 0 ? Hkv : H);
  for (int64_t h = 0; h < H; ++h) {  // heads in order, sharing the scores scratch
    ANNEAL_LAUNCH_T(t, DecodeHead, 1u, kThreads, d.stream, out, q, kcache, kstride, vcache, vstride, rows, hs, h,
                    h / group, scores);
  }
  return Status::Ok();
}

Status ExpandKvHeads(const Device1D& d, Elem t, void* dst, const void* src, int64_t B, int64_t T, int64_t hs, int H,
                     int Hkv) {
  ANNEAL_LAUNCH_T(t, ExpandKvHeadsKernel, GridFor(B * T * H * hs, d.sms), kThreads, d.stream, B, T, hs, H, H / Hkv, dst, src);
  return Status::Ok();
}

Status SumKvHeads(const Device1D& d, Elem t, void* dst, const void* src, int64_t B, int64_t T, int64_t hs, int H,
                  int Hkv) {
  ANNEAL_LAUNCH_T(t, SumKvHeadsKernel, GridFor(B * T * Hkv * hs, d.sms), kThreads, d.stream, B, T, hs, H, H / Hkv, dst, src);
  return Status::Ok();
}

Status RmsNormForward(const Device1D& d, Elem t, void* out, float* rstd, const void* inp, const void* w, int64_t N,
                      int64_t C, float eps) {
  if (N == 0) return Status::Ok();
  cudalaunch::Rows r;
  r.rows = N;
  r.cols = C;
  ANNEAL_LAUNCH_T(t, RmsForward, r.blocks(), r.threads(), d.stream, r, out, rstd, inp, w, eps);
  return Status::Ok();
}

Status RmsNormBackward(const Device1D& d, Elem t, void* dinp, void* dw, const void* dout, const void* inp,
                       const void* w, const float* rstd, int64_t N, int64_t C, Scratch& scratch) {
  if (N == 0) return Status::Ok();
  cudalaunch::Rows r;
  r.rows = N;
  r.cols = C;
  ANNEAL_LAUNCH_T(t, RmsBackwardRows, r.blocks(), r.threads(), d.stream, r, dinp, dout, inp, w, rstd);
  return ColumnSumsInto(d, t, dw, nullptr, dout, inp, nullptr, rstd, N, C, scratch);
}

Status Rotary(const Device1D& d, Elem t, void* x, const float* cos_t, const float* sin_t, int64_t B, int64_t T,
              int64_t H, int64_t hs, bool inverse) {
  if (B * T * H == 0) return Status::Ok();
  ANNEAL_LAUNCH_T(t, RotaryKernel, GridFor(B * T * H * (hs / 2), d.sms), kThreads, d.stream, B * T, T, H, hs, x, cos_t,
                  sin_t, inverse ? -1.0f : 1.0f);
  return Status::Ok();
}

}  // namespace anneal::cuda
