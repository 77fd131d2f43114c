// Attention path 2 (kernels/cuda/flash_attention.h): fused causal flash attention, forward and a
// deterministic backward, bf16 on tensor cores (mma.sync m16n8k16, portable to sm_80) and f32 on CUDA
// cores. Every block runs one body per (batch*head, outer tile) of a cudaflash::TilePlan; the plans,
// the fragment layouts and the per-row math are the header's, checked on the host by
// tests/kernels/cuda_flash_plan_test.cc.
#include "kernels/cuda/flash_attention.h"

#include <cuda_runtime.h>

#include <cmath>
#include <initializer_list>
#include <string>

#include "kernels/cuda/check.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/math.cuh"

namespace anneal::cuda {
namespace {

using cudaflash::HeadLayout;
using cudaflash::TilePlan;
constexpr int kThreads = 128;  // 4 warps: a bf16 block's 64 rows are 16 per warp; f32: 4 threads per row of 32

struct FwdArgs {
  void* out;
  float* lse;
  const void *q, *k, *v;
  HeadLayout lay;
  float scale_log2;  // scale * log2(e)
};

struct BwdArgs {
  void *dq, *dk, *dv;
  const void *dout, *q, *k, *v;
  const float *lse, *D;
  HeadLayout lay;
  float scale, scale_log2;
};

__device__ __forceinline__ float ShflXor(float v, int m) {
  return __shfl_xor_sync(0xffffffffu, v, m);
}

// ---- sm_80 primitives: cp.async, ldmatrix, mma.sync, bf16x2 packing ----

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// 16 bytes global -> shared, asynchronously; zeros when !valid (src is then not read, but is a valid address).
__device__ __forceinline__ void CpAsync16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SmemAddr(dst)), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

__device__ __forceinline__ void Ldm4(uint32_t (&r)[4], const uint16_t* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddr(p))
               : "memory");
}
__device__ __forceinline__ void Ldm4T(uint32_t (&r)[4], const uint16_t* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddr(p))
               : "memory");
}
// c (16 x 8 fp32) += a (16 x 16 bf16) * b (16 x 8 bf16).
__device__ __forceinline__ void Mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// Two floats as bf16x2, rounded to nearest even: lo in the low half (the lower column).
__device__ __forceinline__ uint32_t PackBf16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));  // d = {first operand high, second low}
  return r;
}

// ---- warp-level tile products (the fragment layouts of flash_attention.h) ----

template <int NT>
__device__ __forceinline__ void Zero(float (&acc)[NT][4]) {
#pragma unroll
  for (int n = 0; n < NT; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
}

// acc (16 x 8NT) += A B^T: A is 16 rows x 16KT columns at a, B is 8NT rows x 16KT columns at b, both
// row-major in shared memory with row stride `stride` elements (Q K^T, K Q^T, dO V^T, V dO^T).
template <int NT, int KT>
__device__ __forceinline__ void GemmNT(float (&acc)[NT][4], const uint16_t* a, const uint16_t* b, int stride,
                                       int lane) {
  static_assert(NT % 2 == 0, "B comes in pairs of n8 tiles");
  const uint16_t* pa = a + cudaflash::LdmARow(lane) * stride + cudaflash::LdmACol(lane);
  const uint16_t* pb = b + cudaflash::LdmBRow(lane) * stride + cudaflash::LdmBCol(lane);
#pragma unroll
  for (int kt = 0; kt < KT; ++kt) {
    uint32_t af[4];
    Ldm4(af, pa + kt * 16);
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      uint32_t bf[4];
      Ldm4(bf, pb + np * 16 * stride + kt * 16);
      Mma(acc[2 * np], af, bf[0], bf[1]);
      Mma(acc[2 * np + 1], af, bf[2], bf[3]);
    }
  }
}

// acc (16 x 8NT) += A B: A in registers (KT fragments of 16 x 16), B 16KT rows x 8NT columns at b,
// row-major in shared memory (P V, P^T dO, dS^T Q, dS K).
template <int NT, int KT>
__device__ __forceinline__ void GemmRegNN(float (&acc)[NT][4], const uint32_t (&a)[KT][4], const uint16_t* b,
                                          int stride, int lane) {
  static_assert(NT % 2 == 0, "B comes in pairs of n8 tiles");
  const uint16_t* pb = b + cudaflash::LdmBTRow(lane) * stride + cudaflash::LdmBTCol(lane);
#pragma unroll
  for (int kt = 0; kt < KT; ++kt) {
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      uint32_t bf[4];
      Ldm4T(bf, pb + kt * 16 * stride + np * 16);
      Mma(acc[2 * np], a[kt], bf[0], bf[1]);
      Mma(acc[2 * np + 1], a[kt], bf[2], bf[3]);
    }
  }
}

// Accumulators (16 x 16KT) as the A fragments (bf16) of the next product.
template <int KT>
__device__ __forceinline__ void AccToA(uint32_t (&a)[KT][4], const float (&c)[2 * KT][4]) {
#pragma unroll
  for (int j = 0; j < KT; ++j) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const float* src = c[cudaflash::AccTileOfA(j, r)] + cudaflash::AccElemOfA(r);
      a[j][r] = PackBf16x2(src[0], src[1]);
    }
  }
}

