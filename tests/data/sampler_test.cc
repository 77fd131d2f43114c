#include "data/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace anneal {
namespace {

TEST(SamplerTest, PermutationIsABijectionForManySizes) {
  for (uint64_t n : {1ull, 2ull, 3ull, 5ull, 16ull, 17ull, 100ull, 1000ull, 4097ull}) {
    Permutation p(n, 12345);
    std::vector<uint64_t> out(n);
    for (uint64_t i = 0; i < n; ++i) out[i] = p(i);
    std::sort(out.begin(), out.end());
    std::vector<uint64_t> want(n);
    std::iota(want.begin(), want.end(), 0);
    EXPECT_EQ(out, want) << "n=" << n;
  }
}

TEST(SamplerTest, PermutationShufflesAndDependsOnKey) {
  const uint64_t n = 1000;
  Permutation a(n, 1), b(n, 2);
  int fixed = 0, same = 0;
  for (uint64_t i = 0; i < n; ++i) {
    fixed += a(i) == i;
    same += a(i) == b(i);
  }
  EXPECT_LT(fixed, 20);  // a random permutation has ~1 fixed point
  EXPECT_LT(same, 20);
}

TEST(SamplerTest, StreamReshufflesEachEpochAndCoversAll) {
  SampleStream s(50, 7, true);
  std::vector<uint64_t> e0, e1;
  for (uint64_t p = 0; p < 50; ++p) e0.push_back(s.At(p));
  for (uint64_t p = 50; p < 100; ++p) e1.push_back(s.At(p));
  EXPECT_NE(e0, e1);
  std::sort(e0.begin(), e0.end());
  std::sort(e1.begin(), e1.end());
  EXPECT_EQ(e0, e1);
  EXPECT_EQ(e0.front(), 0u);
  EXPECT_EQ(e0.back(), 49u);
  SampleStream ordered(50, 7, false);
  EXPECT_EQ(ordered.At(53), 3u);
}

TEST(SamplerTest, PositionJsonRoundTrip) {
  LoaderPosition p{42, 1u << 20};
  auto back = LoaderPosition::FromJson(p.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->seed, 42u);
  EXPECT_EQ(back->samples, 1u << 20);
  EXPECT_FALSE(LoaderPosition::FromJson("{\"seed\":-1}").ok());
}

}  // namespace
}  // namespace anneal
