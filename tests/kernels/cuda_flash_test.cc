// Attention path 2 (kernels/cuda/flash_attention.h) against the reference kernels, on a GPU: f32 and
// bf16, every head size, grouped-query heads (Hkv < H), tails (T not a multiple of the tiles), NaN-poisoned outputs (every element
// must be written), the backward bitwise reproducible, and an unsupported head size refused.
// Without a GPU every test reports skipped (label needs-gpu).
#include "kernels/cuda/flash_attention.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/cuda/elementwise.h"
#include "kernels/ops.h"
#include "tensor/dtype.h"
#include "testing/gpu.h"
#include "testing/numeric.h"

namespace anneal {
namespace {

using cuda::Elem;
using testing::NormErr;


// A device array of n values in dtype t (f32 lse stays f32 whatever t).
struct Dev {
  Elem t;
  size_t n;
  void* p = nullptr;
  Dev(Elem t_, size_t n_) : t(t_), n(n_) {
    EXPECT_EQ(cudaMalloc(&p, n * Es()), cudaSuccess);
    EXPECT_EQ(cudaMemset(p, 0xff, n * Es()), cudaSuccess);  // NaN in f32 and in bf16
  }
  Dev(Elem t_, const std::vector<float>& host) : Dev(t_, host.size()) { Put(host); }
  ~Dev() { cudaFree(p); }
  size_t Es() const { return t == Elem::kF32 ? 4 : 2; }
  void Put(const std::vector<float>& host) {
    std::vector<char> bytes(n * Es());
    for (size_t i = 0; i < n; ++i) {
      if (t == Elem::kF32) {
        std::memcpy(bytes.data() + 4 * i, &host[i], 4);
      } else {
        const uint16_t h = FloatToBf16(host[i]);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
      }
    }
    EXPECT_EQ(cudaMemcpy(p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<char> Bytes() const {
    std::vector<char> b(n * Es());
    EXPECT_EQ(cudaMemcpy(b.data(), p, b.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    return b;
  }
  std::vector<float> Get() const {
    const std::vector<char> b = Bytes();
    std::vector<float> out(n);
    for (size_t i = 0; i < n; ++i) {
      if (t == Elem::kF32) {
        std::memcpy(&out[i], b.data() + 4 * i, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, b.data() + 2 * i, 2);
        out[i] = Bf16ToFloat(h);
      }
    }
    return out;
  }
};

std::vector<float> Input(size_t n, uint64_t seed, Elem t, float scale) {
  std::vector<float> v = testing::RandomNormal(n, seed, scale);
  if (t == Elem::kBF16) RoundFloatsToBf16(v.data(), v.size());
  return v;
}

struct Shape {
  int B, T, C, H, Hkv;
  int64_t Ckv() const { return static_cast<int64_t>(C) / H * Hkv; }
};
constexpr std::array<Shape, 14> kShapes = {{{2, 1, 128, 2, 2},
                                            {2, 63, 128, 2, 2},
                                            {1, 64, 64, 1, 1},
                                            {2, 65, 768, 12, 12},
                                            {1, 1000, 768, 12, 12},
                                            {3, 33, 96, 3, 3},
                                            {1, 130, 160, 2, 2},
                                            {1, 77, 192, 2, 2},
                                            {1, 200, 256, 2, 2},
                                            {1, 129, 128, 1, 1},
                                            {2, 65, 256, 4, 2},      // grouped-query: 2 query heads a key/value head
                                            {1, 130, 512, 8, 2},     // 4 a group, hs 64
                                            {2, 33, 384, 3, 1},      // one key/value head (multi-query), hs 128
                                            {1, 1000, 2048, 32, 8}}};  // Llama 3.2 1B's heads

TEST(CudaFlashTest, ForwardAndBackwardMatchTheReference) {
  NEED_GPU();
  const cuda::Device1D d{};
  for (Elem t : {Elem::kF32, Elem::kBF16}) {
    const bool bf16 = t == Elem::kBF16;
    for (const Shape& s : kShapes) {
      if (std::getenv("ANNEAL_TEST_SMALL") && s.T > 130) continue;  // compute-sanitizer's pass: small shapes
      const size_t n = static_cast<size_t>(s.B) * s.T * s.C, nl = static_cast<size_t>(s.B) * s.H * s.T;
      const size_t nkv = static_cast<size_t>(s.B) * s.T * s.Ckv();
      const std::vector<float> q = Input(n, 1, t, 1.5f), k = Input(nkv, 2, t, 1.5f), v = Input(nkv, 3, t, 1.0f),
                               dout = Input(n, 4, t, 1.0f);
      std::vector<float> out_ref(n), lse_ref(nl), dq_ref(n), dk_ref(nkv), dv_ref(nkv);
      RefKernels().attention_forward(out_ref.data(), lse_ref.data(), q.data(), k.data(), v.data(), s.B, s.T, s.C, s.H,
                                     s.Hkv);
      Dev dq_(t, q), dk_(t, k), dv_(t, v), ddo(t, dout), out(t, n), lse(Elem::kF32, nl);
      const std::string what = std::string(bf16 ? "bf16" : "f32") + " B=" + std::to_string(s.B) + " T=" +
                               std::to_string(s.T) + " hs=" + std::to_string(s.C / s.H) + " H=" +
                               std::to_string(s.H) + " Hkv=" + std::to_string(s.Hkv);
      ASSERT_TRUE(cuda::FlashAttentionForward(d, t, out.p, static_cast<float*>(lse.p), dq_.p, dk_.p, dv_.p, s.B, s.T,
                                              s.C, s.H, s.Hkv)
                      .ok())
          << what;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
      EXPECT_LT(NormErr(out.Get(), out_ref), bf16 ? 1e-2 : 1e-5) << "out " << what;
      EXPECT_LT(NormErr(lse.Get(), lse_ref), bf16 ? 1e-3 : 1e-6) << "lse " << what;
      // the backward from the device's own forward, the reference's from its own (as each backend would)
      RefKernels().attention_backward(dq_ref.data(), dk_ref.data(), dv_ref.data(), dout.data(), q.data(), k.data(),
                                      v.data(), out_ref.data(), lse_ref.data(), s.B, s.T, s.C, s.H, s.Hkv);
      Dev gq(t, n), gk(t, nkv), gv(t, nkv), scratch(Elem::kF32, cuda::FlashBackwardScratchBytes(s.B, s.T, s.H) / 4);
      ASSERT_TRUE(cuda::FlashAttentionBackward(d, t, gq.p, gk.p, gv.p, ddo.p, dq_.p, dk_.p, dv_.p, out.p,
                                               static_cast<const float*>(lse.p), s.B, s.T, s.C, s.H, s.Hkv, scratch.p)
                      .ok())
          << what;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
      // The parity bounds: 1e-2 in bf16, 1e-5 in f32.
      EXPECT_LT(NormErr(gq.Get(), dq_ref), bf16 ? 1e-2 : 1e-5) << "dq " << what;
      EXPECT_LT(NormErr(gk.Get(), dk_ref), bf16 ? 1e-2 : 1e-5) << "dk " << what;
      EXPECT_LT(NormErr(gv.Get(), dv_ref), bf16 ? 1e-2 : 1e-5) << "dv " << what;
    }
  }
}

TEST(CudaFlashTest, BackwardIsBitwiseReproducible) {
  NEED_GPU();
  const cuda::Device1D d{};
  const Shape s{4, 1000, 768, 12, 4};  // grouped-query: dK and dV sum over three query heads each
  for (Elem t : {Elem::kF32, Elem::kBF16}) {
    const size_t n = static_cast<size_t>(s.B) * s.T * s.C, nl = static_cast<size_t>(s.B) * s.H * s.T;
    const size_t nkv = static_cast<size_t>(s.B) * s.T * s.Ckv();
    Dev q(t, Input(n, 5, t, 1.5f)), k(t, Input(nkv, 6, t, 1.5f)), v(t, Input(nkv, 7, t, 1.0f)),
        g(t, Input(n, 8, t, 1.0f));
    Dev out(t, n), lse(Elem::kF32, nl), scratch(Elem::kF32, cuda::FlashBackwardScratchBytes(s.B, s.T, s.H) / 4);
    ASSERT_TRUE(cuda::FlashAttentionForward(d, t, out.p, static_cast<float*>(lse.p), q.p, k.p, v.p, s.B, s.T, s.C, s.H,
                                            s.Hkv)
                    .ok());
    std::vector<char> first[3];
    for (int run = 0; run < 3; ++run) {
      Dev gq(t, n), gk(t, nkv), gv(t, nkv);
      ASSERT_TRUE(cuda::FlashAttentionBackward(d, t, gq.p, gk.p, gv.p, g.p, q.p, k.p, v.p, out.p,
                                               static_cast<const float*>(lse.p), s.B, s.T, s.C, s.H, s.Hkv, scratch.p)
                      .ok());
      const std::vector<char> got[3] = {gq.Bytes(), gk.Bytes(), gv.Bytes()};
      for (int i = 0; i < 3; ++i) {
        if (run == 0) first[i] = got[i];
        EXPECT_EQ(got[i], first[i]) << "run " << run << " gradient " << i;
      }
    }
  }
}

TEST(CudaFlashTest, AnUnsupportedHeadSizeIsAnInternalStatus) {
  NEED_GPU();
  const cuda::Device1D d{};
  Dev x(Elem::kBF16, 2 * 48), lse(Elem::kF32, 2);
  const Status st = cuda::FlashAttentionForward(d, Elem::kBF16, x.p, static_cast<float*>(lse.p), x.p, x.p, x.p, 1, 2,
                                                48, 1, 1);
  EXPECT_EQ(st.code(), Code::kInternal);
  EXPECT_NE(st.message().find("head size 48"), std::string::npos) << st.message();
  EXPECT_FALSE(cuda::FlashAttentionSupports(48));
  const Status groups = cuda::FlashAttentionForward(d, Elem::kBF16, x.p, static_cast<float*>(lse.p), x.p, x.p, x.p, 1,
                                                    1, 96, 3, 2);  // 3 query heads cannot share 2 key/value heads
  EXPECT_EQ(groups.code(), Code::kInternal);
  EXPECT_NE(groups.message().find("Hkv = 2"), std::string::npos) << groups.message();
  EXPECT_TRUE(cuda::FlashAttentionSupports(64));
}

}  // namespace
}  // namespace anneal
