// The CUDA kernels' launch geometry (kernels/cuda/launch.h), enumerated on the host: every element
// or row visited exactly once on odd sizes, whole vectors only where they fit, and the reduction
// order reproducible.
#include "kernels/cuda/launch.h"

#include <gtest/gtest.h>

#include <vector>

namespace anneal {
namespace {

using namespace cudalaunch;

TEST(CudaLaunchTest, ElementwiseVisitsEveryElementOnce) {
  for (size_t n : {0u, 1u, 3u, 7u, 8u, 9u, 255u, 1023u, 4097u, 1000003u}) {
    for (size_t elem : {4u, 2u}) {
      for (bool aligned : {true, false}) {
        for (int sms : {1, 132}) {
          const Elementwise e = PlanElementwise(n, elem, aligned, sms);
          ASSERT_EQ(e.vec * elem, aligned ? 16u : elem);
          ASSERT_GE(e.blocks, 1u);
          std::vector<int> hits(n, 0);
          for (uint32_t b = 0; b < e.blocks; ++b) {
            for (uint32_t t = 0; t < e.threads; ++t) {
              e.Visit(b, t, [&](size_t first, size_t count) {
                ASSERT_TRUE(count == e.vec || first + count == n) << "a partial piece that is not the tail";
                if (count == e.vec) {
                  ASSERT_EQ(first % e.vec, 0u) << "a vector off its 16-byte boundary";
                }
                for (size_t i = first; i < first + count; ++i) ++hits[i];
              });
            }
          }
          for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << "n=" << n << " elem=" << elem << " i=" << i;
        }
      }
    }
  }
}

TEST(CudaLaunchTest, RowsGiveEachRowToOneWarpAndEachColumnToOneLane) {
  for (int64_t rows : {1, 5, 8, 9, 1023}) {
    for (int64_t cols : {1, 31, 32, 33, 769}) {
      Rows r;
      r.rows = rows;
      r.cols = cols;
      std::vector<int> hits(static_cast<size_t>(rows * cols), 0);
      for (uint32_t b = 0; b < r.blocks(); ++b) {
        for (uint32_t w = 0; w < r.warps_per_block; ++w) {
          for (uint32_t l = 0; l < 32; ++l) r.Visit(b, w, l, [&](int64_t i, int64_t c) { ++hits[i * cols + c]; });
        }
      }
      for (int h : hits) ASSERT_EQ(h, 1) << rows << "x" << cols;
      EXPECT_EQ(r.threads(), 32 * r.warps_per_block);
    }
  }
}

TEST(CudaLaunchTest, ChunkedSumCoversAndItsOrderIsReproducible) {
  for (size_t n : {1u, 100u, 65536u, 65537u, 300001u}) {
    ChunkedSum s = PlanChunkedSum(n);
    std::vector<int> hits(n, 0);
    std::vector<double> block_sums;
    for (uint32_t b = 0; b < s.blocks(); ++b) {
      std::vector<double> partial(s.threads, 0.0);
      for (uint32_t t = 0; t < s.threads; ++t) {
        s.Visit(b, t, [&](size_t i) {
          ++hits[i];
          partial[t] += 1.0 / static_cast<double>(i + 1);
        });
      }
      block_sums.push_back(TreeOrder(partial.data(), s.threads));
    }
    for (int h : hits) ASSERT_EQ(h, 1) << n;
    double total = 0, exact = 0;
    for (double x : block_sums) total += x;
    for (size_t i = 0; i < n; ++i) exact += 1.0 / static_cast<double>(i + 1);
    EXPECT_NEAR(total, exact, 1e-12 * exact) << n;
  }
  std::vector<float> v = {1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(TreeOrder(v.data(), 8), 36.0f);  // ((1+5)+(3+7)) + ((2+6)+(4+8))
  EXPECT_EQ(v[1], 20.0f);                    // (2+6)+(4+8): the order is the one written down
}

TEST(CudaLaunchTest, TheHostReproductionOfTheSumOfSquaresIsExactEnough) {
  for (size_t n : {1u, 7u, 65536u, 200003u}) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7919) % 1000) / 250.0f - 2.0f;
    double exact = 0;
    for (float x : v) exact += static_cast<double>(x) * x;
    const double got = ChunkedSumSquaresOnHost(n, [&](size_t i) { return v[i]; });
    EXPECT_NEAR(got, exact, 1e-12 * exact) << n;
  }
}

}  // namespace
}  // namespace anneal
