#include "core/text.h"

#include <gtest/gtest.h>

namespace anneal {
namespace {

TEST(Text, TrimTrailingKeepsTheStart) {
  EXPECT_EQ(TrimTrailing("  ann_x \t\r\n"), "  ann_x");
  EXPECT_EQ(TrimTrailing("a b"), "a b");
  EXPECT_EQ(TrimTrailing(" \n\t"), "");
  EXPECT_EQ(TrimTrailing(""), "");
}

TEST(Text, TrimTakesBothEnds) {
  EXPECT_EQ(Trim(" \t key = value \r\n"), "key = value");
  EXPECT_EQ(Trim("x"), "x");
  EXPECT_EQ(Trim(" \r\n "), "");
  EXPECT_EQ(Trim(""), "");
}

}  // namespace
}  // namespace anneal
