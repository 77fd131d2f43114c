// The mpirun/srun leader's command line, its tagged output and the rank contract its ranks get
// (launch/leader_command.h), and launch-rsh's requests through a real TCP store (launch/remote_exec.h).
#include "launch/leader_command.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "comm/store.h"
#include "launch/remote_exec.h"

namespace anneal {
namespace {

bool Has(const std::vector<std::string>& v, const std::vector<std::string>& run) {
  return std::search(v.begin(), v.end(), run.begin(), run.end()) != v.end();
}

LeaderPlan Plan(LaunchMode mode, bool slurm) {
  LeaderPlan p;
  p.mode = mode;
  p.node_names = {"n1", "n2"};
  p.procs_per_node = 2;
  p.self = "/opt/anneal";
  p.command = {"python3", "train.py"};
  p.forward_env = {"ANNEAL_STORE"};
  p.under_slurm = slurm;
  return p;
}

TEST(LeaderCommand, MpirunPlacesConsecutiveRanksPerNodeInNodeOrder) {
  const auto a = LeaderArgv(Plan(LaunchMode::kMpirun, false));
  EXPECT_EQ(a[0], "mpirun");
  EXPECT_TRUE(Has(a, {"-np", "4"}));
  EXPECT_TRUE(Has(a, {"--host", "n1:2,n2:2"}));
  EXPECT_TRUE(Has(a, {"--map-by", "ppr:2:node"}));
  EXPECT_TRUE(Has(a, {"--tag-output"}));
  EXPECT_TRUE(Has(a, {"-x", "ANNEAL_STORE"}));
  // off Slurm its daemons start through the job's launchers, not sshd
  EXPECT_TRUE(Has(a, {"--mca", "plm_rsh_agent", "/opt/anneal launch-rsh"}));
  EXPECT_TRUE(Has(a, {"/opt/anneal", "launch-rank", "--procs-per-node", "2", "--", "python3", "train.py"}));
  EXPECT_EQ(a.back(), "train.py");
}

TEST(LeaderCommand, MpirunOnSlurmLeavesTheDaemonsToSlurm) {
  const auto a = LeaderArgv(Plan(LaunchMode::kMpirun, true));
  EXPECT_FALSE(Has(a, {"--mca", "plm_rsh_agent", "/opt/anneal launch-rsh"}));
  EXPECT_TRUE(Has(a, {"--host", "n1:2,n2:2"}));
  // Slurm starts the daemons as root: each enters its node's job sandbox first
  EXPECT_TRUE(Has(a, {"--mca", "orte_launch_agent", "/opt/anneal launch-daemon"}));
}

TEST(LeaderCommand, SrunSpansTheAllocationInBlocks) {
  const auto a = LeaderArgv(Plan(LaunchMode::kSrun, true));
  EXPECT_EQ(a[0], "srun");
  EXPECT_TRUE(Has(a, {"--overlap", "--nodes=2", "--ntasks-per-node=2", "--distribution=block"}));
  EXPECT_TRUE(Has(a, {"--label"}));
  EXPECT_TRUE(Has(a, {"/opt/anneal", "launch-rank", "--procs-per-node", "2", "--", "python3", "train.py"}));
}

TEST(LeaderCommand, TaggedLinesNameTheirRank) {
  int rank = -1;
  bool err = false;
  std::string rest;
  ASSERT_TRUE(SplitRankTag(LaunchMode::kMpirun, "[1,12]<stderr>:loss 3.5", &rank, &err, &rest));
  EXPECT_EQ(rank, 12);
  EXPECT_TRUE(err);
  EXPECT_EQ(rest, "loss 3.5");
  ASSERT_TRUE(SplitRankTag(LaunchMode::kMpirun, "[1,0]<stdout>:", &rank, &err, &rest));
  EXPECT_EQ(rank, 0);
  EXPECT_FALSE(err);
  EXPECT_EQ(rest, "");
  ASSERT_TRUE(SplitRankTag(LaunchMode::kSrun, " 3: step 7", &rank, &err, &rest));
  EXPECT_EQ(rank, 3);
  EXPECT_EQ(rest, "step 7");
  // the leader's own lines, and another launcher's tags, are not a rank's
  EXPECT_FALSE(SplitRankTag(LaunchMode::kMpirun, "mpirun detected that one or more processes exited", &rank, &err, &rest));
  EXPECT_FALSE(SplitRankTag(LaunchMode::kMpirun, "[1,x]<stdout>:a", &rank, &err, &rest));
  EXPECT_FALSE(SplitRankTag(LaunchMode::kMpirun, "[1,2]<stdin>:a", &rank, &err, &rest));
  EXPECT_FALSE(SplitRankTag(LaunchMode::kSrun, "srun: error: n2: task 1: Exited", &rank, &err, &rest));
  EXPECT_FALSE(SplitRankTag(LaunchMode::kAnneal, "0: x", &rank, &err, &rest));
}

TEST(LeaderCommand, TheLeaderNamesTheFailedRank) {
  EXPECT_EQ(LeaderFailedRank(LaunchMode::kMpirun, "  Process name: [[4533,1],1]"), 1);
  EXPECT_EQ(LeaderFailedRank(LaunchMode::kMpirun, "  Process name: [[4533,1],17]"), 17);
  EXPECT_EQ(LeaderFailedRank(LaunchMode::kMpirun, "  Exit code:    3"), -1);
  EXPECT_EQ(LeaderFailedRank(LaunchMode::kSrun, "srun: error: n2: task 1: Exited with exit code 3"), 1);
  EXPECT_EQ(LeaderFailedRank(LaunchMode::kSrun, "srun: error: n2: tasks 0-1: Killed"), -1);
  EXPECT_EQ(LeaderFailedRank(LaunchMode::kSrun, "  Process name: [[4533,1],1]"), -1);
  int killed = -1, exited = -1;
  EXPECT_EQ(LeaderFailedRank(LaunchMode::kSrun, "srun: error: n1: task 0: Killed", &killed), 0);
  EXPECT_EQ(LeaderFailedRank(LaunchMode::kSrun, "srun: error: n2: task 1: Exited with exit code 3", &exited), 1);
  EXPECT_GT(exited, killed);  // the task that exited beats the one srun killed because of it
}

TEST(LeaderCommand, RankContractFromOpenMpiOrSlurm) {
  auto c = RankContractFromLeader({{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"SLURM_PROCID", "1"}}, 4);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ((*c)["RANK"], "5");  // Open MPI's rank, not the daemon's Slurm task
  EXPECT_EQ((*c)["WORLD_SIZE"], "8");
  EXPECT_EQ((*c)["LOCAL_RANK"], "1");
  EXPECT_EQ((*c)["LOCAL_WORLD_SIZE"], "4");
  EXPECT_EQ((*c)["GROUP_RANK"], "1");
  auto s = RankContractFromLeader({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"}}, 2);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)["RANK"], "2");
  EXPECT_EQ((*s)["GROUP_RANK"], "1");
  EXPECT_EQ((*s)["LOCAL_RANK"], "0");
  auto none = RankContractFromLeader({}, 1);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Code::kInvalidInput);
  EXPECT_NE(none.status().message().find("only as a rank of mpirun or srun"), std::string::npos);
  EXPECT_FALSE(RankContractFromLeader({{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}}, 1).ok());
  EXPECT_FALSE(RankContractFromLeader({{"SLURM_PROCID", "x"}, {"SLURM_NTASKS", "4"}}, 1).ok());
}

TEST(LeaderCommand, NodeInfoAndSetupRoundTrip) {
  auto n = NodeInfoFromJson(NodeInfoToJson({"n2", "/w/.setup.json"}));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->name, "n2");
  EXPECT_EQ(n->setup_file, "/w/.setup.json");
  auto s = RankSetupFromJson(RankSetupToJson({"/w/code", {{"A", "1"}}}));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->workdir, "/w/code");
  EXPECT_EQ(s->env.at("A"), "1");
  EXPECT_FALSE(NodeInfoFromJson("{}").ok());
  EXPECT_EQ(ParseLaunchMode("srun").value(), LaunchMode::kSrun);
  EXPECT_FALSE(ParseLaunchMode("ssh").ok());
}

TEST(RemoteExec, RequestsRunInOrderAndForgedOnesAreRefused) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  auto client = ConnectTcpStore("127.0.0.1", (*server)->port(), std::chrono::seconds(5));
  auto launcher = ConnectTcpStore("127.0.0.1", (*server)->port(), std::chrono::seconds(5));
  ASSERT_TRUE(client.ok() && launcher.ok());
  const std::string prefix = LaunchKey("j", 0, "rsh/node-1/");
  RemoteExecQueue q(launcher->get(), prefix, "node-1", "key");
  // A request with the wrong key: answered 255, never returned to be run.
  int forged = -1;
  std::thread t([&] {
    auto r = RemoteExec(client->get(), prefix, "node-1", "not-the-key", "rm -rf /");
    forged = r.ok() ? *r : -1;
  });
  std::optional<RemoteExecQueue::Request> got;
  for (int i = 0; i < 200; ++i) {
    auto r = q.Poll();
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), Code::kInvalidInput);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  t.join();
  EXPECT_EQ(forged, 255);
  // A genuine one: run by the launcher, whose exit code the requester gets.
  int code = -1;
  std::thread u([&] {
    auto r = RemoteExec(client->get(), prefix, "node-1", "key", "orted -mca x 1");
    code = r.ok() ? *r : -1;
  });
  for (int i = 0; i < 200 && !got; ++i) {
    auto r = q.Poll();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    got = *r;
    if (!got) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(got);
  EXPECT_EQ(got->seq, 2);
  EXPECT_EQ(got->command, "orted -mca x 1");
  ASSERT_TRUE(q.Finish(got->seq, 7).ok());
  u.join();
  EXPECT_EQ(code, 7);
}

}  // namespace
}  // namespace anneal
