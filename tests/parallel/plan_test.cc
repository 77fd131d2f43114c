#include "parallel/plan.h"

#include <gtest/gtest.h>

#include "parallel/pipeline.h"

namespace anneal {
namespace {

ModelConfig Model(int layers, int heads = 4) { return ModelConfig::Make(50257, 64, layers, heads, 64).value(); }

TEST(ParallelPlanTest, BalancesLayersAgainstTheLmHead) {
  // A wide model with a small vocabulary: the head is cheap, layers split evenly.
  const ModelConfig wide = ModelConfig::Make(256, 64, 8, 4, 512).value();
  ParallelDims d;
  d.pp = 4;
  d.seq_len = 64;
  auto p = ParallelPlan::Make(wide, d);
  ASSERT_TRUE(p.ok()) << p.status().message();
  const std::vector<std::pair<int, int>> even = {{0, 2}, {2, 4}, {4, 6}, {6, 8}};
  EXPECT_EQ(p->stages(), even);
  // GPT-2's vocabulary on a narrow model: the head outweighs layers, so the last stage gets fewer.
  const ModelConfig narrow = Model(8);
  p = ParallelPlan::Make(narrow, d);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->stages().back().second - p->stages().back().first, 1);
  EXPECT_EQ(p->stages().front().first, 0);
  for (size_t s = 1; s < p->stages().size(); ++s) EXPECT_EQ(p->stages()[s].first, p->stages()[s - 1].second);
  EXPECT_NE(p->DescribeStages().find("LM head"), std::string::npos);
  // The partition is optimal: no stage could be cheaper than the largest single stage cost allows.
  const std::vector<double> cost = p->StageCosts();
  EXPECT_DOUBLE_EQ(*std::max_element(cost.begin(), cost.end()),
                   ParallelPlan::LayerCost(narrow, 64) + ParallelPlan::HeadCost(narrow));
}

TEST(ParallelPlanTest, ShardsAndPadding) {
  ParallelDims d;
  d.tp = 2;
  d.pp = 2;
  auto p = ParallelPlan::Make(Model(4), d);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->model().padded_vocab % 128, 0);
  EXPECT_EQ(p->model().padded_vocab % 2, 0);
  const ModelShard s = p->ShardOf(1, 1);
  EXPECT_EQ(s.tp, 2);
  EXPECT_EQ(s.tp_rank, 1);
  EXPECT_TRUE(s.last(p->model()));
  EXPECT_FALSE(s.first());
  // lcm(128, 3) = 384 divides the padded vocabulary at tp = 3.
  EXPECT_EQ(Model(4).PaddedFor(3).padded_vocab % 384, 0);
  EXPECT_GE(Model(4).PaddedFor(3).padded_vocab, 50257);
}

TEST(ParallelPlanTest, RefusesCombinationsThatMakeNoSense) {
  ParallelDims d;
  d.tp = 3;
  auto p = ParallelPlan::Make(Model(4), d);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().ExitCode(), 2);
  EXPECT_NE(p.status().message().find("use dist.tp in {1, 2, 4}"), std::string::npos) << p.status().message();
  d.tp = 1;
  d.pp = 5;
  EXPECT_NE(ParallelPlan::Make(Model(4), d).status().message().find("at least one layer"), std::string::npos);
  d.pp = 2;
  d.zero = 2;
  p = ParallelPlan::Make(Model(4), d);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("use dist.zero = 1"), std::string::npos);
  d.zero = 1;
  d.schedule = "interleaved";
  EXPECT_EQ(ParallelPlan::Make(Model(4), d).status().ExitCode(), 2);
}

// Each micro-batch goes forward once and backward once, forward first; at most `slots` micro-batches
// are in flight at once, and 1F1B's order is the textbook one.
TEST(PipelineScheduleTest, SchedulesAreCompleteAndBounded) {
  for (const char* name : {"1f1b", "gpipe"}) {
    for (int p : {1, 2, 4}) {
      for (int m : {1, 2, 4, 8}) {
        for (int s = 0; s < p; ++s) {
          const auto a = PipelineSchedule(name, s, p, m);
          ASSERT_EQ(a.size(), 2u * m);
          std::vector<int> f(m, -1), b(m, -1);
          int in_flight = 0, most = 0;
          for (size_t i = 0; i < a.size(); ++i) {
            (a[i].forward ? f : b)[a[i].micro] = static_cast<int>(i);
            in_flight += a[i].forward ? 1 : -1;
            most = std::max(most, in_flight);
          }
          for (int i = 0; i < m; ++i) {
            EXPECT_GE(f[i], 0);
            EXPECT_GT(b[i], f[i]);
            if (i) {  // forwards and backwards each in micro-batch order
              EXPECT_GT(f[i], f[i - 1]);
              EXPECT_GT(b[i], b[i - 1]);
            }
          }
          EXPECT_EQ(most, PipelineSlots(name, s, p, m)) << name << " p=" << p << " m=" << m << " s=" << s;
        }
      }
    }
  }
  EXPECT_EQ(ScheduleString(PipelineSchedule("1f1b", 0, 4, 6)), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(ScheduleString(PipelineSchedule("1f1b", 3, 4, 6)), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  EXPECT_EQ(ScheduleString(PipelineSchedule("gpipe", 1, 2, 3)), "F0 F1 F2 B0 B1 B2");
}

}  // namespace
}  // namespace anneal