// rows [r0, r0 + ROWS) of a head's (T, hs) slice at g (row t at g + t C) into s (row stride HS + 8,
// against ldmatrix bank conflicts); rows past T are zeros.
template <int ROWS, int HS>
__device__ __forceinline__ void LoadTileBf16(uint16_t* s, const uint16_t* g, int64_t r0, int64_t T, int64_t C) {
  constexpr int kChunks = HS / 8;  // 16-byte pieces of a row
  for (int id = threadIdx.x; id < ROWS * kChunks; id += kThreads) {
    const int r = id / kChunks, c = id % kChunks;
    const int64_t t = r0 + r;
    const bool valid = t < T;
    CpAsync16(s + r * (HS + 8) + c * 8, g + (valid ? t : T - 1) * C + c * 8, valid);
  }
}

// A query tile's log-sum-exps (times log2(e); +inf past T, so its probabilities are 0) and D (0 past T).
template <int ROWS>
__device__ __forceinline__ void LoadRowStats(float* sL, float* sD, const float* lse, const float* D, int64_t r0,
                                             int64_t T) {
  for (int r = threadIdx.x; r < ROWS; r += kThreads) {
    const int64_t t = r0 + r;
    sL[r] = t < T ? lse[t] * cudaflash::kLog2e : INFINITY;
    sD[r] = t < T ? D[t] : 0.0f;
  }
}

// Rows [row0, row0 + 16) of the warp's accumulators times mul, rounded to bf16, into g (row t at
// g + t C); rows past T are not written.
template <int OT>
__device__ __forceinline__ void StoreAccBf16(uint16_t* g, const float (&acc)[OT][4], float mul, int64_t row0, int64_t T,
                                             int64_t C, int lane) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t row = row0 + cudaflash::MmaCRow(lane, 2 * r);
    if (row >= T) continue;
    uint16_t* p = g + row * C + cudaflash::MmaCCol(lane, 0);
#pragma unroll
    for (int ot = 0; ot < OT; ++ot) {
      const uint32_t lo = cudamath::RoundBf16(acc[ot][2 * r] * mul), hi = cudamath::RoundBf16(acc[ot][2 * r + 1] * mul);
      *reinterpret_cast<uint32_t*>(p + ot * 8) = lo | (hi << 16);
    }
  }
}

// ---- bf16 forward ----

// One key tile of the online softmax for the warp's 16 query rows (this lane's two: m, l per row):
// s (raw scores, -inf where masked) becomes exp2(s * scale_log2 - max); l and the output rescale.
template <int NT, int OT>
__device__ __forceinline__ void OnlineSoftmaxTile(float (&s)[NT][4], float (&m)[2], float (&l)[2], float (&o)[OT][4],
                                                  float scale_log2) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float mx = -INFINITY;
#pragma unroll
    for (int n = 0; n < NT; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
    mx = fmaxf(mx, ShflXor(mx, 1));  // the row's four lanes
    mx = fmaxf(mx, ShflXor(mx, 2));
    const float m_new = fmaxf(m[r], mx * scale_log2);
    const float base = cudaflash::FlashBase(m_new), alpha = cudaflash::FlashRescale(m[r], m_new);
    float rs = 0.0f;
#pragma unroll
    for (int n = 0; n < NT; ++n) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float& x = s[n][2 * r + h];
        x = exp2f(fmaf(x, scale_log2, -base));
        rs += x;
      }
    }
    l[r] = l[r] * alpha + rs;
    m[r] = m_new;
#pragma unroll
    for (int ot = 0; ot < OT; ++ot) {
      o[ot][2 * r] *= alpha;
      o[ot][2 * r + 1] *= alpha;
    }
  }
}

// -inf at the keys after their query: rows from q_row0 (queries), columns from k_col0 (keys).
template <int NT>
__device__ __forceinline__ void MaskAfterDiagonal(float (&s)[NT][4], int64_t q_row0, int64_t k_col0, int lane) {
#pragma unroll
  for (int n = 0; n < NT; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (k_col0 + n * 8 + cudaflash::MmaCCol(lane, e) > q_row0 + cudaflash::MmaCRow(lane, e)) s[n][e] = -INFINITY;
    }
  }
}

template <int OT>
__device__ __forceinline__ void FinishForwardBf16(const FwdArgs& a, float (&acc)[OT][4], const float (&m)[2],
                                                  float (&l)[2], int64_t bh, int64_t T, int64_t head, int64_t row0,
                                                  int lane) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += ShflXor(l[r], 1);  // the lanes' partial sums of the row, in a fixed order
    l[r] += ShflXor(l[r], 2);
  }
#pragma unroll
  for (int ot = 0; ot < OT; ++ot) {
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[ot][e] /= l[e / 2];
  }
  StoreAccBf16<OT>(static_cast<uint16_t*>(a.out) + head, acc, 1.0f, row0, T, a.lay.C, lane);
  if (lane % 4 != 0) return;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t row = row0 + cudaflash::MmaCRow(lane, 2 * r);
    if (row < T) a.lse[bh * T + row] = cudaflash::FlashLse(m[r], l[r]);
  }
}

