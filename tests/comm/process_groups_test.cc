#include "comm/process_groups.h"

#include <gtest/gtest.h>

#include <set>

namespace anneal {
namespace {

using V = std::vector<int>;

// The worked example of the header comment, checked rank by rank.
TEST(ProcessGroupsTest, WorkedExampleFromTheHeader) {
  const V dp = {0, 0, 0, 0, 1, 1, 1, 1}, pp = {0, 0, 1, 1, 0, 0, 1, 1}, tp = {0, 1, 0, 1, 0, 1, 0, 1};
  for (int r = 0; r < 8; ++r) {
    auto g = ProcessGroups::Make(8, 2, 2, 2, r);
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(g->dp_rank(), dp[r]) << r;
    EXPECT_EQ(g->pp_rank(), pp[r]) << r;
    EXPECT_EQ(g->tp_rank(), tp[r]) << r;
    EXPECT_EQ(g->RankAt(g->dp_rank(), g->pp_rank(), g->tp_rank()), r);
  }
  auto g5 = *ProcessGroups::Make(8, 2, 2, 2, 5);
  EXPECT_EQ(g5.TpGroup(), (V{4, 5}));
  EXPECT_EQ(g5.PpGroup(), (V{5, 7}));
  EXPECT_EQ(g5.DpGroup(), (V{1, 5}));
  EXPECT_EQ(g5.Describe(), "rank 5 of 8: dp 1/2, pp 0/2, tp 1/2");
}

// For every layout of a 12-rank world, each kind of group partitions the world, and every rank
// belongs to its own groups.
TEST(ProcessGroupsTest, GroupsPartitionTheWorld) {
  const int world = 12;
  for (int dp = 1; dp <= world; ++dp) {
    for (int pp = 1; dp * pp <= world; ++pp) {
      if (world % (dp * pp)) continue;
      const int tp = world / (dp * pp);
      for (int kind = 0; kind < 3; ++kind) {
        std::set<V> groups;
        for (int r = 0; r < world; ++r) {
          auto g = *ProcessGroups::Make(world, dp, pp, tp, r);
          V members = kind == 0 ? g.TpGroup() : kind == 1 ? g.PpGroup() : g.DpGroup();
          EXPECT_NE(std::find(members.begin(), members.end(), r), members.end());
          groups.insert(members);
        }
        std::multiset<int> all;
        for (const auto& m : groups) all.insert(m.begin(), m.end());
        EXPECT_EQ(all.size(), static_cast<size_t>(world)) << dp << "x" << pp << "x" << tp << " kind " << kind;
        EXPECT_EQ(std::set<int>(all.begin(), all.end()).size(), static_cast<size_t>(world));
      }
    }
  }
}

// The worked example of process_groups.h: world 8 = dp 4 x tp 2, shard groups of K = 2.
TEST(ProcessGroupsTest, ShardGroupsAndReplicaGroups) {
  using V = std::vector<int>;
  const V shard[8] = {{0, 2}, {1, 3}, {0, 2}, {1, 3}, {4, 6}, {5, 7}, {4, 6}, {5, 7}};
  const V replica[8] = {{0, 4}, {1, 5}, {2, 6}, {3, 7}, {0, 4}, {1, 5}, {2, 6}, {3, 7}};
  for (int r = 0; r < 8; ++r) {
    auto g = ProcessGroups::Make(8, 4, 1, 2, r, 2);
    ASSERT_TRUE(g.ok()) << g.status().message();
    EXPECT_EQ(g->ShardGroup(), shard[r]) << r;
    EXPECT_EQ(g->ReplicaGroup(), replica[r]) << r;
    EXPECT_EQ(g->shard(), 2);
    EXPECT_EQ(g->shard_rank(), g->dp_rank() % 2);
    EXPECT_EQ(g->replica_rank(), g->dp_rank() / 2);
  }
  // Without shard groups: one group of all dp ranks, each its own replica group.
  auto whole = *ProcessGroups::Make(8, 4, 1, 2, 3, 0);
  EXPECT_EQ(whole.ShardGroup(), whole.DpGroup());
  EXPECT_EQ(whole.ReplicaGroup(), V{3});
  auto bad = ProcessGroups::Make(8, 4, 1, 2, 0, 3);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().ExitCode(), 2);
  EXPECT_NE(bad.status().message().find("dist.shard_group = 3 does not divide dp = 4"), std::string::npos);
}

TEST(ProcessGroupsTest, ValidationNamesEachFactor) {
  auto g = ProcessGroups::Make(8, 2, 3, 2, 0);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().ExitCode(), 2);
  EXPECT_NE(g.status().message().find("dp (2) x pp (3) x tp (2) = 12 but the world size is 8"), std::string::npos);
  EXPECT_FALSE(ProcessGroups::Make(4, 2, 1, 2, 4).ok());
  EXPECT_FALSE(ProcessGroups::Make(4, 0, 2, 2, 0).ok());
}

}  // namespace
}  // namespace anneal
