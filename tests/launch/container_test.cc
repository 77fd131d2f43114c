// launch/container.h: the podman command line of a job's container.
#include "launch/container.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace anneal {
namespace {

SandboxPlan Plan() {
  SandboxPlan p;
  p.uid = p.gid = 2000000042;
  p.name = "inst-job-0";
  p.image = "localhost/team/torch:1";
  p.writable = {"/work/jobs/job", "/ckpt/job"};
  p.readable = {"/data/kjv"};
  p.tmp_dir = "/work/jobs/job/tmp";
  p.devices = {"/dev/nvidia0", "/dev/nvidiactl"};
  p.cgroups = {"/sys/fs/cgroup/memory/anneal/inst-job-0", "/sys/fs/cgroup/cpu/anneal/inst-job-0"};
  return p;
}

// The value after flag (each occurrence).
std::vector<std::string> After(const std::vector<std::string>& a, const std::string& flag) {
  std::vector<std::string> out;
  for (size_t i = 0; i + 1 < a.size(); ++i) {
    if (a[i] == flag) out.push_back(a[i + 1]);
  }
  return out;
}

TEST(PodmanArgv, RunsTheImageAsTheJobsUidWithItsFoldersDevicesAndCgroup) {
  const auto a = PodmanArgv(Plan(), {"python3", "train.py"}, "/work/jobs/job/code", "1", false, "", false);
  ASSERT_GE(a.size(), 4u);
  EXPECT_EQ(a[0], "podman");
  EXPECT_EQ(After(a, "--user"), std::vector<std::string>{"2000000042:2000000042"});
  EXPECT_EQ(After(a, "--name"), std::vector<std::string>{"anneal-inst-job-0-1"});  // local rank 1's
  EXPECT_EQ(After(a, "--cgroup-parent"), std::vector<std::string>{"/anneal/inst-job-0"});
  EXPECT_EQ(After(a, "--cap-drop"), std::vector<std::string>{"all"});
  EXPECT_EQ(After(a, "--security-opt"), std::vector<std::string>{"no-new-privileges"});
  EXPECT_EQ(After(a, "--pull"), std::vector<std::string>{"never"});
  EXPECT_EQ(After(a, "--workdir"), std::vector<std::string>{"/work/jobs/job/code"});
  EXPECT_EQ(After(a, "--volume"), (std::vector<std::string>{"/work/jobs/job/tmp:/tmp:rw", "/work/jobs/job:/work/jobs/job:rw",
                                                              "/ckpt/job:/ckpt/job:rw", "/data/kjv:/data/kjv:ro"}));
  EXPECT_EQ(After(a, "--device"), (std::vector<std::string>{"/dev/nvidia0", "/dev/nvidiactl"}));
  EXPECT_NE(std::find(a.begin(), a.end(), "--env-host"), a.end());  // the environment never on the command line
  EXPECT_NE(std::find(a.begin(), a.end(), "--init"), a.end());
  // The image, then the command, last.
  ASSERT_GE(a.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(a.end() - 3, a.end()), (std::vector<std::string>{"localhost/team/torch:1", "python3", "train.py"}));
}

TEST(PodmanArgv, EnterExecsInLocalRankZerosContainer) {
  const auto a = PodmanArgv(Plan(), {"sh"}, "/work/jobs/job/code", "", true, "/run/anneal/exec-env.x", true);
  ASSERT_GT(a.size(), 3u);
  EXPECT_NE(std::find(a.begin(), a.end(), "exec"), a.end());
  EXPECT_EQ(std::find(a.begin(), a.end(), "run"), a.end());
  EXPECT_EQ(After(a, "--env-file"), std::vector<std::string>{"/run/anneal/exec-env.x"});
  EXPECT_EQ(After(a, "--user"), std::vector<std::string>{"2000000042:2000000042"});
  EXPECT_NE(std::find(a.begin(), a.end(), "-t"), a.end());
  EXPECT_EQ(std::vector<std::string>(a.end() - 2, a.end()), (std::vector<std::string>{"anneal-inst-job-0-0", "sh"}));
}

}  // namespace
}  // namespace anneal
