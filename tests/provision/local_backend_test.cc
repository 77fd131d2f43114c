// The local backend's report of agents' folders whose agent is gone (ProvisionReport::gone_dirs):
// also those a previous server's agents left, found by their free owner lock; never a folder that
// is not an agent's, nor one whose owner lives.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/dir_lock.h"
#include "core/env.h"
#include "provision/instance_provider.h"
#include "testing/temp_dir.h"

namespace anneal {
namespace {

TEST(LocalBackend, ReportsTheFoldersOfAgentsAPreviousServerStartedOnceTheyAreGone) {
  testing::TempDir root;
  for (const char* d : {"dead-a0-n0", "spool-only", "alive-a0-n0", "users-own"}) {
    ASSERT_TRUE(Env::Default().CreateDirs(root.File(d)).ok());
  }
  ASSERT_TRUE(Env::Default().WriteFileAtomic(root.File("dead-a0-n0/.owner.lock"), "").ok());  // its owner is gone
  ASSERT_TRUE(Env::Default().CreateDirs(root.File("spool-only/spool")).ok());  // an agent that ended, records undelivered
  ASSERT_TRUE(Env::Default().WriteFileAtomic(root.File("users-own/notes.txt"), "keep me").ok());
  ASSERT_TRUE(Env::Default().WriteFileAtomic(root.File("a-log.log"), "").ok());
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t owner = ::fork();
  ASSERT_GE(owner, 0);
  if (owner == 0) {  // a live agent of the previous server
    (void)!::write(ready[1], HoldDirLock(root.File("alive-a0-n0")).ok() ? "1" : "0", 1);
    for (;;) ::pause();
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, '1');
  LocalBackendOptions o;
  o.work_root = root.path();
  auto backend = MakeLocalBackend(o);
  ProvisionReport r = backend->Poll();
  EXPECT_EQ(r.gone_dirs.size(), 2u);
  EXPECT_EQ(r.gone_dirs["dead-a0-n0"], root.File("dead-a0-n0"));
  EXPECT_EQ(r.gone_dirs["spool-only"], root.File("spool-only"));
  EXPECT_TRUE(r.gone.empty());  // not instances of this server's
  ::kill(owner, SIGKILL);
  ::waitpid(owner, nullptr, 0);
  r = backend->Poll();
  EXPECT_EQ(r.gone_dirs.count("alive-a0-n0"), 1u);  // its agent died
  EXPECT_EQ(r.gone_dirs.count("users-own"), 0u);
  ::close(ready[0]);
  ::close(ready[1]);
}

}  // namespace
}  // namespace anneal
