#include "core/checksum.h"

#include <gtest/gtest.h>

namespace anneal {
namespace {

TEST(ChecksumTest, KnownXxh64Values) {
  // Reference values of XXH64 with seed 0 (xxHash's published test vectors).
  EXPECT_EQ(Xxh64(""), 0xEF46DB3751D8E999ULL);
  EXPECT_EQ(HexU64(Xxh64("")), "ef46db3751d8e999");
}

TEST(ChecksumTest, StreamEqualsOneShot) {
  std::string s(100000, 'x');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(i * 31 + 7);
  Xxh64Stream st(42);
  st.Update(std::string_view(s).substr(0, 333));
  st.Update(std::string_view(s).substr(333));
  EXPECT_EQ(st.Digest(), Xxh64(s, 42));
  EXPECT_NE(Xxh64(s, 42), Xxh64(s, 43));
}

}  // namespace
}  // namespace anneal
