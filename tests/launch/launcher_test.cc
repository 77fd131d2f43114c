// The launcher with real processes (/bin/sh ranks) on this machine; its deadlines on a SimulatedClock
// where a test says so, so a 300 s rendezvous timeout or a 60 s grace passes without waiting for it.
#include "launch/launcher.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "core/clock.h"

namespace anneal {
namespace {

struct Captured {
  std::mutex mu;
  std::vector<std::pair<int, std::string>> lines;  // (rank, line)
  std::vector<std::string> log;
};

LaunchOptions Shell(const std::string& script, int procs, Captured* cap) {
  LaunchOptions o;
  o.nproc_per_node = procs;
  o.command = {"/bin/sh", "-c", script};
  o.cpu_bind = "none";
  o.job = "launcher-test";
  o.on_output = [cap](int rank, bool, const std::string& line) {
    std::lock_guard<std::mutex> l(cap->mu);
    cap->lines.push_back({rank, line});
  };
  return o;
}

std::function<void(const std::string&)> Log(Captured* cap) {
  return [cap](const std::string& line) {
    std::lock_guard<std::mutex> l(cap->mu);
    cap->log.push_back(line);
  };
}

double RealSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

TEST(Launcher, RanksSeeTheContractAndTheirLinesComeBack) {
  Captured cap;
  LaunchOptions o = Shell("echo \"$RANK $LOCAL_RANK $WORLD_SIZE $ANNEAL_ATTEMPT $ANNEAL_JOB\"", 2, &cap);
  auto r = RunLauncher(o, Log(&cap));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->attempts, 1);
  std::sort(cap.lines.begin(), cap.lines.end());
  ASSERT_EQ(cap.lines.size(), 2u);
  EXPECT_EQ(cap.lines[0], (std::pair<int, std::string>{0, "0 0 2 0 launcher-test"}));
  EXPECT_EQ(cap.lines[1], (std::pair<int, std::string>{1, "1 1 2 0 launcher-test"}));
}

TEST(Launcher, AFailedAttemptRestartsTheGroupWithTheNextNumber) {
  Captured cap;
  LaunchOptions o = Shell("echo \"$ANNEAL_ATTEMPT $TORCHELASTIC_RESTART_COUNT\"; [ \"$ANNEAL_ATTEMPT\" != 0 ] || exit 1", 2, &cap);
  o.max_restarts = 1;
  auto r = RunLauncher(o, Log(&cap));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->attempts, 2);
  EXPECT_NE(r->summary.find("attempt 0: rank "), std::string::npos) << r->summary;
  EXPECT_NE(r->summary.find("failed first: exit code 1"), std::string::npos) << r->summary;
  int second = 0;
  for (const auto& [rank, line] : cap.lines) second += line == "1 1";
  EXPECT_EQ(second, 2);
}

TEST(Launcher, ABadInputExitIsNeverRestarted) {
  Captured cap;
  LaunchOptions o = Shell("exit 2", 1, &cap);
  o.max_restarts = 3;
  auto r = RunLauncher(o, Log(&cap));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 2);
  EXPECT_EQ(r->attempts, 1);
  EXPECT_EQ(r->failed_rank, 0);
  EXPECT_TRUE(r->failure_local);
}

// A rank that ignores SIGTERM after another failed is killed once the grace has passed on the
// launcher's clock: 60 simulated seconds, a fraction of one real one.
TEST(Launcher, TheGraceAfterAFailureRunsOnTheLaunchersClock) {
  const std::string dir = testing::TempDir() + "/launcher-grace-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  Captured cap;
  LaunchOptions o = Shell(
      "if [ \"$RANK\" = 0 ]; then while [ ! -e " + dir + "/ready ]; do sleep 0.02; done; exit 1; fi; "
      "trap '' TERM; exec >/dev/null 2>&1; touch " + dir + "/ready; sleep 120",
      2, &cap);
  o.grace_s = 60;
  SimulatedClock clock;
  o.clock = &clock;
  const double before = clock.Monotonic(), real_before = RealSeconds();
  auto r = RunLauncher(o, Log(&cap));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_EQ(r->failed_rank, 0);
  EXPECT_NE(r->summary.find("rank 0 (node 0, pid "), std::string::npos) << r->summary;
  EXPECT_GT(clock.Monotonic() - before, 60.0);  // SIGKILL came after the grace, in simulated time
  EXPECT_LT(RealSeconds() - real_before, 30.0);  // and long before the rank's own sleep would end
  bool killed = false;
  for (const std::string& l : cap.log) killed |= l.find("rank 1: killed by SIGKILL") != std::string::npos;
  EXPECT_TRUE(killed);
  std::filesystem::remove_all(dir);
}

// Node 0 of two waits for node 1, which never comes: the rendezvous timeout (300 s) passes on the
// launcher's clock and the error says what to do.
TEST(Launcher, ANodeThatNeverJoinsTimesOutOnTheLaunchersClock) {
  Captured cap;
  LaunchOptions o = Shell("true", 1, &cap);
  o.nnodes = 2;
  o.master_addr = "127.0.0.1";
  o.allow_loopback_master = true;
  o.store_port = 0;  // a free port
  SimulatedClock clock;
  o.clock = &clock;
  const double before = clock.Monotonic(), real_before = RealSeconds();
  auto r = RunLauncher(o, Log(&cap));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kPeer);
  EXPECT_NE(r.status().message().find("node 1 of 2 did not join within 300 s"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("start its launcher"), std::string::npos);
  EXPECT_GT(clock.Monotonic() - before, 300.0);
  EXPECT_LT(RealSeconds() - real_before, 60.0);
  EXPECT_TRUE(cap.lines.empty());  // no rank started
}

