// A folder's owner lock (core/dir_lock.h): held while its process lives, free once it ends however
// it ends (here: SIGKILL), refused to a second owner.
#include "core/dir_lock.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testing/temp_dir.h"

namespace anneal {
namespace {

TEST(DirLock, HeldWhileItsProcessLivesAndFreeOnceItIsKilled) {
  testing::TempDir dir;
  EXPECT_TRUE(DirLockFree(dir.path()));  // no lock file: free
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const bool held = HoldDirLock(dir.path()).ok();
    (void)!::write(ready[1], held ? "1" : "0", 1);
    for (;;) ::pause();
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, '1');
  EXPECT_FALSE(DirLockFree(dir.path()));
  const Status second = HoldDirLock(dir.path());
  EXPECT_EQ(second.code(), Code::kInvalidInput);
  EXPECT_NE(second.message().find("--work-dir"), std::string::npos) << second.message();
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_TRUE(DirLockFree(dir.path()));
  EXPECT_TRUE(HoldDirLock(dir.path()).ok());  // now this process's, for the rest of the test binary
  EXPECT_FALSE(DirLockFree(dir.path()));
  ::close(ready[0]);
  ::close(ready[1]);
}

}  // namespace
}  // namespace anneal
