#include "comm/rank_contract.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <tuple>

namespace anneal {
namespace {

// Sets environment variables for one test and restores them after.
class EnvScope {
 public:
  explicit EnvScope(std::vector<std::pair<std::string, std::string>> vars) {
    for (const char* k : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "OMPI_COMM_WORLD_RANK",
                          "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
                          "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID", "ANNEAL_STORE",
                          "ANNEAL_ATTEMPT", "ANNEAL_JOB"}) {
      if (const char* v = std::getenv(k)) saved_.push_back({k, v});
      unsetenv(k);
      names_.push_back(k);
    }
    for (auto& [k, v] : vars) setenv(k.c_str(), v.c_str(), 1);
  }
  ~EnvScope() {
    for (auto& k : names_) unsetenv(k.c_str());
    for (auto& [k, v] : saved_) setenv(k.c_str(), v.c_str(), 1);
  }

 private:
  std::vector<std::string> names_;
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST(RankContractTest, NoLauncherIsOneProcess) {
  EnvScope e({});
  auto r = RankContract::FromEnvironment();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->world, 1);
  EXPECT_EQ(r->launcher, "none");
  EXPECT_EQ(r->StorePrefix(), "job/attempt/0/");
}

TEST(RankContractTest, TorchrunVariables) {
  EnvScope e({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"}, {"GROUP_RANK", "1"},
              {"ANNEAL_STORE", "10.0.0.1:29501"}, {"ANNEAL_ATTEMPT", "2"}, {"ANNEAL_JOB", "j"}});
  auto r = RankContract::FromEnvironment();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rank, 5);
  EXPECT_EQ(r->world, 8);
  EXPECT_EQ(r->local_rank, 1);
  EXPECT_EQ(r->local_world, 4);
  EXPECT_EQ(r->node_rank, 1);
  EXPECT_EQ(r->store, "10.0.0.1:29501");
  EXPECT_EQ(r->StorePrefix(), "j/attempt/2/");
}

TEST(RankContractTest, MpirunAndSrunVariables) {
  {
    EnvScope e({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
    auto r = RankContract::FromEnvironment();
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->launcher, "mpirun");
    EXPECT_EQ(r->rank, 1);
    EXPECT_EQ(r->world, 2);
  }
  {
    EnvScope e({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "1"}});
    auto r = RankContract::FromEnvironment();
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->launcher, "srun");
    EXPECT_EQ(r->rank, 3);
    EXPECT_EQ(r->node_rank, 1);
  }
}

TEST(RankContractTest, InconsistentValuesAreBadInput) {
  EnvScope e({{"RANK", "2"}, {"WORLD_SIZE", "2"}});
  auto r = RankContract::FromEnvironment();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidInput);
  EnvScope e2({{"RANK", "x"}, {"WORLD_SIZE", "2"}});
  EXPECT_FALSE(RankContract::FromEnvironment().ok());
}

// The one writer and the one reader agree: every field written comes back as it was.
TEST(RankContractTest, RoundTripsThroughTheEnvironment) {
  RankContract c;
  c.rank = 5, c.world = 8, c.local_rank = 1, c.local_world = 4, c.node_rank = 1;
  c.job = "j-1", c.attempt = 3, c.store = "10.0.0.1:29501", c.hosts = "10.0.0.1,10.0.0.2";
  c.current_host = "10.0.0.2", c.master_addr = "10.0.0.1", c.master_port = 29500;
  c.progress_dir = "/p", c.output_dir = "/o", c.bind_addr = "10.0.0.2", c.shared_memory = false;
  const auto env = c.ToEnvironment();
  EXPECT_EQ(env.at("ROLE_RANK"), "5");
  EXPECT_EQ(env.at("TORCHELASTIC_RESTART_COUNT"), "3");
  EXPECT_EQ(env.at("ANNEAL_SHM"), "0");
  auto r = RankContract::FromEnvironment(env);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->launcher, "anneal launch / torchrun");
  EXPECT_EQ(r->ToEnvironment(), env);
  EXPECT_EQ(std::tie(r->rank, r->world, r->local_rank, r->local_world, r->node_rank, r->attempt, r->master_port),
            std::tie(c.rank, c.world, c.local_rank, c.local_world, c.node_rank, c.attempt, c.master_port));
  EXPECT_EQ(std::tie(r->job, r->store, r->hosts, r->current_host, r->master_addr, r->progress_dir, r->output_dir,
                     r->bind_addr),
            std::tie(c.job, c.store, c.hosts, c.current_host, c.master_addr, c.progress_dir, c.output_dir, c.bind_addr));
  EXPECT_FALSE(r->shared_memory);

  // Unset text and the default shared memory write nothing; a node's variables name no rank.
  RankContract bare;
  const auto b = bare.ToEnvironment();
  for (const char* k : {"ANNEAL_JOB", "ANNEAL_STORE", "MASTER_ADDR", "MASTER_PORT", "ANNEAL_SHM", "ANNEAL_HOSTS"}) {
    EXPECT_EQ(b.count(k), 0u) << k;
  }
  const auto node = c.NodeEnvironment();
  for (const char* k : {"RANK", "LOCAL_RANK", "ROLE_RANK"}) EXPECT_EQ(node.count(k), 0u) << k;
  EXPECT_EQ(node.at("GROUP_RANK"), "1");
  EXPECT_EQ(node.at("WORLD_SIZE"), "8");
  EXPECT_FALSE(RankContract::FromEnvironment({{"MASTER_PORT", "http"}}).ok());
}

// The agent hands its launcher the job's options through the contract (agent/node_plan.cc): they
// read back as written, name neither a rank nor an attempt, and are what ToEnvironment writes for them.
TEST(RankContractTest, JobOptionsRoundTripAloneAndAsPartOfTheWhole) {
  RankContract c;
  c.progress_dir = "/job/progress-2", c.output_dir = "/job/output", c.bind_addr = "10.0.0.9", c.shared_memory = false;
  const auto opts = c.JobOptionsEnvironment();
  EXPECT_EQ(opts, (std::map<std::string, std::string>{{"ANNEAL_BIND_ADDR", "10.0.0.9"}, {"ANNEAL_OUTPUT_DIR", "/job/output"},
                                                      {"ANNEAL_PROGRESS_DIR", "/job/progress-2"}, {"ANNEAL_SHM", "0"}}));
  auto r = RankContract::FromEnvironment(opts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(std::tie(r->progress_dir, r->output_dir, r->bind_addr), std::tie(c.progress_dir, c.output_dir, c.bind_addr));
  EXPECT_FALSE(r->shared_memory);
  EXPECT_EQ(std::tie(r->rank, r->world, r->attempt), std::make_tuple(0, 1, 0));  // nothing of a rank or an attempt
  const auto whole = c.ToEnvironment();
  for (const auto& [k, v] : opts) EXPECT_EQ(whole.at(k), v) << k;
  EXPECT_TRUE(RankContract().JobOptionsEnvironment().empty());
}

}  // namespace
}  // namespace anneal
