// launch/nofollow.h: paths opened, walked and chowned without ever following a link.
#include "launch/nofollow.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>

#include "testing/temp_dir.h"

namespace anneal {
namespace {

TEST(OpenNoFollow, OpensAFolderAndMakesMissingOnes) {
  testing::TempDir t;
  auto fd = OpenNoFollow(t.File("a/b/c"), /*create=*/true);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  struct stat st {};
  ASSERT_EQ(::stat(t.File("a/b/c").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_FALSE(OpenNoFollow(t.File("x/y"), false).ok());  // not made without create
}

TEST(OpenNoFollow, RefusesALinkAnywhereInThePath) {
  testing::TempDir t;
  t.Write("real/inner/file", "x");
  ASSERT_EQ(::symlink(t.File("real").c_str(), t.File("link").c_str()), 0);
  ASSERT_EQ(::symlink(t.File("real/inner/file").c_str(), t.File("real/filelink").c_str()), 0);
  auto mid = OpenNoFollow(t.File("link/inner"), false);
  ASSERT_FALSE(mid.ok());
  EXPECT_NE(mid.status().message().find(t.File("link") + " is a symbolic link"), std::string::npos) << mid.status().ToString();
  EXPECT_FALSE(OpenNoFollow(t.File("link"), false).ok());                    // the last component
  EXPECT_FALSE(OpenNoFollow(t.File("real/filelink"), false).ok());           // a link to a file
  EXPECT_FALSE(OpenNoFollow(t.File("link/new"), /*create=*/true).ok());      // nothing made through it
  EXPECT_FALSE(OpenNoFollow(t.File("real/../real"), false).ok());            // no '..'
  EXPECT_TRUE(OpenNoFollow(t.File("real/inner/file"), false).ok());          // a file itself
}

TEST(OpenNoFollow, AParentCheckStopsTheOpen) {
  testing::TempDir t;
  t.Write("a/b/f", "x");
  std::vector<std::string> seen;
  auto fd = OpenNoFollow(t.File("a/b"), false, [&](const std::string& p, const struct stat&) {
    seen.push_back(p);
    return p == t.File("a") ? InvalidInput("not under a") : Status::Ok();
  });
  EXPECT_FALSE(fd.ok());
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front(), "/");
  EXPECT_EQ(seen.back(), t.File("a"));
}

TEST(WalkNoFollow, VisitsLinksWithoutEnteringThem) {
  testing::TempDir t;
  t.Write("tree/a/f1", "1");
  t.Write("tree/b", "2");
  t.Write("outside/secret", "s");
  ASSERT_EQ(::symlink(t.File("outside").c_str(), t.File("tree/a/link").c_str()), 0);
  auto fd = OpenNoFollow(t.File("tree"), false);
  ASSERT_TRUE(fd.ok());
  std::set<std::string> rels;
  ASSERT_TRUE(WalkNoFollow(fd->get(), [&](int, const std::string&, const std::string& rel, const struct stat&) {
                rels.insert(rel);
                return Status::Ok();
              }).ok());
  EXPECT_EQ(rels, (std::set<std::string>{"a", "a/f1", "a/link", "b"}));
}

TEST(ChownTreeNoFollow, ChangesTheTreeAndNeverALinksTarget) {
  if (::geteuid() != 0) GTEST_SKIP() << "chown to another uid needs root";
  testing::TempDir t;
  t.Write("tree/a/f1", "1");
  t.Write("outside/secret", "s");
  ASSERT_EQ(::symlink(t.File("outside/secret").c_str(), t.File("tree/a/link").c_str()), 0);
  auto fd = OpenNoFollow(t.File("tree"), false);
  ASSERT_TRUE(fd.ok());
  ASSERT_TRUE(ChownTreeNoFollow(fd->get(), 4242, 4243).ok());
  struct stat st {};
  for (const char* p : {"tree", "tree/a", "tree/a/f1", "tree/a/link"}) {
    ASSERT_EQ(::lstat(t.File(p).c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 4242u) << p;
    EXPECT_EQ(st.st_gid, 4243u) << p;
  }
  ASSERT_EQ(::lstat(t.File("outside/secret").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);  // the link's target kept its owner
}

}  // namespace
}  // namespace anneal
