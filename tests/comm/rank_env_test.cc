#include "comm/rank_env.h"

#include <gtest/gtest.h>

#include <cstdlib>

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

TEST(RankEnvTest, NoLauncherIsOneProcess) {
  EnvScope e({});
  auto r = RankEnv::FromEnvironment();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->world, 1);
  EXPECT_EQ(r->launcher, "none");
  EXPECT_EQ(r->StorePrefix(), "job/attempt/0/");
}

TEST(RankEnvTest, TorchrunVariables) {
  EnvScope e({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"}, {"GROUP_RANK", "1"},
              {"ANNEAL_STORE", "10.0.0.1:29501"}, {"ANNEAL_ATTEMPT", "2"}, {"ANNEAL_JOB", "j"}});
  auto r = RankEnv::FromEnvironment();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rank, 5);
  EXPECT_EQ(r->world, 8);
  EXPECT_EQ(r->local_rank, 1);
  EXPECT_EQ(r->local_world, 4);
  EXPECT_EQ(r->node_rank, 1);
  EXPECT_EQ(r->store, "10.0.0.1:29501");
  EXPECT_EQ(r->StorePrefix(), "j/attempt/2/");
}

TEST(RankEnvTest, MpirunAndSrunVariables) {
  {
    EnvScope e({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
    auto r = RankEnv::FromEnvironment();
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->launcher, "mpirun");
    EXPECT_EQ(r->rank, 1);
    EXPECT_EQ(r->world, 2);
  }
  {
    EnvScope e({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "1"}});
    auto r = RankEnv::FromEnvironment();
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->launcher, "srun");
    EXPECT_EQ(r->rank, 3);
    EXPECT_EQ(r->node_rank, 1);
  }
}

TEST(RankEnvTest, InconsistentValuesAreBadInput) {
  EnvScope e({{"RANK", "2"}, {"WORLD_SIZE", "2"}});
  auto r = RankEnv::FromEnvironment();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidInput);
  EnvScope e2({{"RANK", "x"}, {"WORLD_SIZE", "2"}});
  EXPECT_FALSE(RankEnv::FromEnvironment().ok());
}

}  // namespace
}  // namespace anneal
