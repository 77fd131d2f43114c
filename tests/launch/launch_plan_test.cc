#include "launch/launch_plan.h"

#include <gtest/gtest.h>

namespace anneal {
namespace {

LaunchOptions Nodes(int nnodes, int node_rank, int procs, LaunchMode mode = LaunchMode::kAnneal) {
  LaunchOptions o;
  o.nnodes = nnodes;
  o.node_rank = node_rank;
  o.nproc_per_node = procs;
  o.mode = mode;
  o.master_addr = "10.0.0.1";
  o.master_port = 29500;
  o.job = "job-1";
  o.command = {"train"};
  return o;
}

TEST(LaunchPlan, TheStoreIsServedByNodeZeroAndReachedByAll) {
  LaunchOptions one = Nodes(1, 0, 2);
  StorePlan s = PlanStore(one);
  EXPECT_TRUE(s.serve);
  EXPECT_EQ(s.bind, "127.0.0.1");
  EXPECT_EQ(s.port, 0);  // a free port
  EXPECT_EQ(s.Address(one, 41000), "127.0.0.1:41000");

  LaunchOptions second = Nodes(2, 1, 2);
  s = PlanStore(second);
  EXPECT_FALSE(s.serve);
  EXPECT_EQ(s.port, 29501);  // MASTER_PORT stays the ranks'
  EXPECT_EQ(s.Address(second, s.port), "10.0.0.1:29501");

  LaunchOptions every = Nodes(2, 0, 2);
  every.store_bind = "0.0.0.0";
  every.store_port = 7000;
  s = PlanStore(every);
  EXPECT_EQ(s.bind, "0.0.0.0");
  EXPECT_EQ(s.Address(every, 7000), "10.0.0.1:7000");  // not 0.0.0.0
}

TEST(LaunchPlan, EachNodeStartsItsOwnRanksOrTheLeader) {
  LocalPlan p = PlanLocal(Nodes(2, 1, 3));
  ASSERT_EQ(p.processes.size(), 3u);
  EXPECT_EQ(p.world, 6);
  for (int l = 0; l < 3; ++l) {
    EXPECT_EQ(p.processes[l].global, 3 + l);
    EXPECT_EQ(p.processes[l].local, l);
    EXPECT_FALSE(p.processes[l].leader);
    EXPECT_TRUE(p.processes[l].wrap);
  }
  EXPECT_FALSE(p.leading || p.awaits_leader || p.serves_remote);

  p = PlanLocal(Nodes(2, 0, 3, LaunchMode::kMpirun));
  ASSERT_EQ(p.processes.size(), 1u);
  EXPECT_TRUE(p.processes[0].leader);
  EXPECT_TRUE(p.processes[0].wrap);  // a sandboxed mpirun off Slurm
  EXPECT_TRUE(p.serves_remote);
  EXPECT_FALSE(p.awaits_leader);

  p = PlanLocal(Nodes(2, 1, 3, LaunchMode::kMpirun));
  EXPECT_TRUE(p.processes.empty());
  EXPECT_TRUE(p.awaits_leader);

  LaunchOptions srun = Nodes(2, 0, 3, LaunchMode::kSrun);
  srun.under_slurm = true;
  p = PlanLocal(srun);
  ASSERT_EQ(p.processes.size(), 1u);
  EXPECT_FALSE(p.processes[0].wrap);  // its ranks enter the sandbox in launch-rank
  EXPECT_FALSE(p.serves_remote);
}

TEST(LaunchPlan, ARanksEnvironmentIsTheContractOverTheInheritedOne) {
  LaunchOptions o = Nodes(2, 1, 2);
  o.extra_env = {{"ANNEAL_OUTPUT_DIR", "/out"}, {"X", "1"}};
  const RankContract attempt = AttemptContract(o, 4, "10.0.0.1:29501", "10.0.0.1,10.0.0.2", "10.0.0.2");
  HostFacts host;
  host.has_gpus = true;
  host.cores = 8;
  const std::map<std::string, std::string> inherited = {
      {"PATH", "/bin"}, {"SLURM_PROCID", "0"}, {"SLURM_TASKS_PER_NODE", "1(x2)"}, {"SLURM_JOB_ID", "7"},
      {"CUDA_VISIBLE_DEVICES", "4,5"}, {"RANK", "99"}};
  const LocalProcess p{3, 1, false, true, false};
  auto env = ProcessEnvironmentFor(o, p, attempt, inherited, host, "key");
  auto c = RankContract::FromEnvironment(env);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rank, 3);
  EXPECT_EQ(c->local_rank, 1);
  EXPECT_EQ(c->world, 4);
  EXPECT_EQ(c->local_world, 2);
  EXPECT_EQ(c->node_rank, 1);
  EXPECT_EQ(c->attempt, 4);
  EXPECT_EQ(c->store, "10.0.0.1:29501");
  EXPECT_EQ(c->hosts, "10.0.0.1,10.0.0.2");
  EXPECT_EQ(c->current_host, "10.0.0.2");
  EXPECT_EQ(c->master_port, 29500);
  EXPECT_EQ(c->output_dir, "/out");
  EXPECT_EQ(env.at("X"), "1");
  EXPECT_EQ(env.at("PATH"), "/bin");
  EXPECT_EQ(env.at("SLURM_JOB_ID"), "7");
  EXPECT_EQ(env.count("SLURM_PROCID"), 0u);          // the launcher's own Slurm task is not this rank
  EXPECT_EQ(env.count("SLURM_TASKS_PER_NODE"), 0u);
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "5");    // the given list, indexed by local rank
  EXPECT_EQ(env.at("OMP_NUM_THREADS"), "4");         // 8 cores over 2 local ranks
  EXPECT_EQ(env.count("ANNEAL_LAUNCH_KEY"), 0u);

