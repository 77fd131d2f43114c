// The agent's local pre-start health checks (agent/health_check.h) on this machine: small thresholds
// pass, impossible ones fail naming what was short, and the operator's command check reports its exit
// code, its output and the environment it was given.
#include "agent/health_check.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <thread>

#include "core/env.h"
#include "core/progress.h"
#include "testing/temp_dir.h"

namespace anneal {
namespace {

using nlohmann::json;

HealthCheckOptions Small(const testing::TempDir& dir) {
  HealthCheckOptions o;
  o.slots = 1;
  o.min_free_memory_gb = 0.01;
  o.min_free_disk_gb = 0.001;
  o.work_dir = dir.path();
  return o;
}

const json& Find(const json& checks, const std::string& name) {
  for (const json& c : checks) {
    if (c["name"] == name) return c;
  }
  static const json none;
  ADD_FAILURE() << "no check named " << name << " in " << checks.dump();
  return none;
}

TEST(HealthCheck, LocalChecksPassOnThisMachineWithSmallThresholds) {
  testing::TempDir dir;
  const json checks = RunLocalHealthChecks(Small(dir));
  ASSERT_TRUE(checks.is_array());
  std::vector<std::string> names;
  for (const json& c : checks) names.push_back(c["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"cpu", "memory", "disk", "gpu", "command"}));
  EXPECT_TRUE(AllChecksOk(checks)) << checks.dump(2);
  EXPECT_EQ(DescribeFailedChecks(checks), "all checks passed");
  const json& cpu = Find(checks, "cpu");
  EXPECT_GE(cpu["cpus"].get<int>(), 1);
  EXPECT_GT(cpu["gflops"].get<double>(), 0);
  EXPECT_GT(Find(checks, "memory")["available_gb"].get<double>(), 0.01);
  const json& disk = Find(checks, "disk");
  EXPECT_GT(disk["write_mbps"].get<double>(), 0);
  EXPECT_EQ(disk["path"], dir.path());
  EXPECT_EQ(Find(checks, "command")["skipped"], "no health-check command configured");
  for (const json& c : checks) {
    EXPECT_TRUE(c["detail"].is_string() && !c["detail"].get<std::string>().empty()) << c.dump();
    EXPECT_GE(c["seconds"].get<double>(), 0) << c.dump();
  }
  // The disk probe leaves nothing behind.
  EXPECT_TRUE(Env::Default().ListDir(dir.path())->empty());
}

TEST(HealthCheck, HugeDiskThresholdFailsNamingTheDisk) {
  testing::TempDir dir;
  HealthCheckOptions o = Small(dir);
  o.min_free_disk_gb = 1e9;  // an exabyte
  const json c = CheckDisk(o);
  EXPECT_FALSE(c["ok"].get<bool>());
  EXPECT_EQ(c["name"], "disk");
  const std::string d = c["detail"];
  EXPECT_NE(d.find(dir.path()), std::string::npos) << d;
  EXPECT_NE(d.find("below min_free_disk_gb"), std::string::npos) << d;
  EXPECT_NE(DescribeFailedChecks(json::array({c})).find("disk: "), std::string::npos);
}

TEST(HealthCheck, DiskThatCannotBeWrittenFails) {
  HealthCheckOptions o;
  o.work_dir = "/proc";  // statvfs works, creating a file does not
  const json c = CheckDisk(o);
  EXPECT_FALSE(c["ok"].get<bool>()) << c.dump();
  EXPECT_NE(c["detail"].get<std::string>().find("writing and reading back a 4 MiB file failed"), std::string::npos)
      << c.dump();
}

TEST(HealthCheck, HugeMemoryThresholdFails) {
  testing::TempDir dir;
  HealthCheckOptions o = Small(dir);
  o.min_free_memory_gb = 1e9;
  const json c = CheckMemory(o);
  EXPECT_FALSE(c["ok"].get<bool>());
  EXPECT_NE(c["detail"].get<std::string>().find("below min_free_memory_gb"), std::string::npos) << c.dump();
}

TEST(HealthCheck, MoreSlotsThanCpusFails) {
  testing::TempDir dir;
  HealthCheckOptions o = Small(dir);
  o.slots = 100000;
  const json c = CheckCpu(o);
  EXPECT_FALSE(c["ok"].get<bool>());
  EXPECT_NE(c["detail"].get<std::string>().find("fewer CPUs than slots"), std::string::npos) << c.dump();
}

TEST(HealthCheck, CommandExitCodeIsUnhealthy) {
  testing::TempDir dir;
  HealthCheckOptions o = Small(dir);
  o.command = "echo checking the fabric; echo 'ib0 is down' >&2; exit 3";
  const json c = CheckCommand(o);
  EXPECT_FALSE(c["ok"].get<bool>());
  EXPECT_EQ(c["exit_code"].get<int>(), 3);
  const std::string d = c["detail"];
  EXPECT_NE(d.find("exit code 3"), std::string::npos) << d;
  EXPECT_NE(d.find("ib0 is down"), std::string::npos) << d;  // stderr too, the last lines
  // And in the whole list: the failure is the command's.
  const json all = RunLocalHealthChecks(o);
  EXPECT_FALSE(AllChecksOk(all));
  EXPECT_EQ(DescribeFailedChecks(all).rfind("command: ", 0), 0u) << DescribeFailedChecks(all);
}

TEST(HealthCheck, CommandTruePasses) {
  testing::TempDir dir;
  HealthCheckOptions o = Small(dir);
  o.command = "true";
  const json c = CheckCommand(o);
  EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
  EXPECT_EQ(c["exit_code"].get<int>(), 0);
}

TEST(HealthCheck, CommandSeesItsEnvironment) {
  testing::TempDir dir;
  HealthCheckOptions o = Small(dir);
  o.command_env = {{"ANNEAL_INSTANCE_ID", "i-7"}, {"ANNEAL_JOB", "job-3"}, {"ANNEAL_NODE", "1"}};
  o.command = "test \"$ANNEAL_INSTANCE_ID/$ANNEAL_JOB/$ANNEAL_NODE\" = i-7/job-3/1 && test -n \"$PATH\"";
  EXPECT_TRUE(CheckCommand(o)["ok"].get<bool>());
  o.command = "echo \"saw $ANNEAL_JOB on node $ANNEAL_NODE\"; exit 1";
  const json c = CheckCommand(o);
  EXPECT_NE(c["detail"].get<std::string>().find("saw job-3 on node 1"), std::string::npos) << c.dump();
}

TEST(HealthCheck, CommandGetsDefaultSignalsAndNoInput) {
  testing::TempDir dir;
  HealthCheckOptions o = Small(dir);
  // The agent ignores SIGPIPE; the command must not inherit that: `yes` then ends silently when head
  // closes the pipe (ignored, it would complain "Broken pipe"). cat reads stdin: /dev/null, at once.
  o.command = "yes | head -1; cat";
  void (*old)(int) = ::signal(SIGPIPE, SIG_IGN);
  const json c = CheckCommand(o);
  ::signal(SIGPIPE, old);
  EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
  EXPECT_EQ(c["detail"].get<std::string>().find("Broken pipe"), std::string::npos) << c.dump();
}

TEST(HealthCheck, CommandTimeoutKillsIt) {
  testing::TempDir dir;
  HealthCheckOptions o = Small(dir);
  o.command = "sleep 30";
  o.command_timeout_s = 0.3;
  const double t0 = MonotonicSeconds();
  const json c = CheckCommand(o);
  EXPECT_LT(MonotonicSeconds() - t0, 10);
  EXPECT_FALSE(c["ok"].get<bool>());
  EXPECT_TRUE(c["timed_out"].get<bool>());
  EXPECT_NE(c["detail"].get<std::string>().find("did not finish within"), std::string::npos) << c.dump();
}

TEST(HealthCheck, CommandThatClosesItsOutputIsStillTimed) {
  testing::TempDir dir;
  HealthCheckOptions o = Small(dir);
  o.command = "echo closing; exec >&- 2>&-; sleep 30";
  o.command_timeout_s = 0.5;
  const json c = CheckCommand(o);
  EXPECT_FALSE(c["ok"].get<bool>());
  EXPECT_TRUE(c["timed_out"].get<bool>());
  EXPECT_NE(c["detail"].get<std::string>().find("closing"), std::string::npos) << c.dump();
}

TEST(HealthCheck, StopAbandonsTheCommand) {
  testing::TempDir dir;
  HealthCheckOptions o = Small(dir);
  std::atomic<bool> stop{false};
  o.stop = &stop;
  o.command = "sleep 30";
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    stop.store(true);
  });
  const json c = CheckCommand(o);
  t.join();
  EXPECT_FALSE(c["ok"].get<bool>());
  EXPECT_NE(c["detail"].get<std::string>().find("abandoned"), std::string::npos) << c.dump();
}

TEST(HealthCheck, GpuIsSkippedWithoutNvidiaSmi) {
  const char* old = std::getenv("PATH");
  const std::string saved = old ? old : "";
  testing::TempDir empty;
  ::setenv("PATH", empty.path().c_str(), 1);
  const json c = CheckGpu(HealthCheckOptions{});
  ::setenv("PATH", saved.c_str(), 1);
  EXPECT_TRUE(c["ok"].get<bool>());
  EXPECT_EQ(c["skipped"].get<std::string>().rfind("no GPU on this instance", 0), 0u) << c.dump();
}

TEST(HealthCheck, GpuFailsWhenNvidiaSmiFails) {
  testing::TempDir bin;
  const std::string smi = bin.Write("nvidia-smi", "#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver'\nexit 9\n");
  ASSERT_EQ(::chmod(smi.c_str(), 0755), 0);
  const char* old = std::getenv("PATH");
  const std::string saved = old ? old : "";
  ::setenv("PATH", (bin.path() + ":" + saved).c_str(), 1);
  const json c = CheckGpu(HealthCheckOptions{});
  ::setenv("PATH", saved.c_str(), 1);
  EXPECT_FALSE(c["ok"].get<bool>());
  EXPECT_NE(c["detail"].get<std::string>().find("could not communicate with the NVIDIA driver"), std::string::npos)
      << c.dump();
}

TEST(HealthCheck, GpuListsWhatNvidiaSmiReports) {
  testing::TempDir bin;
  const std::string smi = bin.Write("nvidia-smi", "#!/bin/sh\necho 'NVIDIA H100 80GB HBM3, 81559 MiB, 0 MiB'\necho 'NVIDIA H100 80GB HBM3, 81559 MiB, 12 MiB'\n");
  ASSERT_EQ(::chmod(smi.c_str(), 0755), 0);
  const char* old = std::getenv("PATH");
  const std::string saved = old ? old : "";
  ::setenv("PATH", (bin.path() + ":" + saved).c_str(), 1);
  const json c = CheckGpu(HealthCheckOptions{});
  ::setenv("PATH", saved.c_str(), 1);
  ASSERT_TRUE(c["ok"].get<bool>()) << c.dump();
  EXPECT_EQ(c["count"].get<int>(), 2);
  EXPECT_EQ(c["gpus"][1]["name"], "NVIDIA H100 80GB HBM3");
  EXPECT_DOUBLE_EQ(c["gpus"][1]["memory_used_mb"].get<double>(), 12);
}

}  // namespace
}  // namespace anneal