// Q (64 x HS) stays in shared memory; K_j and V_j alternate with the products: V_j loads during
// Q K_j^T and the softmax, K_{j+1} during P V_j.
template <int HS>
struct ForwardBf16 {
  static constexpr int R = cudaflash::kBf16Outer, S = HS + 8, NT = R / 8, KT = HS / 16, OT = HS / 8;
  static_assert(cudaflash::Bf16Inner(cudaflash::Pass::kForward, HS) == R, "square forward tiles");
  static constexpr size_t kSmem = 3u * R * S * sizeof(uint16_t);

  static __device__ __forceinline__ void Run(const TilePlan& plan, const FwdArgs& a, int64_t bh, int64_t o,
                                             unsigned char* smem) {
    uint16_t* sQ = reinterpret_cast<uint16_t*>(smem);
    uint16_t *sK = sQ + R * S, *sV = sQ + 2 * R * S;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t T = plan.T, q0 = plan.Row0(o), head = a.lay.Query(bh), C = a.lay.C, Ckv = a.lay.Ckv;
    const uint16_t* gk = static_cast<const uint16_t*>(a.k) + a.lay.KvOfQuery(bh);
    const uint16_t* gv = static_cast<const uint16_t*>(a.v) + a.lay.KvOfQuery(bh);
    const int64_t jb = plan.InnerBegin(o), je = plan.InnerEnd(o);
    LoadTileBf16<R, HS>(sQ, static_cast<const uint16_t*>(a.q) + head, q0, T, C);
    LoadTileBf16<R, HS>(sK, gk, jb * R, T, Ckv);
    CpAsyncCommit();
    float acc[OT][4];
    Zero(acc);
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    for (int64_t j = jb; j < je; ++j) {
      CpAsyncWait();
      __syncthreads();  // K_j (and Q) landed for every thread; every warp is done reading V_{j-1}
      LoadTileBf16<R, HS>(sV, gv, j * R, T, Ckv);
      CpAsyncCommit();
      float s[NT][4];
      Zero(s);
      GemmNT<NT, KT>(s, sQ + warp * 16 * S, sK, S, lane);
      if (plan.Masked(o, j)) MaskAfterDiagonal<NT>(s, q0 + warp * 16, j * R, lane);
      OnlineSoftmaxTile<NT, OT>(s, m, l, acc, a.scale_log2);
      uint32_t p[NT / 2][4];
      AccToA<NT / 2>(p, s);
      CpAsyncWait();
      __syncthreads();  // V_j landed; every warp is done reading K_j
      if (j + 1 < je) {
        LoadTileBf16<R, HS>(sK, gk, (j + 1) * R, T, Ckv);
        CpAsyncCommit();
      }
      GemmRegNN<OT, NT / 2>(acc, p, sV, S, lane);
    }
    FinishForwardBf16<OT>(a, acc, m, l, bh, T, head, q0 + warp * 16, lane);
  }
};

// ---- bf16 backward ----

// dK, dV of 64 keys (16 per warp) over query tiles of BQ: S^T = K Q^T, P^T, dV += P^T dO,
// dP^T = V dO^T, dS^T = P^T (dP^T - D), dK += dS^T Q; dK scaled once at the end.
template <int HS>
struct KeyGradsBf16 {
  static constexpr int R = cudaflash::kBf16Outer, BQ = cudaflash::Bf16Inner(cudaflash::Pass::kKeyGrads, HS);
  static constexpr int S = HS + 8, NQ = BQ / 8, KQ = BQ / 16, KT = HS / 16, OT = HS / 8;
  static constexpr size_t kSmem = (2u * R + 2u * BQ) * S * sizeof(uint16_t) + 2u * BQ * sizeof(float);

