// The CUDA elementwise kernels (kernels/cuda/elementwise.h) against the reference kernels, on a GPU:
// fresh random inputs, NaN-poisoned outputs (every element must be written), odd sizes, and an
// offset start (the unaligned scalar path). Without a GPU every test reports skipped (label
// needs-gpu), never passed.
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/rows.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "testing/gpu.h"
#include "testing/numeric.h"

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "kernels/ops.h"
#include "tensor/dtype.h"

namespace anneal {
namespace {

using testing::NormErr;
std::vector<float> Random(size_t n, uint64_t seed, float scale = 1.0f) { return testing::RandomNormal(n, seed, scale); }

using cuda::Elem;


// Device copies of host fp32 values in dtype t, `offset` elements into the allocation.
struct DeviceVec {
  Elem t;
  size_t n, offset;
  void* base = nullptr;
  DeviceVec(Elem t_, const std::vector<float>& host, size_t off) : t(t_), n(host.size()), offset(off) {
    const size_t es = t == Elem::kF32 ? 4 : 2;
    EXPECT_EQ(cudaMalloc(&base, (n + off) * es), cudaSuccess);
    std::vector<char> bytes((n + off) * es, 0);
    for (size_t i = 0; i < n; ++i) {
      if (t == Elem::kF32) {
        std::memcpy(bytes.data() + (off + i) * 4, &host[i], 4);
      } else {
        const uint16_t h = FloatToBf16(host[i]);
        std::memcpy(bytes.data() + (off + i) * 2, &h, 2);
      }
    }
    EXPECT_EQ(cudaMemcpy(base, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceVec() { cudaFree(base); }
  void* p() const { return static_cast<char*>(base) + offset * (t == Elem::kF32 ? 4 : 2); }
  std::vector<float> Get() const {
    std::vector<float> out(n);
    if (t == Elem::kF32) {
      EXPECT_EQ(cudaMemcpy(out.data(), p(), n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    } else {
      std::vector<uint16_t> h(n);
      EXPECT_EQ(cudaMemcpy(h.data(), p(), n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
      for (size_t i = 0; i < n; ++i) out[i] = Bf16ToFloat(h[i]);
    }
    return out;
  }
};

std::vector<float> Rounded(std::vector<float> v, Elem t) {
  if (t == Elem::kBF16) RoundFloatsToBf16(v.data(), v.size());
  return v;
}

TEST(CudaElementwiseTest, GeluResidualScaleAndAccumulateMatchTheReference) {
  NEED_GPU();
  const cuda::Device1D d{};
  for (Elem t : {Elem::kF32, Elem::kBF16}) {
    const double tol = t == Elem::kF32 ? 1e-6 : 1e-2;
    for (size_t n : {1u, 7u, 4099u, 1000003u}) {
      for (size_t off : {0u, 1u}) {
        const std::vector<float> a = Rounded(Random(n, n + 1, 2.0f), t), b = Rounded(Random(n, n + 2), t);
        const std::vector<float> poison(n, std::nanf(""));
        DeviceVec da(t, a, off), db(t, b, off), out(t, poison, off);
        std::vector<float> ref(n);
        ASSERT_TRUE(cuda::Gelu(d, t, out.p(), da.p(), n).ok());
        RefKernels().gelu_forward(ref.data(), a.data(), n);
        EXPECT_LT(NormErr(out.Get(), ref), tol) << "gelu n=" << n;
        ASSERT_TRUE(cuda::GeluBackward(d, t, out.p(), da.p(), db.p(), n).ok());
        RefKernels().gelu_backward(ref.data(), a.data(), b.data(), n);
        EXPECT_LT(NormErr(out.Get(), ref), tol) << "gelu_backward n=" << n;
        ASSERT_TRUE(cuda::Residual(d, t, out.p(), da.p(), db.p(), n).ok());
        RefKernels().residual_forward(ref.data(), a.data(), b.data(), n);
        EXPECT_LT(NormErr(out.Get(), ref), tol) << "residual n=" << n;
        ASSERT_TRUE(cuda::Accumulate(d, t, out.p(), db.p(), n).ok());
        for (size_t i = 0; i < n; ++i) ref[i] += b[i];
        EXPECT_LT(NormErr(out.Get(), ref), tol) << "accumulate n=" << n;
        ASSERT_TRUE(cuda::Scale(d, t, out.p(), 0.25f, n).ok());
        for (auto& x : ref) x *= 0.25f;
        EXPECT_LT(NormErr(out.Get(), ref), tol) << "scale n=" << n;
      }
    }
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST(CudaElementwiseTest, ConvertRoundsToNearestEvenLikeTheHost) {
  NEED_GPU();
  const cuda::Device1D d{};
  for (size_t n : {3u, 4096u, 100001u}) {
    const std::vector<float> a = Random(n, 5, 100.0f);
    DeviceVec src(Elem::kF32, a, 0), dst(Elem::kBF16, std::vector<float>(n, std::nanf("")), 0);
    ASSERT_TRUE(cuda::Convert(d, Elem::kBF16, dst.p(), Elem::kF32, src.p(), n).ok());
    const std::vector<float> got = dst.Get();
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], RoundToBf16(a[i])) << i;
    DeviceVec back(Elem::kF32, std::vector<float>(n, std::nanf("")), 0);
    ASSERT_TRUE(cuda::Convert(d, Elem::kF32, back.p(), Elem::kBF16, dst.p(), n).ok());
    EXPECT_EQ(back.Get(), got);  // widening is exact
  }
}

TEST(CudaElementwiseTest, AdamWMatchesTheReferenceAndWritesTheWorkingCopy) {
  NEED_GPU();
  const cuda::Device1D d{};
  const size_t n = 100003;
  std::vector<float> p = Random(n, 6), m(n, 0.0f), v(n, 0.0f), pr = p, mr = m, vr = v;
  DeviceVec dp(Elem::kF32, p, 0), dm(Elem::kF32, m, 0), dv(Elem::kF32, v, 0);
  DeviceVec work(Elem::kBF16, std::vector<float>(n, std::nanf("")), 0);
  for (int t = 1; t <= 3; ++t) {
    const std::vector<float> g = Random(n, 10 + t, 0.01f);
    DeviceVec dg(Elem::kF32, g, 0);
    ASSERT_TRUE(cuda::AdamW(d, static_cast<float*>(dp.p()), Elem::kF32, dg.p(), static_cast<float*>(dm.p()),
                            static_cast<float*>(dv.p()), static_cast<uint16_t*>(work.p()), n, 6e-4f, 0.9f, 0.95f, 1e-8f,
                            0.1f, t)
                    .ok());
    RefKernels().adamw(pr.data(), g.data(), mr.data(), vr.data(), n, 6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, t);
    EXPECT_LT(NormErr(dp.Get(), pr), 1e-6) << t;
    EXPECT_LT(NormErr(dm.Get(), mr), 1e-6) << t;
  }
  const std::vector<float> master = dp.Get(), w = work.Get();
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(w[i], RoundToBf16(master[i])) << i;
}

// The gradient norm's one read back: SumSquaresEach over many views (one launch over every view's
// blocks when they share a dtype, a launch a view otherwise) gives each view's SumSquares bit for bit,
// again with the table reused and after the views change.
TEST(CudaElementwiseTest, SumSquaresEachEqualsSumSquaresBitForBit) {
  NEED_GPU();
  const cuda::Device1D d{};
  cuda::Scratch scratch;
  cuda::DeviceTable table;
  const size_t sizes[] = {1, 1000, 65536, 65537, 300017, 0, 7};
  std::vector<std::unique_ptr<DeviceVec>> vecs;
  for (size_t k = 0; k < 7; ++k) {
    vecs.push_back(std::make_unique<DeviceVec>(k == 3 ? Elem::kBF16 : Elem::kF32, Random(std::max<size_t>(1, sizes[k]), 300 + k), 0));
  }
  for (bool mixed : {false, true, false}) {
    std::vector<Elem> t;
    std::vector<const void*> g;
    std::vector<size_t> n;
    for (size_t k = 0; k < 7; ++k) {
      if (!mixed && k == 3) continue;  // the bf16 view: only in the mixed round (a launch a view)
      t.push_back(vecs[k]->t);
      g.push_back(vecs[k]->p());
      n.push_back(sizes[k]);
    }
    std::vector<double> each(g.size(), -1);
    ASSERT_TRUE(cuda::SumSquaresEach(d, t.data(), g.data(), n.data(), g.size(), scratch, table, each.data()).ok());
    for (size_t i = 0; i < g.size(); ++i) {
      double one = 0;
      if (n[i]) {
        ASSERT_TRUE(cuda::SumSquares(d, t[i], g[i], n[i], scratch, &one).ok());
      }
      EXPECT_EQ(each[i], one) << "view " << i << (mixed ? " (mixed dtypes)" : "");
    }
  }
}

// The multi-tensor AdamW (one launch over chunks of many ranges, each with its weight decay) updates
// every element exactly as one AdamW call a range does, bit for bit, and writes the bf16 working copy.
TEST(CudaElementwiseTest, AdamWChunksEqualsOneAdamWARange) {
  NEED_GPU();
  const cuda::Device1D d{};
  const size_t sizes[] = {7, 70000, 1, 131072, 513};
  std::vector<cuda::AdamWChunk> chunks;
  size_t n = 0;
  for (size_t k = 0; k < 5; ++k) {
    for (size_t o = 0; o < sizes[k]; o += cuda::kAdamWChunk) {
      chunks.push_back({n + o, std::min(cuda::kAdamWChunk, sizes[k] - o), k % 2 ? 0.0f : 0.1f});
    }
    n += sizes[k];
  }
  const std::vector<float> p = Random(n, 8), g = Random(n, 9, 0.01f), m = Random(n, 10, 0.01f);
  std::vector<float> v = Random(n, 11, 0.01f);
  for (float& x : v) x = x * x;
  DeviceVec pa(Elem::kF32, p, 0), ma(Elem::kF32, m, 0), va(Elem::kF32, v, 0), ga(Elem::kBF16, g, 0);
  DeviceVec pb(Elem::kF32, p, 0), mb(Elem::kF32, m, 0), vb(Elem::kF32, v, 0);
  DeviceVec work(Elem::kBF16, std::vector<float>(n, std::nanf("")), 0);
  size_t at = 0;
  for (size_t k = 0; k < 5; ++k) {
    const auto f = [&](const DeviceVec& x) { return static_cast<float*>(x.p()) + at; };
    ASSERT_TRUE(cuda::AdamW(d, f(pa), Elem::kBF16, static_cast<uint16_t*>(ga.p()) + at, f(ma), f(va), nullptr,
                            sizes[k], 6e-4f, 0.9f, 0.95f, 1e-8f, k % 2 ? 0.0f : 0.1f, 3)
                    .ok());
    at += sizes[k];
  }
  void* table = nullptr;
  ASSERT_EQ(cudaMalloc(&table, chunks.size() * sizeof(cuda::AdamWChunk)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(table, chunks.data(), chunks.size() * sizeof(cuda::AdamWChunk), cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_TRUE(cuda::AdamWChunks(d, static_cast<float*>(pb.p()), Elem::kBF16, ga.p(), static_cast<float*>(mb.p()),
                                static_cast<float*>(vb.p()), static_cast<uint16_t*>(work.p()),
                                static_cast<const cuda::AdamWChunk*>(table), chunks.size(), 6e-4f, 0.9f, 0.95f, 1e-8f, 3)
                  .ok());
  cudaFree(table);
  const std::vector<float> a = pa.Get(), b = pb.Get(), w = work.Get();
  const std::vector<float> am = ma.Get(), bm = mb.Get(), av = va.Get(), bv = vb.Get();
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(a[i], b[i]) << i;
    ASSERT_EQ(am[i], bm[i]) << i;
    ASSERT_EQ(av[i], bv[i]) << i;
    ASSERT_EQ(w[i], RoundToBf16(b[i])) << i;
  }
}

// The deterministic sum of squares: the device's result equals the host's reproduction of its order
// (kernels/cuda/launch.h ChunkedSumSquaresOnHost) bit for bit, and is the same on every run.
TEST(CudaElementwiseTest, SumSquaresIsTheHostReproducibleOrderBitForBit) {
  NEED_GPU();
  const cuda::Device1D d{};
  cuda::Scratch scratch;
  for (size_t n : {1u, 1000u, 65536u, 65537u, 3000017u}) {
    const std::vector<float> g = Random(n, 77 + n);
    DeviceVec dg(Elem::kF32, g, 0);
    double a = 0, b = 0;
    ASSERT_TRUE(cuda::SumSquares(d, Elem::kF32, dg.p(), n, scratch, &a).ok());
    ASSERT_TRUE(cuda::SumSquares(d, Elem::kF32, dg.p(), n, scratch, &b).ok());
    const double host = cudalaunch::ChunkedSumSquaresOnHost(n, [&](size_t i) { return g[i]; });
    EXPECT_EQ(a, host) << n;
    EXPECT_EQ(a, b) << n;
  }
}

}  // namespace
}  // namespace anneal
