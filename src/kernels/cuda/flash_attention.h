// Attention, path 2: fused causal flash attention (kernels/cuda/flash_attention.cu) with the
// semantics of tensor/backend.h's AttentionForward / AttentionBackward and of path 1 (per-head
// cuBLASLt products around rows.cu's softmax): q, out and their gradients are contiguous (B, T, C),
// head h in columns h*hs .. h*hs + hs - 1; k, v and their gradients are (B, T, Hkv*hs) with Hkv
// dividing H (grouped-query attention: query head h reads key/value head h / (H / Hkv)); lse is
// fp32 (B, H, T), the natural log-sum-exp of a query row's visible scaled scores (scale =
// 1/sqrt(hs), row r sees keys 0..r).
//
// Forward: one block per (batch*head, query tile), the key tiles up to the diagonal walked with an
// online softmax (fp32 max and sum, in the log2 domain: exp2f of the scores times scale*log2(e)).
// Backward (FlashAttention-2, deterministic, no atomics): D = rowsum(dout * out) in fp32 scratch,
// then one kernel per (batch*key/value head, key tile) summing dK and dV over the query tiles at and
// below the diagonal of each query head of its group in turn, and one per (batch*head, query tile)
// summing dQ over the key tiles, each recomputing P = exp(scale * q.k - lse): every output row has
// one owner and one order of additions.
// bf16: tensor cores through mma.sync m16n8k16 (bf16 in, fp32 accumulators; sm_80 PTX and up),
// tiles in shared memory by cp.async, fragments by ldmatrix; outputs rounded to nearest even once.
// f32: CUDA cores (no TF32), four threads per row.
//
// This header is host code too: the launch geometry (TilePlan) and the per-row and per-fragment
// math the kernels use are checked on the CPU by tests/kernels/cuda_flash_plan_test.cc. It includes
// no CUDA header (Elem and Device1D are declared here, defined in kernels/cuda/elementwise.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/status.h"
#include "kernels/cuda/math.cuh"

namespace anneal::cuda {

enum class Elem;
struct Device1D;

// Whether path 2 has kernels for head size hs (32, 64, 80, 96, 128); the functions below return an
// Internal status naming anything else (an unsupported head size, a misaligned bf16 operand, C not
// H * hs, Hkv not dividing H), so the caller can fall back to path 1.
inline bool FlashAttentionSupports(int64_t hs) { return hs == 32 || hs == 64 || hs == 80 || hs == 96 || hs == 128; }

// out (B,T,C), lse (B,H,T) from q (B,T,C) and k, v (B,T,C*Hkv/H). Asynchronous on d.stream.
Status FlashAttentionForward(const Device1D& d, Elem t, void* out, float* lse, const void* q, const void* k,
                             const void* v, int64_t B, int64_t T, int64_t C, int H, int Hkv);

// The device scratch FlashAttentionBackward needs: D, B*H*T floats.
size_t FlashBackwardScratchBytes(int64_t B, int64_t T, int H);

// Writes (does not accumulate) dq (B,T,C) and dk, dv (B,T,C*Hkv/H) from dout, q, out (B,T,C), k, v
// and the forward's lse (B,H,T); scratch holds FlashBackwardScratchBytes(B, T, H). Bitwise
// reproducible run to run.
Status FlashAttentionBackward(const Device1D& d, Elem t, void* dq, void* dk, void* dv, const void* dout, const void* q,
                              const void* k, const void* v, const void* out, const float* lse, int64_t B, int64_t T,
                              int64_t C, int H, int Hkv, void* scratch);

}  // namespace anneal::cuda

namespace anneal::cudaflash {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// ---- addressing ----

// Where a head's rows lie: q, out, dout, dq are (B, T, C) with H heads of hs columns; k, v, dk, dv
// are (B, T, Ckv) with Hkv heads, a group of H / Hkv query heads sharing each. Query-major passes
// index (batch, query head) as bh in [0, B*H); the key-major pass indexes (batch, key/value head) as
// bkv in [0, B*Hkv) and walks the group's query heads GroupQuery(bkv, 0 .. Group() - 1) in order.
struct HeadLayout {
  int64_t T = 0, C = 0, Ckv = 0;
  int H = 1, Hkv = 1, hs = 0;