  // P^T in place of S^T: rows are this warp's keys from key_row0, columns queries from qi0.
  static __device__ __forceinline__ void Probs(float (&st)[NQ][4], const float* sL, float scale_log2, bool masked,
                                               int64_t key_row0, int64_t qi0, int lane) {
#pragma unroll
    for (int n = 0; n < NQ; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int c = n * 8 + cudaflash::MmaCCol(lane, e);
        const bool hidden = masked && key_row0 + cudaflash::MmaCRow(lane, e) > qi0 + c;
        st[n][e] = hidden ? 0.0f : cudaflash::FlashProb(st[n][e], scale_log2, sL[c]);
      }
    }
  }

  // bkv: (batch, key/value head); the group's query heads in order, each over its query tiles.
  static __device__ __forceinline__ void Run(const TilePlan& plan, const BwdArgs& a, int64_t bkv, int64_t o,
                                             unsigned char* smem) {
    uint16_t* sK = reinterpret_cast<uint16_t*>(smem);
    uint16_t *sV = sK + R * S, *sQ = sV + R * S, *sO = sQ + BQ * S;  // sO: dO
    float* sL = reinterpret_cast<float*>(sO + BQ * S);
    float* sD = sL + BQ;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t T = plan.T, k0 = plan.Row0(o), head = a.lay.Kv(bkv), C = a.lay.C, Ckv = a.lay.Ckv;
    const int64_t key_row0 = k0 + warp * 16, bh0 = a.lay.GroupQuery(bkv, 0);  // query heads bh0, bh0 + 1, ...
    LoadTileBf16<R, HS>(sK, static_cast<const uint16_t*>(a.k) + head, k0, T, Ckv);
    LoadTileBf16<R, HS>(sV, static_cast<const uint16_t*>(a.v) + head, k0, T, Ckv);
    CpAsyncCommit();
    float dk[OT][4], dv[OT][4];
    Zero(dk);
    Zero(dv);
    // The group's query heads are consecutive columns of one batch row: each next one hs further in
    // q and dout, T further in lse and D.
    const uint16_t* gq = static_cast<const uint16_t*>(a.q) + a.lay.Query(bh0);
    const uint16_t* gdo = static_cast<const uint16_t*>(a.dout) + a.lay.Query(bh0);
    const float *lse = a.lse + bh0 * T, *D = a.D + bh0 * T;
    for (int g = 0; g < a.lay.Group(); ++g, gq += HS, gdo += HS, lse += T, D += T) {
      for (int64_t i = plan.InnerBegin(o); i < plan.InnerEnd(o); ++i) {
        const int64_t qi0 = i * BQ;
        __syncthreads();  // every warp is done reading the previous Q, dO, L, D
        LoadTileBf16<BQ, HS>(sQ, gq, qi0, T, C);
        LoadTileBf16<BQ, HS>(sO, gdo, qi0, T, C);
        CpAsyncCommit();
        LoadRowStats<BQ>(sL, sD, lse, D, qi0, T);
        CpAsyncWait();
        __syncthreads();
        float st[NQ][4];
        Zero(st);
        GemmNT<NQ, KT>(st, sK + warp * 16 * S, sQ, S, lane);  // S^T: 16 keys x BQ queries
        Probs(st, sL, a.scale_log2, plan.Masked(o, i), key_row0, qi0, lane);
        uint32_t pa[KQ][4];
        AccToA<KQ>(pa, st);
        GemmRegNN<OT, KQ>(dv, pa, sO, S, lane);  // dV += P^T dO
        float dpt[NQ][4];
        Zero(dpt);
        GemmNT<NQ, KT>(dpt, sV + warp * 16 * S, sO, S, lane);  // dP^T = V dO^T
#pragma unroll
        for (int n = 0; n < NQ; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) dpt[n][e] = st[n][e] * (dpt[n][e] - sD[n * 8 + cudaflash::MmaCCol(lane, e)]);
        }
        AccToA<KQ>(pa, dpt);
        GemmRegNN<OT, KQ>(dk, pa, sQ, S, lane);  // dK += dS^T Q
      }
    }
    StoreAccBf16<OT>(static_cast<uint16_t*>(a.dk) + head, dk, a.scale, key_row0, T, Ckv, lane);
    StoreAccBf16<OT>(static_cast<uint16_t*>(a.dv) + head, dv, 1.0f, key_row0, T, Ckv, lane);
  }
};

// dQ of 64 queries (16 per warp) over key tiles of BK: S = Q K^T, P, dP = dO V^T, dS = P (dP - D),
// dQ += dS K; scaled once at the end.
template <int HS>
struct QueryGradsBf16 {
  static constexpr int R = cudaflash::kBf16Outer, BK = cudaflash::Bf16Inner(cudaflash::Pass::kQueryGrads, HS);
  static constexpr int S = HS + 8, NK = BK / 8, KK = BK / 16, KT = HS / 16, OT = HS / 8;
  static constexpr size_t kSmem = (2u * R + 2u * BK) * S * sizeof(uint16_t);

