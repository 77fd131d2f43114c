#include "core/env.h"

#include <gtest/gtest.h>

#include "testing/fault_env.h"
#include "testing/temp_dir.h"

namespace anneal {
namespace {

TEST(EnvTest, WriteAtomicThenRead) {
  testing::TempDir dir;
  Env& env = Env::Default();
  std::string p = dir.File("a.txt");
  ASSERT_TRUE(env.WriteFileAtomic(p, "hello").ok());
  EXPECT_EQ(*env.ReadFile(p), "hello");
  ASSERT_TRUE(env.WriteFileAtomic(p, "world!").ok());
  EXPECT_EQ(*env.ReadFile(p), "world!");
  EXPECT_EQ(*env.FileSize(p), 6u);
  // No temporary file is left behind.
  EXPECT_EQ(env.ListDir(dir.path())->size(), 1u);
}

TEST(EnvTest, FailedWriteKeepsOldFileAndLeavesNoTemp) {
  testing::TempDir dir;
  testing::FaultEnv env(Env::Default());
  std::string p = dir.File("a.txt");
  ASSERT_TRUE(env.WriteFileAtomic(p, "old").ok());
  env.FailAppendNumber(env.appends() + 1);
  Status st = env.WriteFileAtomic(p, "new contents");
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(*env.ReadFile(p), "old");
  EXPECT_EQ(env.ListDir(dir.path())->size(), 1u);
  env.FailRenameNumber(env.renames() + 1);
  EXPECT_FALSE(env.WriteFileAtomic(p, "newer").ok());
  EXPECT_EQ(*env.ReadFile(p), "old");
  EXPECT_EQ(env.ListDir(dir.path())->size(), 1u);
}

TEST(EnvTest, MissingFileIsNotFoundWithPath) {
  auto r = Env::Default().ReadFile("/nonexistent/anneal/file");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/anneal/file"), std::string::npos);
}

TEST(EnvTest, ListFilesRecursiveSortedSkipsHidden) {
  testing::TempDir dir;
  dir.Write("b/2.txt", "x");
  dir.Write("b/1.txt", "x");
  dir.Write("a.txt", "x");
  dir.Write(".hidden/x.txt", "x");
  auto files = Env::Default().ListFilesRecursive(dir.path());
  ASSERT_TRUE(files.ok());
  std::vector<std::string> want = {dir.File("a.txt"), dir.File("b/1.txt"), dir.File("b/2.txt")};
  EXPECT_EQ(*files, want);
}

TEST(EnvTest, MapReadsBytes) {
  testing::TempDir dir;
  std::string p = dir.Write("m.bin", std::string("abc\0def", 7));
  auto m = Env::Default().Map(p, Env::MapMode::kPopulate);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(std::string((*m)->data(), (*m)->size()), std::string("abc\0def", 7));
}

}  // namespace
}  // namespace anneal
