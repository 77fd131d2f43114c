#include "core/status.h"

#include <gtest/gtest.h>

namespace anneal {
namespace {

TEST(StatusTest, ExitCodesFollowDesign) {
  EXPECT_EQ(Status::Ok().ExitCode(), 0);
  EXPECT_EQ(InvalidInput("x").ExitCode(), 2);
  EXPECT_EQ(NotFound("x").ExitCode(), 2);
  EXPECT_EQ(IoError("x").ExitCode(), 1);
  EXPECT_EQ(Internal("x").ExitCode(), 1);
  EXPECT_EQ(PeerError("x").ExitCode(), 3);
}

TEST(StatusTest, AnnotateKeepsCode) {
  Status s = InvalidInput("bad shard").Annotate("loading data");
  EXPECT_EQ(s.code(), Code::kInvalidInput);
  EXPECT_EQ(s.message(), "loading data: bad shard");
  EXPECT_EQ(s.ToString(), "invalid input: loading data: bad shard");
  EXPECT_TRUE(Status::Ok().Annotate("x").ok());
}

Result<int> Half(int x) {
  if (x % 2) return InvalidInput("odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  ANNEAL_ASSIGN_OR_RETURN(int h, Half(x));
  return Half(h);
}

TEST(StatusTest, ResultPropagates) {
  EXPECT_EQ(*Quarter(8), 2);
  auto r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "odd");
  // A Result built from an ok Status is an error, never a silent empty value.
  Result<int> bad{Status::Ok()};
  EXPECT_FALSE(bad.ok());
}

}  // namespace
}  // namespace anneal