  static __device__ __forceinline__ void Run(const TilePlan& plan, const BwdArgs& a, int64_t bh, int64_t o,
                                             unsigned char* smem) {
    uint16_t* sQ = reinterpret_cast<uint16_t*>(smem);
    uint16_t *sO = sQ + R * S, *sK = sO + R * S, *sV = sK + BK * S;  // sO: dO
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t T = plan.T, row0 = plan.Row0(o) + warp * 16, head = a.lay.Query(bh), C = a.lay.C, Ckv = a.lay.Ckv;
    const uint16_t* gk = static_cast<const uint16_t*>(a.k) + a.lay.KvOfQuery(bh);
    const uint16_t* gv = static_cast<const uint16_t*>(a.v) + a.lay.KvOfQuery(bh);
    LoadTileBf16<R, HS>(sQ, static_cast<const uint16_t*>(a.q) + head, plan.Row0(o), T, C);
    LoadTileBf16<R, HS>(sO, static_cast<const uint16_t*>(a.dout) + head, plan.Row0(o), T, C);
    CpAsyncCommit();
    float L[2], Dr[2];  // this lane's two rows: lse * log2(e) (+inf past T) and D
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int64_t t = row0 + cudaflash::MmaCRow(lane, 2 * r);
      L[r] = t < T ? a.lse[bh * T + t] * cudaflash::kLog2e : INFINITY;
      Dr[r] = t < T ? a.D[bh * T + t] : 0.0f;
    }
    float dq[OT][4];
    Zero(dq);
    for (int64_t j = plan.InnerBegin(o); j < plan.InnerEnd(o); ++j) {
      __syncthreads();  // every warp is done reading K_{j-1}, V_{j-1}
      LoadTileBf16<BK, HS>(sK, gk, j * BK, T, Ckv);
      LoadTileBf16<BK, HS>(sV, gv, j * BK, T, Ckv);
      CpAsyncCommit();
      CpAsyncWait();
      __syncthreads();
      float s[NK][4], dp[NK][4];
      Zero(s);
      Zero(dp);
      GemmNT<NK, KT>(s, sQ + warp * 16 * S, sK, S, lane);   // S
      GemmNT<NK, KT>(dp, sO + warp * 16 * S, sV, S, lane);  // dP = dO V^T
      const bool masked = plan.Masked(o, j);
#pragma unroll
      for (int n = 0; n < NK; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const bool hidden =
              masked && j * BK + n * 8 + cudaflash::MmaCCol(lane, e) > row0 + cudaflash::MmaCRow(lane, e);
          const float p = hidden ? 0.0f : cudaflash::FlashProb(s[n][e], a.scale_log2, L[e / 2]);
          s[n][e] = p * (dp[n][e] - Dr[e / 2]);  // dS
        }
      }
      uint32_t ds[KK][4];
      AccToA<KK>(ds, s);
      GemmRegNN<OT, KK>(dq, ds, sK, S, lane);  // dQ += dS K
    }
    StoreAccBf16<OT>(static_cast<uint16_t*>(a.dq) + head, dq, a.scale, row0, T, C, lane);
  }
};

// ---- f32 (CUDA cores): 32 rows per block, four threads per row, thread `sub` holding columns
// sub, sub + 4, ... of its row; dot products summed by the four in a fixed butterfly ----

template <int U>
__device__ __forceinline__ float QuadDot(const float (&x)[U], const float* row, int sub) {
  float d = 0.0f;
#pragma unroll
  for (int u = 0; u < U; ++u) d = fmaf(x[u], row[sub + 4 * u], d);
  d += ShflXor(d, 1);
  d += ShflXor(d, 2);
  return d;
}

template <int U>
__device__ __forceinline__ void LoadSlice(float (&x)[U], const float* g, int64_t t, int64_t T, int64_t C, int sub) {
#pragma unroll
  for (int u = 0; u < U; ++u) x[u] = t < T ? g[t * C + sub + 4 * u] : 0.0f;
}

template <int U>
__device__ __forceinline__ void StoreSlice(float* g, const float (&x)[U], float mul, int64_t t, int64_t T, int64_t C,
                                           int sub) {
  if (t >= T) return;
#pragma unroll
  for (int u = 0; u < U; ++u) g[t * C + sub + 4 * u] = x[u] * mul;
}

template <int ROWS, int HS>
__device__ __forceinline__ void LoadTileF32(float* s, const float* g, int64_t r0, int64_t T, int64_t C) {
  for (int id = threadIdx.x; id < ROWS * HS; id += kThreads) {
    const int64_t t = r0 + id / HS;
    s[id] = t < T ? g[t * C + id % HS] : 0.0f;
  }
}

template <int HS>
struct ForwardF32 {
  static constexpr int R = cudaflash::kF32Tile, U = HS / 4;
  static constexpr size_t kSmem = 2u * R * HS * sizeof(float);

