#include "model/box.h"

#include <gtest/gtest.h>

#include <numeric>

namespace anneal {
namespace {

// A 6x8 tensor whose element (i, j) holds 100 i + j.
std::vector<float> Tensor() {
  std::vector<float> t(48);
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 8; ++j) t[i * 8 + j] = static_cast<float>(100 * i + j);
  }
  return t;
}

TEST(BoxTest, CopiesAColumnBlockOutOfTheWholeTensor) {
  const std::vector<float> whole = Tensor();
  std::vector<float> cols(6 * 4, -1);
  const size_t n = CopyOverlap(MakeBoxPart({0, 0}, {6, 8}), whole.data(), MakeBoxPart({0, 4}, {6, 4}), cols.data());
  EXPECT_EQ(n, 24u);
  EXPECT_EQ(cols[0], 4);
  EXPECT_EQ(cols[5], 105);   // row 1, column 4 + 1
  EXPECT_EQ(cols[23], 507);  // row 5, column 7
}

TEST(BoxTest, RangesOfBoxesMeetWhereBothHoldElements) {
  // Source: rows 2..5, elements [3, 13) of that box (row-major). Destination: columns 1..3 of
  // every row, elements [5, 15) of that box.
  const std::vector<float> whole = Tensor();
  std::vector<float> src(10);
  for (int k = 0; k < 10; ++k) {
    const int e = 3 + k;
    src[k] = whole[(2 + e / 8) * 8 + e % 8];
  }
  std::vector<float> dst(10, -1);
  const BoxPart s = MakeBoxPart({2, 0}, {4, 8}, 3, 10), d = MakeBoxPart({0, 1}, {6, 3}, 5, 10);
  const size_t n = CopyOverlap(s, src.data(), d, dst.data());
  size_t expect = 0;
  for (int k = 0; k < 10; ++k) {  // destination element 5 + k is (row, col) = ((5+k)/3, 1 + (5+k)%3)
    const int e = 5 + k, i = e / 3, j = 1 + e % 3;
    const int se = (i - 2) * 8 + j;  // its index in the source box
    if (i >= 2 && se >= 3 && se < 13) {
      EXPECT_EQ(dst[k], 100 * i + j) << k;
      ++expect;
    } else {
      EXPECT_EQ(dst[k], -1) << k;
    }
  }
  EXPECT_EQ(n, expect);
  EXPECT_GT(n, 0u);
  EXPECT_EQ(CopyOverlap(s, nullptr, d, nullptr, /*count_only=*/true), n);
}

TEST(BoxTest, OneDimensionalAndEmptyParts) {
  std::vector<float> v(10);
  std::iota(v.begin(), v.end(), 0.0f);
  std::vector<float> out(4, -1);
  EXPECT_EQ(CopyOverlap(MakeBoxPart({0}, {10}), v.data(), MakeBoxPart({6}, {4}), out.data()), 4u);
  EXPECT_EQ(out[0], 6);
  EXPECT_EQ(CopyOverlap(MakeBoxPart({0}, {10}), v.data(), MakeBoxPart({10}, {0}), out.data()), 0u);
  EXPECT_EQ(CopyOverlap(MakeBoxPart({0, 0}, {0, 8}), nullptr, MakeBoxPart({0, 0}, {6, 8}), nullptr, true), 0u);
}

}  // namespace
}  // namespace anneal