// A port free on this host now (the test's node 0 listens on it a moment later).
int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

// Node n of 2 running script, given both nodes' addresses (as the agent's meeting through the
// server gives them) and node 0's store port.
LaunchOptions GivenHostsNode(int n, const std::string& script, int port, Captured* cap) {
  LaunchOptions o = Shell(script, 1, cap);
  o.nnodes = 2;
  o.node_rank = n;
  o.master_addr = "127.0.0.1";
  o.allow_loopback_master = true;
  o.store_port = port;
  o.hosts = {"127.0.0.1", "127.0.0.2"};
  return o;
}

// Two nodes given every node's address (as the agent's meeting through the server gives them): node 0's
// rank runs while node 1 has not started, so nothing waited for a meeting in the store; then node 1
// comes and both finish, their ranks seeing the given ANNEAL_HOSTS and their own ANNEAL_CURRENT_HOST.
TEST(Launcher, GivenHostsStartTheFirstAttemptWithoutMeetingInTheStore) {
  Captured cap0, cap1;
  const int port = FreeLoopbackPort();
  auto node = [&](int n, Captured* cap) {
    return GivenHostsNode(n, "echo \"$RANK $ANNEAL_HOSTS $ANNEAL_CURRENT_HOST\"", port, cap);
  };
  std::atomic<bool> node0_ran{false};
  Result<LaunchResult> r0 = Internal("not run");
  LaunchOptions o0 = node(0, &cap0);
  o0.on_started = [&](int) { node0_ran.store(true); };
  std::thread t0([&] { r0 = RunLauncher(o0, Log(&cap0)); });
  for (int i = 0; i < 1000 && !node0_ran.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(node0_ran.load()) << "node 0's rank did not start before node 1's launcher";
  auto r1 = RunLauncher(node(1, &cap1), Log(&cap1));
  t0.join();
  ASSERT_TRUE(r0.ok()) << r0.status().ToString();
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  EXPECT_EQ(r0->exit_code, 0);
  EXPECT_EQ(r1->exit_code, 0);
  ASSERT_EQ(cap0.lines.size(), 1u);
  ASSERT_EQ(cap1.lines.size(), 1u);
  EXPECT_EQ(cap0.lines[0].second, "0 127.0.0.1,127.0.0.2 127.0.0.1");
  EXPECT_EQ(cap1.lines[0].second, "1 127.0.0.1,127.0.0.2 127.0.0.2");
}

// Node 0 keeps the store until every node said done; found by the chaos soak, it waited the whole
// rendezvous timeout (300 s) when another node was interrupted (it never says done) or when its own
// agent was told to stop meanwhile. Both now end the wait.
TEST(Launcher, NodeZeroStopsWaitingForAnInterruptedNodeOrWhenToldToStop) {
  const int port = FreeLoopbackPort();
  auto node = [&](int n, const std::string& script, Captured* cap) { return GivenHostsNode(n, script, port, cap); };
  Captured cap0, cap1;
  LaunchOptions o0 = node(0, "true", &cap0);
  Result<LaunchResult> r0 = Internal("not run");
  const double t0 = RealSeconds();
  std::thread n0([&] { r0 = RunLauncher(o0, Log(&cap0)); });
  std::atomic<bool> stop1{false};
  LaunchOptions o1 = node(1, "exec 2>/dev/null; trap 'exit 143' TERM; while :; do sleep 0.05; done", &cap1);
  o1.stop = &stop1;
  o1.on_started = [&stop1](int) { stop1 = true; };
  auto r1 = RunLauncher(o1, Log(&cap1));
  n0.join();
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  EXPECT_TRUE(r1->interrupted);
  ASSERT_TRUE(r0.ok()) << r0.status().ToString();
  EXPECT_EQ(r0->exit_code, 0);
  EXPECT_LT(RealSeconds() - t0, 30.0);  // not the 300 s rendezvous timeout
  // Told to stop while it waits for a node that never comes: it returns, well before 300 s.
  Captured cap2;
  std::atomic<bool> stop{false};
  LaunchOptions o2 = node(0, "true", &cap2);
  o2.store_port = FreeLoopbackPort();
  o2.stop = &stop;
  o2.on_started = [&stop](int) {
    std::thread([&stop] {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      stop = true;
    }).detach();
  };
  const double real0 = RealSeconds();
  auto r2 = RunLauncher(o2, Log(&cap2));
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_LT(RealSeconds() - real0, 30.0);
}

TEST(Launcher, AStopRequestInterruptsTheRanks) {
  Captured cap;
  std::atomic<bool> stop{false};
  LaunchOptions o = Shell("exec 2>/dev/null; trap 'echo saved at step 3; exit 143' TERM; echo up; while :; do sleep 0.05; done", 1, &cap);
  o.stop = &stop;
  o.on_started = [&stop](int) {
    std::thread([&stop] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      stop = true;
    }).detach();
  };
  auto r = RunLauncher(o, Log(&cap));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->interrupted);
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_EQ(r->attempts, 1);
  EXPECT_EQ(r->last_words, "rank 0: saved at step 3");
  EXPECT_NE(r->summary.find("interrupted by a stop request"), std::string::npos) << r->summary;
}

}  // namespace
}  // namespace anneal
