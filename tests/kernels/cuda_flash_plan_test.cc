// Attention path 2's host side (kernels/cuda/flash_attention.h), without a GPU: the tile plans of the
// forward and of both backward kernels produce every output row once, cover every causally visible
// (query, key) pair once, visit no tile without one, and skip the mask only where nothing is masked;
// the mma.sync / ldmatrix fragment layouts, emulated lane by lane, compose into the plain product;
// the tiles' online softmax matches a double-precision softmax; and the whole tiled algorithm,
// run on the host through the plans and the per-row math, matches the reference attention.
#include "kernels/cuda/flash_attention.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/ops.h"
#include "testing/numeric.h"

namespace anneal {
namespace {

using namespace cudaflash;

// ---- plans ----

struct Coverage {
  std::vector<int> rows;   // (bh, row): times an outer tile produced it
  std::vector<int> pairs;  // (bh, query, key): times a visited tile covered it
};

// Walks every block of the plan as the kernels do, checking each visited tile on the way.
Coverage Walk(const TilePlan& p) {
  Coverage c;
  const int64_t T = p.T;
  c.rows.assign(static_cast<size_t>(p.bh * T), 0);
  c.pairs.assign(static_cast<size_t>(p.bh * T * T), 0);
  for (uint32_t x = 0; x < p.GridX(); ++x) {
    for (uint32_t y = 0; y < p.GridY(); ++y) {
      p.VisitBlock(x, y, [&](int64_t bh, int64_t o) {
        for (int64_t r = p.Row0(o); r < std::min(T, p.Row0(o) + p.outer); ++r) ++c.rows[bh * T + r];
        int64_t last = -1;
        p.VisitInner(o, [&](int64_t i, bool masked) {
          EXPECT_GT(i, last) << "inner tiles in increasing order";
          last = i;
          const int64_t q0 = p.key_major ? i * p.inner : o * p.outer, nq = p.key_major ? p.inner : p.outer;
          const int64_t k0 = p.key_major ? o * p.outer : i * p.inner, nk = p.key_major ? p.outer : p.inner;
          int visible = 0;
          for (int64_t q = q0; q < q0 + nq; ++q) {
            for (int64_t k = k0; k < k0 + nk; ++k) {
              if (!masked) {
                ASSERT_LE(k, q) << "an unmasked tile holds a future key (rows past T counted)";
              }
              if (q < T && k < T && k <= q) {
                ++visible;
                ++c.pairs[(bh * T + q) * T + k];
              }
            }
          }
          EXPECT_GT(visible, 0) << "a visited tile with nothing visible: o=" << o << " i=" << i;
        });
      });
    }
  }
  return c;
}

TEST(CudaFlashPlanTest, EveryRowOnceAndEveryVisiblePairOnce) {
  std::map<std::tuple<int64_t, int64_t, bool>, int> seen;  // distinct tile shapes
  for (bool bf16 : {true, false}) {
    for (int hs : {32, 64, 80, 96, 128}) {
      for (Pass pass : {Pass::kForward, Pass::kKeyGrads, Pass::kQueryGrads}) {
        const TilePlan shape = PlanFor(pass, bf16, hs, 1, 1);
        if (seen[{shape.outer, shape.inner, shape.key_major}]++) continue;
        for (int64_t T : {1, 2, 31, 32, 33, 63, 64, 65, 127, 129, 1000}) {
          for (int64_t bh : {1, 3, 7}) {
            for (uint32_t max_y : {65535u, 2u}) {  // 2: B*H folded onto fewer grid rows than it has
              TilePlan p = PlanFor(pass, bf16, hs, bh, T);
              p.max_grid_y = max_y;
              ASSERT_EQ(p.GridY(), std::min<uint32_t>(static_cast<uint32_t>(bh), max_y));
              const Coverage c = Walk(p);
              const std::string what = "T=" + std::to_string(T) + " bh=" + std::to_string(bh) +
                                       " outer=" + std::to_string(p.outer) + " inner=" + std::to_string(p.inner) +
                                       (p.key_major ? " key-major" : " query-major");
              for (int h : c.rows) ASSERT_EQ(h, 1) << what;
              for (int64_t b = 0; b < bh; ++b) {
                for (int64_t q = 0; q < T; ++q) {
                  for (int64_t k = 0; k < T; ++k) ASSERT_EQ(c.pairs[(b * T + q) * T + k], k <= q ? 1 : 0) << what;
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(seen.size(), 5u);  // bf16 forward, dK/dV, dQ (two sizes); f32 query- and key-major
}

TEST(CudaFlashPlanTest, LongestLoopsLaunchFirst) {
  const TilePlan fwd = PlanFor(Pass::kForward, true, 64, 1, 1000), kv = PlanFor(Pass::kKeyGrads, true, 64, 1, 1000);
  EXPECT_EQ(fwd.OuterTile(0), fwd.Tiles() - 1);  // the last query tile walks every key tile
  EXPECT_EQ(fwd.InnerEnd(fwd.OuterTile(0)) - fwd.InnerBegin(fwd.OuterTile(0)), (1000 + 63) / 64);
  EXPECT_EQ(kv.OuterTile(0), 0);  // the first key tile is seen by every query tile
  EXPECT_EQ(kv.InnerEnd(0) - kv.InnerBegin(0), (1000 + 31) / 32);
}

// ---- fragments: ldmatrix and mma.sync m16n8k16 emulated lane by lane ----

using LaneRegs = std::array<std::array<uint32_t, 4>, 32>;
using LaneAcc = std::array<std::array<float, 4>, 32>;

uint16_t Half(uint32_t reg, int h) {
  return static_cast<uint16_t>(h ? reg >> 16 : reg & 0xffffu);
}

// ldmatrix.x4: lane l addresses row l % 8 of matrix l / 8 (addr: element offsets into smem).
LaneRegs Ldmatrix(const std::vector<uint16_t>& smem, const std::array<size_t, 32>& addr, bool trans) {
  LaneRegs r{};
  for (int l = 0; l < 32; ++l) {
    for (int m = 0; m < 4; ++m) {
      uint16_t h[2];
      for (int j = 0; j < 2; ++j) {
        h[j] = trans ? smem[addr[8 * m + 2 * (l % 4) + j] + l / 4] : smem[addr[8 * m + l / 4] + 2 * (l % 4) + j];
      }
      r[l][m] = h[0] | (static_cast<uint32_t>(h[1]) << 16);
    }
  }
  return r;
}

// c += a b: a's registers 0..3 and b's two registers (b_reg, b_reg + 1) of each lane, as the PTX ISA lays
// out m16n8k16's fragments.
void Mma(LaneAcc& c, const LaneRegs& a, const LaneRegs& b, int b_reg) {
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    for (int e = 0; e < 8; ++e) A[MmaARow(l, e)][MmaACol(l, e)] = cudamath::WidenBf16(Half(a[l][e / 2], e % 2));
    for (int e = 0; e < 4; ++e) B[MmaBRow(l, e)][MmaBCol(l, e)] = cudamath::WidenBf16(Half(b[l][b_reg + e / 2], e % 2));
  }
  for (int l = 0; l < 32; ++l) {
    for (int e = 0; e < 4; ++e) {
      double s = c[l][e];
      for (int k = 0; k < 16; ++k) s += static_cast<double>(A[MmaCRow(l, e)][k]) * B[k][MmaCCol(l, e)];
      c[l][e] = static_cast<float>(s);
    }
  }
}

// The kernels' GemmNT: acc (16 x 8 NT) += A (16 x 16 KT at a) B^T (B: 8 NT x 16 KT at b), stride `s`.
void GemmNT(std::vector<LaneAcc>& acc, const std::vector<uint16_t>& smem, size_t a, size_t b, int s, int KT) {
  for (int kt = 0; kt < KT; ++kt) {
    std::array<size_t, 32> pa, pb;
    for (int l = 0; l < 32; ++l) pa[l] = a + LdmARow(l) * s + LdmACol(l) + kt * 16;
    const LaneRegs af = Ldmatrix(smem, pa, false);
    for (size_t np = 0; np < acc.size() / 2; ++np) {
      for (int l = 0; l < 32; ++l) pb[l] = b + LdmBRow(l) * s + LdmBCol(l) + np * 16 * s + kt * 16;
      const LaneRegs bf = Ldmatrix(smem, pb, false);
      Mma(acc[2 * np], af, bf, 0);
      Mma(acc[2 * np + 1], af, bf, 2);
    }
  }
}

// The kernels' AccToA then GemmRegNN: acc (16 x 8 NT) += bf16(c) (16 x 16 KT) B (16 KT x 8 NT at b).
void GemmRegNN(std::vector<LaneAcc>& acc, const std::vector<LaneAcc>& c, const std::vector<uint16_t>& smem, size_t b,
               int s) {
  const int KT = static_cast<int>(c.size()) / 2;
  for (int kt = 0; kt < KT; ++kt) {
    LaneRegs a{};
    for (int l = 0; l < 32; ++l) {
      for (int r = 0; r < 4; ++r) {
        const float* src = &c[AccTileOfA(kt, r)][l][AccElemOfA(r)];
        a[l][r] = cudamath::RoundBf16(src[0]) | (static_cast<uint32_t>(cudamath::RoundBf16(src[1])) << 16);
      }
    }
    for (size_t np = 0; np < acc.size() / 2; ++np) {
      std::array<size_t, 32> pb;
      for (int l = 0; l < 32; ++l) pb[l] = b + LdmBTRow(l) * s + LdmBTCol(l) + kt * 16 * s + np * 16;
      const LaneRegs bf = Ldmatrix(smem, pb, true);
      Mma(acc[2 * np], a, bf, 0);
      Mma(acc[2 * np + 1], a, bf, 2);
    }
  }
}

TEST(CudaFlashFragmentTest, LayoutsCoverTheirTilesOnce) {
  std::vector<int> c(16 * 8, 0), a(16 * 16, 0), b(16 * 8, 0);
  for (int l = 0; l < 32; ++l) {
    for (int e = 0; e < 4; ++e) ++c[MmaCRow(l, e) * 8 + MmaCCol(l, e)];
    for (int e = 0; e < 8; ++e) ++a[MmaARow(l, e) * 16 + MmaACol(l, e)];
    for (int e = 0; e < 4; ++e) ++b[MmaBRow(l, e) * 8 + MmaBCol(l, e)];
  }
  for (int h : c) EXPECT_EQ(h, 1);
  for (int h : a) EXPECT_EQ(h, 1);
  for (int h : b) EXPECT_EQ(h, 1);
  using Lane = int (*)(int);
  for (auto [row, col] : {std::pair<Lane, Lane>{LdmARow, LdmACol}, std::pair<Lane, Lane>{LdmBRow, LdmBCol},
                          std::pair<Lane, Lane>{LdmBTRow, LdmBTCol}}) {
    std::vector<int> rows(16 * 2, 0);  // each (row, 8-column half) of the 16 x 16 block addressed once
    for (int l = 0; l < 32; ++l) ++rows[row(l) * 2 + col(l) / 8];
    for (int h : rows) EXPECT_EQ(h, 1);
  }
}

// S = Q K^T through GemmNT, then O = bf16(S) V through GemmRegNN, against plain loops: small integer
// inputs, so every product and sum is exact and the comparison is bit for bit.
TEST(CudaFlashFragmentTest, EmulatedWarpProductsAreThePlainProducts) {
  for (int hs : {32, 64, 80, 128}) {
    const int s = hs + 8, keys = 64;
    std::mt19937 g(static_cast<uint32_t>(hs));
    std::uniform_int_distribution<int> d(-1, 1);
    // shared memory: Q (16 rows) at 0, K (64 rows) at 16 s, V (64 rows) at 80 s; the padding stays 0
    std::vector<uint16_t> smem(static_cast<size_t>(16 + 2 * keys) * s, 0);
    std::vector<float> Q(16 * hs), K(keys * hs), V(keys * hs);
    auto fill = [&](std::vector<float>& m, int rows, size_t at) {
      for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < hs; ++c) {
          m[r * hs + c] = static_cast<float>(d(g));
          smem[at + r * s + c] = cudamath::RoundBf16(m[r * hs + c]);
        }
      }
    };
    fill(Q, 16, 0);
    fill(K, keys, 16 * s);
    fill(V, keys, (16 + keys) * s);
    std::vector<LaneAcc> S(keys / 8, LaneAcc{}), O(hs / 8, LaneAcc{});
    GemmNT(S, smem, 0, 16 * s, s, hs / 16);
    GemmRegNN(O, S, smem, (16 + keys) * s, s);
    for (int l = 0; l < 32; ++l) {
      for (int e = 0; e < 4; ++e) {
        const int r = MmaCRow(l, e);
        for (int n = 0; n < keys / 8; ++n) {
          const int k = n * 8 + MmaCCol(l, e);
          float want = 0;
          for (int c = 0; c < hs; ++c) want += Q[r * hs + c] * K[k * hs + c];
          ASSERT_EQ(S[n][l][e], want) << "hs=" << hs << " S[" << r << "][" << k << "]";
        }
        for (int n = 0; n < hs / 8; ++n) {
          const int c = n * 8 + MmaCCol(l, e);
          float want = 0;
          for (int k = 0; k < keys; ++k) {
            float sk = 0;
            for (int j = 0; j < hs; ++j) sk += Q[r * hs + j] * K[k * hs + j];
            want += sk * V[k * hs + c];  // |S| <= 128: exact in bf16
          }
          ASSERT_EQ(O[n][l][e], want) << "hs=" << hs << " O[" << r << "][" << c << "]";
        }
      }
    }
  }
}

// ---- the tiles' online softmax ----

// One query row as a bf16 forward block computes it: key tiles of 64; within a tile lane t of the
// row's four holds columns n * 8 + 2t + {0, 1}; the max over the four, the partial sums summed at the
// end. Returns lse; *out = sum_k p_k v_k / l for values v.
float TiledRow(const std::vector<float>& s, const std::vector<float>& v, float scale_log2, float* out) {
  float m = -INFINITY, l[4] = {0, 0, 0, 0}, o[4] = {0, 0, 0, 0};
  for (size_t k0 = 0; k0 < s.size(); k0 += 64) {
    float mx = -INFINITY;
    for (size_t k = k0; k < std::min(s.size(), k0 + 64); ++k) mx = std::fmax(mx, s[k]);
    const float m_new = std::fmax(m, mx * scale_log2), base = FlashBase(m_new), alpha = FlashRescale(m, m_new);
    for (int t = 0; t < 4; ++t) {
      float rs = 0, os = 0;
      for (int n = 0; n < 8; ++n) {
        for (int h = 0; h < 2; ++h) {
          const size_t k = k0 + n * 8 + 2 * t + h;
          if (k >= s.size()) continue;  // (the kernel's tail keys are masked: p = 0)
          const float p = exp2f(std::fma(s[k], scale_log2, -base));
          rs += p;
          os += p * v[k];
        }
      }
      l[t] = l[t] * alpha + rs;
      o[t] = o[t] * alpha + os;
    }
    m = m_new;
  }
  const float lsum = (l[0] + l[1]) + (l[2] + l[3]);
  *out = ((o[0] + o[1]) + (o[2] + o[3])) / lsum;
  return FlashLse(m, lsum);
}

TEST(CudaFlashMathTest, TiledOnlineSoftmaxMatchesADoubleSoftmax) {
  const float scale = 1.0f / std::sqrt(64.0f), scale_log2 = scale * kLog2e;
  for (size_t n : {1u, 2u, 63u, 64u, 65u, 200u, 1000u, 4096u}) {
    for (int masked_prefix : {0, 1, 70}) {  // leading -inf scores: a first tile may be all masked
      std::vector<float> s = testing::RandomNormal(n, n * 7 + masked_prefix, 8.0f), v = testing::RandomNormal(n, n);
      for (size_t k = 0; k < std::min<size_t>(masked_prefix, n - 1); ++k) s[k] = -INFINITY;
      double mx = -INFINITY;
      for (float x : s) mx = std::max(mx, static_cast<double>(x) * scale);
      double sum = 0, dot = 0;
      for (size_t k = 0; k < n; ++k) {
        const double p = s[k] == -INFINITY ? 0.0 : std::exp(static_cast<double>(s[k]) * scale - mx);
        sum += p;
        dot += p * v[k];
      }
      float out = 0;
      const float lse = TiledRow(s, v, scale_log2, &out);
      EXPECT_NEAR(lse, mx + std::log(sum), 2e-6 * std::max(1.0, std::fabs(mx))) << n << " " << masked_prefix;
      EXPECT_NEAR(out, dot / sum, 1e-5) << n << " " << masked_prefix;
    }
  }
  EXPECT_EQ(FlashLse(-INFINITY, 0.0f), -INFINITY);
  EXPECT_EQ(FlashRescale(-INFINITY, -INFINITY), 0.0f);     // an all-masked row keeps l = 0, never NaN
  EXPECT_EQ(FlashProb(1.0f, scale_log2, INFINITY), 0.0f);  // a query row past T contributes nothing
}

// ---- the whole tiled algorithm on the host, through the plans ----

// A (B, T, C) problem with H query heads and Hkv key/value heads, addressed through the kernels'
// HeadLayout: rows of query head bh (q, out, dout, dq), of the key/value head it reads (k, v), and
// of key/value head bkv (k, v, dk, dv). A row past T is nullptr (the kernels' zero-filled rows).
struct Heads {
  int B, T, C, H, Hkv;
  HeadLayout lay = LayoutOf(T, C, H, Hkv);
  int hs() const { return C / H; }
  size_t Nq() const { return static_cast<size_t>(B) * T * C; }
  size_t Nkv() const { return static_cast<size_t>(B) * T * lay.Ckv; }
  const float* Q(const std::vector<float>& x, int64_t bh, int64_t t) const {
    return t < T ? x.data() + lay.Query(bh) + t * C : nullptr;
  }
  const float* KvOf(const std::vector<float>& x, int64_t bh, int64_t t) const {
    return t < T ? x.data() + lay.KvOfQuery(bh) + t * lay.Ckv : nullptr;
  }
  const float* Kv(const std::vector<float>& x, int64_t bkv, int64_t t) const {
    return t < T ? x.data() + lay.Kv(bkv) + t * lay.Ckv : nullptr;
  }
  float* Q(std::vector<float>& x, int64_t bh, int64_t t) const { return x.data() + lay.Query(bh) + t * C; }
  float* Kv(std::vector<float>& x, int64_t bkv, int64_t t) const { return x.data() + lay.Kv(bkv) + t * lay.Ckv; }
  float Dot(const float* a, const float* b) const {
    float d = 0;
    if (a && b) {
      for (int e = 0; e < hs(); ++e) d += a[e] * b[e];
    }
    return d;
  }
};

// Every block of a plan, as f(bh, outer tile).
template <class F>
void EachBlock(const TilePlan& p, F&& f) {
  for (uint32_t x = 0; x < p.GridX(); ++x) {
    for (uint32_t y = 0; y < p.GridY(); ++y) p.VisitBlock(x, y, f);
  }
}

// The forward kernels' algorithm, one query row at a time: the key tiles of the plan, masked only
// where the plan says, keys past T zero, the online softmax of the header's math.
void TiledForward(const TilePlan& p, const Heads& d, const std::vector<float>& q, const std::vector<float>& k,
                  const std::vector<float>& v, std::vector<float>& out, std::vector<float>& lse) {
  const float scale_log2 = 1.0f / std::sqrt(static_cast<float>(d.hs())) * kLog2e;
  EachBlock(p, [&](int64_t bh, int64_t o) {
    for (int64_t r = p.Row0(o); r < std::min<int64_t>(d.T, p.Row0(o) + p.outer); ++r) {
      float m = -INFINITY, l = 0;
      std::vector<float> acc(d.hs(), 0.0f), s(p.inner);
      p.VisitInner(o, [&](int64_t i, bool masked) {
        float mx = -INFINITY;
        for (int64_t j = 0; j < p.inner; ++j) {
          s[j] = masked && i * p.inner + j > r ? -INFINITY : d.Dot(d.Q(q, bh, r), d.KvOf(k, bh, i * p.inner + j));
          mx = std::fmax(mx, s[j]);
        }
        const float m_new = std::fmax(m, mx * scale_log2), base = FlashBase(m_new), alpha = FlashRescale(m, m_new);
        for (float& a : acc) a *= alpha;
        l *= alpha;
        for (int64_t j = 0; j < p.inner; ++j) {
          const float pj = exp2f(std::fma(s[j], scale_log2, -base));
          l += pj;
          const float* vj = d.KvOf(v, bh, i * p.inner + j);
          for (int e = 0; e < d.hs() && vj; ++e) acc[e] += pj * vj[e];
        }
        m = m_new;
      });
      for (int e = 0; e < d.hs(); ++e) d.Q(out, bh, r)[e] = acc[e] / l;
      lse[bh * d.T + r] = FlashLse(m, l);
    }
  });
}

// The backward kernels' algorithm: D, then dK and dV per key row over the key-major plan's blocks
// (one per key/value head) walking each query head of the group over its query tiles (rows past T:
// lse +inf, D 0), then dQ per query row over the query-major plan's key tiles.
void TiledBackward(const TilePlan& kv, const TilePlan& qg, const Heads& d, const std::vector<float>& dout,
                   const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                   const std::vector<float>& out, const std::vector<float>& lse, std::vector<float>& dq,
                   std::vector<float>& dk, std::vector<float>& dv) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.hs())), scale_log2 = scale * kLog2e;
  const int64_t BH = static_cast<int64_t>(d.B) * d.H;
  std::vector<float> D(BH * d.T);
  for (int64_t bh = 0; bh < BH; ++bh) {
    for (int64_t t = 0; t < d.T; ++t) D[bh * d.T + t] = d.Dot(d.Q(dout, bh, t), d.Q(out, bh, t));
  }
  auto L = [&](int64_t bh, int64_t t) { return t < d.T ? lse[bh * d.T + t] * kLog2e : INFINITY; };
  auto Dq = [&](int64_t bh, int64_t t) { return t < d.T ? D[bh * d.T + t] : 0.0f; };
  EachBlock(kv, [&](int64_t bkv, int64_t o) {
    for (int64_t key = kv.Row0(o); key < std::min<int64_t>(d.T, kv.Row0(o) + kv.outer); ++key) {
      std::vector<float> gk(d.hs(), 0.0f), gv(d.hs(), 0.0f);
      for (int g = 0; g < d.lay.Group(); ++g) {
        const int64_t bh = d.lay.GroupQuery(bkv, g);
        kv.VisitInner(o, [&](int64_t i, bool masked) {
          for (int64_t t = i * kv.inner; t < (i + 1) * kv.inner; ++t) {
            const float s = d.Dot(d.Kv(k, bkv, key), d.Q(q, bh, t));
            const float p = masked && key > t ? 0.0f : FlashProb(s, scale_log2, L(bh, t));
            const float ds = p * (d.Dot(d.Kv(v, bkv, key), d.Q(dout, bh, t)) - Dq(bh, t));
            for (int e = 0; e < d.hs() && t < d.T; ++e) {
              gv[e] += p * d.Q(dout, bh, t)[e];
              gk[e] += ds * d.Q(q, bh, t)[e];
            }
          }
        });
      }
      for (int e = 0; e < d.hs(); ++e) {
        d.Kv(dk, bkv, key)[e] = gk[e] * scale;
        d.Kv(dv, bkv, key)[e] = gv[e];
      }
    }
  });
  EachBlock(qg, [&](int64_t bh, int64_t o) {
    for (int64_t t = qg.Row0(o); t < std::min<int64_t>(d.T, qg.Row0(o) + qg.outer); ++t) {
      std::vector<float> g(d.hs(), 0.0f);
      qg.VisitInner(o, [&](int64_t i, bool masked) {
        for (int64_t key = i * qg.inner; key < (i + 1) * qg.inner; ++key) {
          const float s = d.Dot(d.Q(q, bh, t), d.KvOf(k, bh, key));
          const float p = masked && key > t ? 0.0f : FlashProb(s, scale_log2, L(bh, t));
          const float ds = p * (d.Dot(d.Q(dout, bh, t), d.KvOf(v, bh, key)) - Dq(bh, t));
          for (int e = 0; e < d.hs() && key < d.T; ++e) g[e] += ds * d.KvOf(k, bh, key)[e];
        }
      });
      for (int e = 0; e < d.hs(); ++e) d.Q(dq, bh, t)[e] = g[e] * scale;
    }
  });
}

TEST(CudaFlashMathTest, TiledAttentionMatchesTheReference) {
  for (bool bf16 : {true, false}) {
    for (auto [B, T, C, H, Hkv] : {std::array{2, 65, 128, 2, 2}, std::array{1, 1, 64, 1, 1},
                                   std::array{1, 130, 160, 2, 2}, std::array{3, 33, 96, 3, 3},
                                   std::array{2, 65, 256, 4, 2}, std::array{1, 70, 384, 6, 2},
                                   std::array{2, 33, 96, 3, 1}}) {
      const Heads d{B, T, C, H, Hkv};
      const size_t n = d.Nq(), nkv = d.Nkv(), nl = static_cast<size_t>(B) * H * T;
      const std::vector<float> q = testing::RandomNormal(n, 1, 1.5f), k = testing::RandomNormal(nkv, 2, 1.5f),
                               v = testing::RandomNormal(nkv, 3), dout = testing::RandomNormal(n, 4);
      std::vector<float> out_ref(n), lse_ref(nl), dq_ref(n), dk_ref(nkv), dv_ref(nkv);
      RefKernels().attention_forward(out_ref.data(), lse_ref.data(), q.data(), k.data(), v.data(), B, T, C, H, Hkv);
      RefKernels().attention_backward(dq_ref.data(), dk_ref.data(), dv_ref.data(), dout.data(), q.data(), k.data(),
                                      v.data(), out_ref.data(), lse_ref.data(), B, T, C, H, Hkv);
      const int hs = C / H;
      std::vector<float> out(n, NAN), lse(nl, NAN), dq(n, NAN), dk(nkv, NAN), dv(nkv, NAN);
      TiledForward(PlanFor(Pass::kForward, bf16, hs, B * H, T), d, q, k, v, out, lse);
      TiledBackward(PlanFor(Pass::kKeyGrads, bf16, hs, B * Hkv, T), PlanFor(Pass::kQueryGrads, bf16, hs, B * H, T), d,
                    dout, q, k, v, out_ref, lse_ref, dq, dk, dv);
      const std::string what = (bf16 ? "bf16 tiles T=" : "f32 tiles T=") + std::to_string(T) +
                               " hs=" + std::to_string(hs) + " H=" + std::to_string(H) + " Hkv=" + std::to_string(Hkv);
      EXPECT_LT(testing::NormErr(out, out_ref), 1e-5) << what;
      EXPECT_LT(testing::NormErr(lse, lse_ref), 1e-6) << what;
      EXPECT_LT(testing::NormErr(dq, dq_ref), 1e-5) << what;
      EXPECT_LT(testing::NormErr(dk, dk_ref), 1e-5) << what;
      EXPECT_LT(testing::NormErr(dv, dv_ref), 1e-5) << what;
    }
  }
}

TEST(CudaFlashPlanTest, HeadLayoutCoversEveryRowOnce) {
  // Every (query head, key/value head) pairing the kernels address: query heads tile q exactly, each
  // key/value head serves exactly its group, and the key-major walk visits every query head once.
  for (auto [B, C, H, Hkv] : {std::array{2, 256, 4, 2}, std::array{3, 96, 3, 1}, std::array{1, 2048, 32, 8}}) {
    const HeadLayout lay = LayoutOf(5, C, H, Hkv);
    std::map<int64_t, int> q_offsets, readers, walked;
    for (int64_t bh = 0; bh < int64_t{B} * H; ++bh) {
      ++q_offsets[lay.Query(bh)];
      ++readers[lay.KvOfQuery(bh)];
    }
    for (int64_t bkv = 0; bkv < int64_t{B} * Hkv; ++bkv) {
      for (int g = 0; g < lay.Group(); ++g) {
        const int64_t bh = lay.GroupQuery(bkv, g);
        ++walked[bh];
        EXPECT_EQ(lay.KvOfQuery(bh), lay.Kv(bkv)) << "query head " << bh << " of key/value head " << bkv;
      }
    }
    EXPECT_EQ(q_offsets.size(), static_cast<size_t>(B) * H);
    EXPECT_EQ(readers.size(), static_cast<size_t>(B) * Hkv);
    for (auto [off, n] : readers) EXPECT_EQ(n, H / Hkv) << off;
    EXPECT_EQ(walked.size(), static_cast<size_t>(B) * H);
    for (auto [bh, n] : walked) EXPECT_EQ(n, 1) << bh;
  }
}

}  // namespace
}  // namespace anneal
