#include "core/env.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>

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

std::string Pattern(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((seed = seed * 1664525u + 1013904223u) >> 24);
  return s;
}

// Whether the file's first page is in the page cache (mincore), before anything reads it.
bool FirstPageCached(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  void* m = ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  unsigned char vec = 0;
  const bool ok = m != MAP_FAILED && ::mincore(m, 4096, &vec) == 0;
  if (m != MAP_FAILED) ::munmap(m, 4096);
  return ok && (vec & 1);
}

// Large pieces go around the page cache (O_DIRECT), the rest through it; every mix of aligned and
// unaligned sources and offsets reads back byte for byte, and tmpfs (no O_DIRECT) still works.
TEST(EnvTest, LargeWritesBypassThePageCacheAndReadBackExactly) {
  testing::TempDir dir;
  Env& env = Env::Default();
  const std::string big = Pattern((20 << 20) + 1234, 7);
  const std::string p = dir.File("big.bin");
  ASSERT_TRUE(env.WriteFileAtomic(p, big).ok());  // std::string's buffer: unaligned, through the bounce buffer
  EXPECT_FALSE(FirstPageCached(p)) << "a 20 MB write went through the page cache";
  EXPECT_EQ(*env.ReadFile(p), big);

  std::unique_ptr<char, decltype(&std::free)> aligned(static_cast<char*>(std::aligned_alloc(4096, 24 << 20)), &std::free);
  std::memcpy(aligned.get(), big.data(), big.size());
  ASSERT_TRUE(env.WriteFileAtomic(p, std::string_view(aligned.get(), big.size())).ok());  // straight from the source
  EXPECT_FALSE(FirstPageCached(p));
  EXPECT_EQ(*env.ReadFile(p), big);

  // Appends: a 4 KB head keeps the offset aligned (direct after it); a 100-byte head does not (buffered).
  for (size_t head : {size_t{4096}, size_t{100}}) {
    auto f = env.OpenForWrite(p);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->Append(std::string_view(big).substr(0, head)).ok());
    ASSERT_TRUE((*f)->Append(std::string_view(big).substr(head)).ok());
    ASSERT_TRUE((*f)->Append("tail").ok());
    ASSERT_TRUE((*f)->Close().ok());
    EXPECT_EQ(*env.ReadFile(p), big + "tail") << "head " << head;
  }
  const std::string shm = "/dev/shm/anneal_env_test_" + std::to_string(::getpid());
  ASSERT_TRUE(env.WriteFileAtomic(shm, big).ok()) << "tmpfs refuses O_DIRECT: the page cache must take it";
  EXPECT_EQ(*env.ReadFile(shm), big);
  ::unlink(shm.c_str());
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