  ANNEAL_HD int Group() const { return H / Hkv; }
  // The element offset of row 0 of query head bh (in q, out, dout, dq).
  ANNEAL_HD int64_t Query(int64_t bh) const { return (bh / H) * T * C + (bh % H) * hs; }
  // The element offset of row 0 of the key/value head query head bh reads (in k, v).
  ANNEAL_HD int64_t KvOfQuery(int64_t bh) const { return (bh / H) * T * Ckv + ((bh % H) / Group()) * hs; }
  // The element offset of row 0 of key/value head bkv (in k, v, dk, dv).
  ANNEAL_HD int64_t Kv(int64_t bkv) const { return (bkv / Hkv) * T * Ckv + (bkv % Hkv) * hs; }
  // Query head g of key/value head bkv's group, as a query-major bh.
  ANNEAL_HD int64_t GroupQuery(int64_t bkv, int g) const { return (bkv / Hkv) * H + (bkv % Hkv) * Group() + g; }
};

// The layout of H query heads over C columns, Hkv key/value heads (Hkv divides H, H divides C).
inline HeadLayout LayoutOf(int64_t T, int64_t C, int H, int Hkv) {
  HeadLayout lay;
  lay.T = T;
  lay.C = C;
  lay.H = H;
  lay.Hkv = Hkv;
  lay.hs = static_cast<int>(C / H);
  lay.Ckv = C / H * Hkv;
  return lay;
}

// ---- launch geometry ----

enum class Pass { kForward, kKeyGrads, kQueryGrads };

// The tiles of each (batch*head)'s causal (T, T) score matrix one kernel computes. A block owns an
// outer tile of `outer` rows — query rows (query-major: the forward, dQ) or key rows (key-major: dK
// and dV) — and walks the inner tiles of `inner` keys (or queries) that hold a visible pair, in
// increasing order. Block (x, y) computes outer tile OuterTile(x) of (batch*head) y, y + grid_y, ...
// (grid_y = GridY(): B*H may exceed the grid's 65535; bh counts (batch, key/value head) pairs in the
// key-major pass, whose blocks walk their inner tiles once per query head of the group). Tiles may run past T: those rows are zero
// (keys and queries) and never stored; a tile needs the causal mask when its first query precedes
// its last key (counting rows past T, so a key past T is always masked in query-major tiles).
struct TilePlan {
  int64_t bh = 0, T = 0;
  int64_t outer = 64, inner = 64;
  bool key_major = false;
  uint32_t max_grid_y = 65535;