  LaunchOptions mpi = Nodes(2, 0, 2, LaunchMode::kMpirun);
  const LocalProcess leader{0, 0, true, true, false};
  env = ProcessEnvironmentFor(mpi, leader, AttemptContract(mpi, 0, "s:1", "a,b", "a"), inherited, host, "key");
  EXPECT_EQ(env.at("ANNEAL_LAUNCH_KEY"), "key");         // for launch-rsh
  EXPECT_EQ(env.at("SLURM_TASKS_PER_NODE"), "1(x2)");    // mpirun reads the allocation's shape
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "4,5");      // the leader's ranks choose their own
  EXPECT_EQ(env.count("SLURM_OVERLAP"), 0u);
  mpi.under_slurm = true;
  env = ProcessEnvironmentFor(mpi, leader, AttemptContract(mpi, 0, "s:1", "a,b", "a"), {{"OMP_NUM_THREADS", "3"}}, host, "k");
  EXPECT_EQ(env.at("SLURM_OVERLAP"), "1");
  EXPECT_EQ(env.at("OMP_NUM_THREADS"), "3");  // set by the user: kept
}

TEST(LaunchPlan, EachLocalRankGetsAnEvenShareOfTheCpus) {
  LaunchOptions o = Nodes(1, 0, 2);
  const std::vector<int> cpus = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(CpuShare(o, LocalProcess{1, 1, false, true, false}, cpus), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(CpuShare(o, LocalProcess{0, 0, false, true, false}, {2, 3, 9}), (std::vector<int>{2}));
  EXPECT_TRUE(CpuShare(o, LocalProcess{0, 0, false, true, true}, cpus).empty());  // a daemon
  EXPECT_TRUE(CpuShare(Nodes(1, 0, 3), LocalProcess{0, 0, false, true, false}, {0, 1}).empty());  // fewer CPUs than ranks
  o.cpu_bind = "none";
  EXPECT_TRUE(CpuShare(o, LocalProcess{0, 0, false, true, false}, cpus).empty());
  EXPECT_TRUE(CpuShare(Nodes(1, 0, 2, LaunchMode::kSrun), LocalProcess{0, 0, true, false, false}, cpus).empty());
}

// The nodes' addresses known from the caller (the agent's meeting through the server) spare the first
// attempt the launchers' meeting in the store; a restart, mpirun/srun mode, or a list that does not
// name every node still meets.
TEST(LaunchPlan, GivenHostsSpareOnlyTheFirstAttemptsMeeting) {
  LaunchOptions o = Nodes(2, 1, 1);
  EXPECT_EQ(KnownHosts(o, PlanLocal(o), 0), std::nullopt);  // none given: meet
  o.hosts = {"10.0.0.1", "10.0.0.2"};
  EXPECT_EQ(KnownHosts(o, PlanLocal(o), 0), std::optional<std::string>("10.0.0.1,10.0.0.2"));
  EXPECT_EQ(KnownHosts(o, PlanLocal(o), 1), std::nullopt);  // a restart: every launcher must have left attempt 0
  o.first_attempt = 3;  // a job the control plane restarted: its first attempt here is 3
  EXPECT_EQ(KnownHosts(o, PlanLocal(o), 3), std::optional<std::string>("10.0.0.1,10.0.0.2"));
  o.first_attempt = 0;
  LaunchOptions m = Nodes(2, 1, 1, LaunchMode::kMpirun);
  m.hosts = o.hosts;
  EXPECT_EQ(KnownHosts(m, PlanLocal(m), 0), std::nullopt);  // the leader needs every node's setup first
  o.hosts = {"10.0.0.1"};
  EXPECT_EQ(KnownHosts(o, PlanLocal(o), 0), std::nullopt);  // not one per node
  o.hosts = {"10.0.0.1", ""};
  EXPECT_EQ(KnownHosts(o, PlanLocal(o), 0), std::nullopt);
}

TEST(LaunchPlan, SplitListKeepsEmptyEntries) {
  EXPECT_EQ(SplitList("4,5", ','), (std::vector<std::string>{"4", "5"}));
  EXPECT_EQ(SplitList("/bin::/usr/bin", ':'), (std::vector<std::string>{"/bin", "", "/usr/bin"}));  // "" = "." in PATH
  EXPECT_EQ(SplitList("", ':'), (std::vector<std::string>{""}));
}

}  // namespace
}  // namespace anneal