  static __device__ __forceinline__ void Run(const TilePlan& plan, const FwdArgs& a, int64_t bh, int64_t o,
                                             unsigned char* smem) {
    float* sK = reinterpret_cast<float*>(smem);
    float* sV = sK + R * HS;
    const int sub = threadIdx.x % 4;
    const int64_t T = plan.T, q = plan.Row0(o) + threadIdx.x / 4, head = a.lay.Query(bh), kv = a.lay.KvOfQuery(bh);
    const float *gk = static_cast<const float*>(a.k) + kv, *gv = static_cast<const float*>(a.v) + kv;
    float qr[U], acc[U];
    LoadSlice<U>(qr, static_cast<const float*>(a.q) + head, q, T, a.lay.C, sub);
#pragma unroll
    for (int u = 0; u < U; ++u) acc[u] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int64_t j = plan.InnerBegin(o); j < plan.InnerEnd(o); ++j) {
      __syncthreads();  // every thread is done reading the previous K, V
      LoadTileF32<R, HS>(sK, gk, j * R, T, a.lay.Ckv);
      LoadTileF32<R, HS>(sV, gv, j * R, T, a.lay.Ckv);
      __syncthreads();
      const bool masked = plan.Masked(o, j);
      float s[R], mx = -INFINITY;
#pragma unroll
      for (int kk = 0; kk < R; ++kk) {
        s[kk] = QuadDot<U>(qr, sK + kk * HS, sub);
        if (masked && j * R + kk > q) s[kk] = -INFINITY;
        mx = fmaxf(mx, s[kk]);
      }
      const float m_new = fmaxf(m, mx * a.scale_log2);
      const float base = cudaflash::FlashBase(m_new), alpha = cudaflash::FlashRescale(m, m_new);
      float rs = 0.0f;
#pragma unroll
      for (int kk = 0; kk < R; ++kk) {
        s[kk] = exp2f(fmaf(s[kk], a.scale_log2, -base));
        rs += s[kk];
      }
      l = l * alpha + rs;
      m = m_new;
#pragma unroll
      for (int u = 0; u < U; ++u) acc[u] *= alpha;
#pragma unroll
      for (int kk = 0; kk < R; ++kk) {
#pragma unroll
        for (int u = 0; u < U; ++u) acc[u] = fmaf(s[kk], sV[kk * HS + sub + 4 * u], acc[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc[u] /= l;
    StoreSlice<U>(static_cast<float*>(a.out) + head, acc, 1.0f, q, T, a.lay.C, sub);
    if (sub == 0 && q < T) a.lse[bh * T + q] = cudaflash::FlashLse(m, l);
  }
};

template <int HS>
struct KeyGradsF32 {
  static constexpr int R = cudaflash::kF32Tile, U = HS / 4;
  static constexpr size_t kSmem = 2u * R * HS * sizeof(float) + 2u * R * sizeof(float);

  // One query tile (queries from qi0 of query head bhq) into this thread's slice of dK and dV.
  static __device__ __forceinline__ void QueryTile(const BwdArgs& a, int64_t bhq, int64_t qi0, bool masked, int64_t key,
                                                   const float (&kr)[U], const float (&vr)[U], float (&dk)[U],
                                                   float (&dv)[U], unsigned char* smem) {
    float* sQ = reinterpret_cast<float*>(smem);
    float *sO = sQ + R * HS, *sL = sO + R * HS, *sD = sL + R;  // sO: dO
    const int sub = threadIdx.x % 4;
    const int64_t T = a.lay.T, head = a.lay.Query(bhq);
    __syncthreads();  // every thread is done reading the previous Q, dO, L, D
    LoadTileF32<R, HS>(sQ, static_cast<const float*>(a.q) + head, qi0, T, a.lay.C);
    LoadTileF32<R, HS>(sO, static_cast<const float*>(a.dout) + head, qi0, T, a.lay.C);
    LoadRowStats<R>(sL, sD, a.lse + bhq * T, a.D + bhq * T, qi0, T);
    __syncthreads();
    for (int qq = 0; qq < R; ++qq) {
      const float s = QuadDot<U>(kr, sQ + qq * HS, sub);
      const float p = masked && key > qi0 + qq ? 0.0f : cudaflash::FlashProb(s, a.scale_log2, sL[qq]);
      const float ds = p * (QuadDot<U>(vr, sO + qq * HS, sub) - sD[qq]);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        dv[u] = fmaf(p, sO[qq * HS + sub + 4 * u], dv[u]);
        dk[u] = fmaf(ds, sQ[qq * HS + sub + 4 * u], dk[u]);
      }
    }
  }

  // bkv: (batch, key/value head); the group's query heads in order, each over its query tiles.
  static __device__ __forceinline__ void Run(const TilePlan& plan, const BwdArgs& a, int64_t bkv, int64_t o,
                                             unsigned char* smem) {
    const int sub = threadIdx.x % 4;
    const int64_t T = plan.T, key = plan.Row0(o) + threadIdx.x / 4, head = a.lay.Kv(bkv), Ckv = a.lay.Ckv;
    float kr[U], vr[U], dk[U], dv[U];
    LoadSlice<U>(kr, static_cast<const float*>(a.k) + head, key, T, Ckv, sub);
    LoadSlice<U>(vr, static_cast<const float*>(a.v) + head, key, T, Ckv, sub);
#pragma unroll
    for (int u = 0; u < U; ++u) dk[u] = dv[u] = 0.0f;
    for (int g = 0; g < a.lay.Group(); ++g) {
      const int64_t bhq = a.lay.GroupQuery(bkv, g);
      plan.VisitInner(o, [&](int64_t i, bool masked) { QueryTile(a, bhq, i * R, masked, key, kr, vr, dk, dv, smem); });
    }
    StoreSlice<U>(static_cast<float*>(a.dk) + head, dk, a.scale, key, T, Ckv, sub);
    StoreSlice<U>(static_cast<float*>(a.dv) + head, dv, 1.0f, key, T, Ckv, sub);
  }
};

template <int HS>
struct QueryGradsF32 {
  static constexpr int R = cudaflash::kF32Tile, U = HS / 4;
  static constexpr size_t kSmem = 2u * R * HS * sizeof(float);

  static __device__ __forceinline__ void Run(const TilePlan& plan, const BwdArgs& a, int64_t bh, int64_t o,
                                             unsigned char* smem) {
    float* sK = reinterpret_cast<float*>(smem);
    float* sV = sK + R * HS;
    const int sub = threadIdx.x % 4;
    const int64_t T = plan.T, q = plan.Row0(o) + threadIdx.x / 4, head = a.lay.Query(bh), kv = a.lay.KvOfQuery(bh);
    const float *gk = static_cast<const float*>(a.k) + kv, *gv = static_cast<const float*>(a.v) + kv;
    float qr[U], dor[U], dq[U];
    LoadSlice<U>(qr, static_cast<const float*>(a.q) + head, q, T, a.lay.C, sub);
    LoadSlice<U>(dor, static_cast<const float*>(a.dout) + head, q, T, a.lay.C, sub);
#pragma unroll
    for (int u = 0; u < U; ++u) dq[u] = 0.0f;
    const float L = q < T ? a.lse[bh * T + q] * cudaflash::kLog2e : INFINITY, D = q < T ? a.D[bh * T + q] : 0.0f;
    for (int64_t j = plan.InnerBegin(o); j < plan.InnerEnd(o); ++j) {
      __syncthreads();  // every thread is done reading the previous K, V
      LoadTileF32<R, HS>(sK, gk, j * R, T, a.lay.Ckv);
      LoadTileF32<R, HS>(sV, gv, j * R, T, a.lay.Ckv);
      __syncthreads();
      const bool masked = plan.Masked(o, j);
      for (int kk = 0; kk < R; ++kk) {
        const float s = QuadDot<U>(qr, sK + kk * HS, sub);
        const float p = masked && j * R + kk > q ? 0.0f : cudaflash::FlashProb(s, a.scale_log2, L);
        const float ds = p * (QuadDot<U>(dor, sV + kk * HS, sub) - D);
#pragma unroll
        for (int u = 0; u < U; ++u) dq[u] = fmaf(ds, sK[kk * HS + sub + 4 * u], dq[u]);
      }
    }
    StoreSlice<U>(static_cast<float*>(a.dq) + head, dq, a.scale, q, T, a.lay.C, sub);
  }
};

// ---- kernels and launches ----

// Block (x, y) runs Body for (batch*head) y, y + gridDim.y, ... of outer tile plan.OuterTile(x).
template <class Body, class Args>
__global__ void __launch_bounds__(kThreads) FlashBlocks(TilePlan plan, Args a) {
  extern __shared__ __align__(16) unsigned char flash_smem[];
  for (int64_t bh = blockIdx.y; bh < plan.bh; bh += gridDim.y) {
    Body::Run(plan, a, bh, plan.OuterTile(blockIdx.x), flash_smem);
    __syncthreads();  // the next (batch, head) reuses shared memory
  }
}

template <class Body, class Args>
Status Launch(const Device1D& d, const TilePlan& plan, const Args& a, const char* name) {
  constexpr size_t smem = Body::kSmem;
  if (smem > 48u * 1024u) {  // above the default: opt in (up to 227 KB on sm_90, 163 KB on sm_80)
    ANNEAL_CUDA_CHECK(cudaFuncSetAttribute(FlashBlocks<Body, Args>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem)));
  }
  FlashBlocks<Body, Args><<<dim3(plan.GridX(), plan.GridY()), kThreads, smem, d.stream>>>(plan, a);
  ANNEAL_CUDA_LAUNCHED(name);
  return Status::Ok();
}

struct ForwardOp {
  template <int HS>
  static Status Run(const Device1D& d, Elem t, const FwdArgs& a, int64_t B) {
    const bool bf16 = t == Elem::kBF16;
    const TilePlan plan = cudaflash::PlanFor(cudaflash::Pass::kForward, bf16, HS, B * a.lay.H, a.lay.T);
    return bf16 ? Launch<ForwardBf16<HS>>(d, plan, a, "FlashForwardBf16")
                : Launch<ForwardF32<HS>>(d, plan, a, "FlashForwardF32");
  }
};

struct BackwardOp {
  template <int HS>
  static Status Run(const Device1D& d, Elem t, const BwdArgs& a, int64_t B) {
    using cudaflash::Pass;
    const bool bf16 = t == Elem::kBF16;
    const TilePlan kv = cudaflash::PlanFor(Pass::kKeyGrads, bf16, HS, B * a.lay.Hkv, a.lay.T);  // per key/value head
    const TilePlan qg = cudaflash::PlanFor(Pass::kQueryGrads, bf16, HS, B * a.lay.H, a.lay.T);
    if (bf16) {
      ANNEAL_RETURN_IF_ERROR(Launch<KeyGradsBf16<HS>>(d, kv, a, "FlashKeyGradsBf16"));
      return Launch<QueryGradsBf16<HS>>(d, qg, a, "FlashQueryGradsBf16");
    }
    ANNEAL_RETURN_IF_ERROR(Launch<KeyGradsF32<HS>>(d, kv, a, "FlashKeyGradsF32"));
    return Launch<QueryGradsF32<HS>>(d, qg, a, "FlashQueryGradsF32");
  }
};

template <class Op, class Args>
Status ForHeadSize(int64_t hs, const Device1D& d, Elem t, const Args& a, int64_t B) {
  switch (hs) {
    case 32:
      return Op::template Run<32>(d, t, a, B);
    case 64:
      return Op::template Run<64>(d, t, a, B);
    case 80:
      return Op::template Run<80>(d, t, a, B);
    case 96:
      return Op::template Run<96>(d, t, a, B);
    case 128:
      return Op::template Run<128>(d, t, a, B);
    default:
      return Internal("flash attention has no kernel for head size " + std::to_string(hs));
  }
}

// What path 2 cannot take, as an Internal status naming it (the caller falls back to path 1).
Status CheckOperands(const char* op, Elem t, int64_t T, int64_t C, int H, int Hkv,
                     std::initializer_list<const void*> ptrs) {
  const std::string where = std::string("flash attention ") + op + ": ";
  if (H <= 0 || C % H != 0) {
    return Internal(where + "C = " + std::to_string(C) + " is not a multiple of H = " + std::to_string(H));
  }
  if (Hkv <= 0 || H % Hkv != 0) {
    return Internal(where + "H = " + std::to_string(H) + " query heads do not divide into Hkv = " +
                    std::to_string(Hkv) + " key/value heads");
  }
  const int64_t hs = C / H;
  if (!FlashAttentionSupports(hs)) {
    return Internal(where + "no kernel for head size " + std::to_string(hs) + " (C = " + std::to_string(C) +
                    ", H = " + std::to_string(H) + "; path 2 has 32, 64, 80, 96 and 128)");
  }
  if (T > (int64_t{1} << 30)) return Internal(where + "T = " + std::to_string(T) + " is over 2^30");
  if (t == Elem::kBF16) {
    for (const void* p : ptrs) {
      if (!cudalaunch::Aligned16(p)) return Internal(where + "a bf16 operand is not 16-byte aligned");
    }
  }
  return Status::Ok();
}

// D[(b h), t] = sum over the head's columns of dout * out (fp32): one warp per (b, t, h) row of hs.
template <class T>
__global__ void RowDots(cudalaunch::Rows rows, float* D, const void* dout, const void* out, int64_t T_, int H) {
  const int64_t r = rows.RowOf(blockIdx.x, threadIdx.x / 32);
  if (r < 0) return;
  const int64_t hs = rows.cols;
  float a = 0.0f;
  for (int64_t c = threadIdx.x % 32; c < hs; c += 32) {
    if constexpr (sizeof(T) == 2) {
      a += cudamath::WidenBf16(static_cast<const uint16_t*>(dout)[r * hs + c]) *
           cudamath::WidenBf16(static_cast<const uint16_t*>(out)[r * hs + c]);
    } else {
      a += static_cast<const float*>(dout)[r * hs + c] * static_cast<const float*>(out)[r * hs + c];
    }
  }
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) a += ShflXor(a, m);  // a fixed butterfly: every lane holds lane 0's sum
  if (threadIdx.x % 32 != 0) return;
  const int64_t bt = r / H, h = r % H;  // row r is (b, t, h): (b T + t) H + h
  D[(bt / T_ * H + h) * T_ + bt % T_] = a;
}

}  // namespace

