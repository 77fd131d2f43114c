#include "core/check.h"

#include <gtest/gtest.h>

namespace anneal {
namespace {

TEST(CheckDeathTest, AFailedCheckNamesItsPlaceConditionAndMessage) {
  const int three = 3;
  ANNEAL_CHECK(three == 3, "never printed");
  EXPECT_DEATH(ANNEAL_CHECK(three == 4, "three is not four"),
               "anneal: internal error at .*check_test.cc:[0-9]+: `three == 4` failed: three is not four");
  EXPECT_DEATH(ANNEAL_FAIL("a place never reached"), "anneal: internal error at .*check_test.cc:[0-9]+: a place never reached");
}

}  // namespace
}  // namespace anneal