  ANNEAL_HD int64_t Tiles() const { return (T + outer - 1) / outer; }
  ANNEAL_HD uint32_t GridX() const { return static_cast<uint32_t>(Tiles()); }
  ANNEAL_HD uint32_t GridY() const { return static_cast<uint32_t>(bh < max_grid_y ? bh : max_grid_y); }
  // The longest loops first: query tiles from the last (it walks the most key tiles), key tiles from
  // the first.
  ANNEAL_HD int64_t OuterTile(uint32_t x) const { return key_major ? static_cast<int64_t>(x) : Tiles() - 1 - x; }
  ANNEAL_HD int64_t Row0(int64_t o) const { return o * outer; }
  // [InnerBegin(o), InnerEnd(o)): the inner tiles outer tile o walks.
  ANNEAL_HD int64_t InnerBegin(int64_t o) const { return key_major ? (o * outer) / inner : 0; }
  ANNEAL_HD int64_t InnerEnd(int64_t o) const {
    const int64_t last_row = (o + 1) * outer < T ? (o + 1) * outer - 1 : T - 1;
    return key_major ? (T - 1) / inner + 1 : last_row / inner + 1;
  }
  ANNEAL_HD bool Masked(int64_t o, int64_t i) const {
    const int64_t q0 = key_major ? i * inner : o * outer;
    const int64_t k_last = key_major ? (o + 1) * outer - 1 : (i + 1) * inner - 1;
    return q0 < k_last;
  }
  // f(bh, outer tile) for the work of block (x, y) in a grid of GridY() rows.
  template <class F>
  ANNEAL_HD void VisitBlock(uint32_t x, uint32_t y, F&& f) const {
    for (int64_t b = y; b < bh; b += GridY()) f(b, OuterTile(x));
  }
  // f(inner tile, masked) for each tile outer tile o walks, in the kernels' order.
  template <class F>
  ANNEAL_HD void VisitInner(int64_t o, F&& f) const {
    for (int64_t i = InnerBegin(o); i < InnerEnd(o); ++i) f(i, Masked(o, i));
  }
};

// Tile sizes. bf16: 64 rows per block (4 warps of 16 rows); inner tiles of 64 keys in the forward,
// 32 queries for dK/dV (its four accumulators — dK, dV, S^T, dP^T — fit 128 registers at hs 64),
// 64 keys for dQ up to hs 64 and 32 above (registers and shared memory). f32: 32 x 32, four
// threads per row.
constexpr int kBf16Outer = 64;
constexpr int kF32Tile = 32;
constexpr int Bf16Inner(Pass p, int hs) {
  return p == Pass::kForward ? 64 : p == Pass::kKeyGrads ? 32 : hs <= 64 ? 64 : 32;
}

inline TilePlan PlanFor(Pass p, bool bf16, int hs, int64_t bh, int64_t T) {
  TilePlan plan;
  plan.bh = bh;
  plan.T = T;
  plan.outer = bf16 ? kBf16Outer : kF32Tile;
  plan.inner = bf16 ? Bf16Inner(p, hs) : kF32Tile;
  plan.key_major = p == Pass::kKeyGrads;
  return plan;
}

// ---- per-row math (log2 domain: x = score * scale * log2(e)) ----

// The exponent base of a running max: an all-masked row so far (max = -inf) exponentiates against
// 0, so exp2f(-inf - 0) = 0 instead of NaN.
ANNEAL_HD float FlashBase(float m) { return m == -INFINITY ? 0.0f : m; }
// The factor the running sum and output take when the max moves from m_old to m_new (>= m_old).
ANNEAL_HD float FlashRescale(float m_old, float m_new) { return exp2f(m_old - FlashBase(m_new)); }
// The natural log-sum-exp from the log2-domain max and the sum of exp2f(x - max).
ANNEAL_HD float FlashLse(float m, float l) { return m == -INFINITY ? -INFINITY : m * kLn2 + logf(l); }
// The backward's probability from the raw score s and lse2 = lse * log2(e) (+inf for a row past T).
ANNEAL_HD float FlashProb(float s, float scale_log2, float lse2) { return exp2f(fmaf(s, scale_log2, -lse2)); }

// ---- mma.sync m16n8k16 fragments (PTX ISA, "matrix fragments for mma.m16n8k16", bf16) ----
// lane = 4 * group + quad. C/D (16 x 8 fp32): 4 elements; A (16 x 16, row-major): 8 bf16 elements
// in 4 registers (element e in register e / 2, the low half for even e); B (16 x 8, k x n): 4
// elements in 2 registers.
ANNEAL_HD int MmaCRow(int lane, int e) { return lane / 4 + 8 * (e / 2); }
ANNEAL_HD int MmaCCol(int lane, int e) { return 2 * (lane % 4) + e % 2; }
ANNEAL_HD int MmaARow(int lane, int e) { return lane / 4 + 8 * ((e / 2) % 2); }
ANNEAL_HD int MmaACol(int lane, int e) { return 2 * (lane % 4) + e % 2 + 8 * (e / 4); }
ANNEAL_HD int MmaBRow(int lane, int e) { return 2 * (lane % 4) + e % 2 + 8 * (e / 2); }
ANNEAL_HD int MmaBCol(int lane, int /*e*/) { return lane / 4; }

// ldmatrix .x4: lane l gives the shared address of row l % 8 of 8x8 matrix l / 8, and receives in
// register m row l / 4, columns 2 (l % 4) and +1 of matrix m (.trans: rows 2 (l % 4) and +1 of
// column l / 4). The (row, column) of a 16 x 16 block each lane addresses, for the three operands:
//  A, row-major (Q rows): matrices (rows 0-7, cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15) are
//    A's registers 0..3;
//  B from an (n x k) row-major block (K rows for Q K^T), two n8 tiles: matrices (n 0-7, k 0-7),
//    (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15) are B's registers 0, 1 of n tile 0, then 0, 1
//    of n tile 1;
//  B from a (k x n) row-major block (V rows for P V), with .trans, two n8 tiles: matrices
//    (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15), the same registers.
ANNEAL_HD int LdmARow(int lane) { return lane % 8 + 8 * ((lane / 8) % 2); }
ANNEAL_HD int LdmACol(int lane) { return 8 * (lane / 16); }
ANNEAL_HD int LdmBRow(int lane) { return lane % 8 + 8 * (lane / 16); }
ANNEAL_HD int LdmBCol(int lane) { return 8 * ((lane / 8) % 2); }
ANNEAL_HD int LdmBTRow(int lane) { return lane % 8 + 8 * ((lane / 8) % 2); }
ANNEAL_HD int LdmBTCol(int lane) { return 8 * (lane / 16); }
// An accumulator block (16 x 16: C fragments of n tiles 2j, 2j + 1) as A fragment j of the next
// product (P for P V): A register r holds C elements (tile 2j + r / 2, elements 2 (r % 2), +1).
ANNEAL_HD int AccTileOfA(int j, int reg) { return 2 * j + reg / 2; }
ANNEAL_HD int AccElemOfA(int reg) { return 2 * (reg % 2); }

}  // namespace anneal::cudaflash