size_t FlashBackwardScratchBytes(int64_t B, int64_t T, int H) {
  return static_cast<size_t>(B) * static_cast<size_t>(H) * static_cast<size_t>(T) * sizeof(float);
}

Status FlashAttentionForward(const Device1D& d, Elem t, void* out, float* lse, const void* q, const void* k,
                             const void* v, int64_t B, int64_t T, int64_t C, int H, int Hkv) {
  ANNEAL_RETURN_IF_ERROR(CheckOperands("forward", t, T, C, H, Hkv, {out, q, k, v}));
  if (B * T == 0) return Status::Ok();
  const int64_t hs = C / H;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));  // path 1's
  const FwdArgs a{out, lse, q, k, v, cudaflash::LayoutOf(T, C, H, Hkv), scale * cudaflash::kLog2e};
  return ForHeadSize<ForwardOp>(hs, d, t, a, B);
}

Status FlashAttentionBackward(const Device1D& d, Elem t, void* dq, void* dk, void* dv, const void* dout, const void* q,
                              const void* k, const void* v, const void* out, const float* lse, int64_t B, int64_t T,
                              int64_t C, int H, int Hkv, void* scratch) {
  ANNEAL_RETURN_IF_ERROR(CheckOperands("backward", t, T, C, H, Hkv, {dq, dk, dv, dout, q, k, v, out}));
  if (B * T == 0) return Status::Ok();
  if (scratch == nullptr) return Internal("flash attention backward: no scratch (FlashBackwardScratchBytes)");
  const int64_t hs = C / H;
  float* D = static_cast<float*>(scratch);
  cudalaunch::Rows rows;
  rows.rows = B * T * H;
  rows.cols = hs;
  if (t == Elem::kF32) {
    RowDots<float><<<rows.blocks(), rows.threads(), 0, d.stream>>>(rows, D, dout, out, T, H);
  } else {
    RowDots<uint16_t><<<rows.blocks(), rows.threads(), 0, d.stream>>>(rows, D, dout, out, T, H);
  }
  ANNEAL_CUDA_LAUNCHED("RowDots");
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const BwdArgs a{dq, dk, dv, dout, q, k, v, lse, D, cudaflash::LayoutOf(T, C, H, Hkv), scale,
                  scale * cudaflash::kLog2e};
  return ForHeadSize<BackwardOp>(hs, d, t, a, B);
}

}  // namespace anneal::cuda
