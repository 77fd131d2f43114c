// The stopping rules' decisions (agent/stopping_rules.h) on logged values and time; the agent's
// acting on them is tested end to end in tests/e2e/control_policies_test.sh.
#include "agent/stopping_rules.h"

#include <gtest/gtest.h>

#include <cmath>

namespace anneal {
namespace {

StoppingRule Rule(const std::string& when, const std::string& metric = "", int steps = 0, double for_s = 0) {
  StoppingRule r;
  r.when = when;
  r.metric = metric;
  r.steps = steps;
  r.for_s = for_s;
  return r;
}

TEST(StoppingRules, NonFiniteLossFiresOnTheFirstNan) {
  StoppingRuleWatch w({Rule("non_finite", "train_loss")}, 0);
  EXPECT_FALSE(w.OnMetric("train_loss", 0, 3.2, 1));
  EXPECT_FALSE(w.OnMetric("val_loss", 0, NAN, 1));  // another metric
  auto v = w.OnMetric("train_loss", 0, NAN, 2);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->index, 0);
  EXPECT_EQ(v->why, "stopping rule 1 (non_finite train_loss, action stop): rank 0 logged train_loss = nan");
  StoppingRuleWatch inf({Rule("non_finite", "train_loss")}, 0);
  EXPECT_TRUE(inf.OnMetric("train_loss", 1, INFINITY, 1));
}

TEST(StoppingRules, NoImprovementCountsValuesSinceTheBestPerRank) {
  StoppingRule r = Rule("no_improvement", "val_loss", 3);
  StoppingRuleWatch w({r}, 0);
  for (double v : {5.0, 4.0, 4.5, 4.2}) EXPECT_FALSE(w.OnMetric("val_loss", 0, v, 1)) << v;
  EXPECT_FALSE(w.OnMetric("val_loss", 1, 9.0, 1));  // rank 1 has its own best
  EXPECT_FALSE(w.OnMetric("val_loss", 0, 3.9, 1));  // a new best resets the count
  EXPECT_FALSE(w.OnMetric("val_loss", 0, 4.0, 1));
  EXPECT_FALSE(w.OnMetric("val_loss", 0, 3.9, 1));  // equal is no improvement
  auto v = w.OnMetric("val_loss", 0, 5.0, 1);
  ASSERT_TRUE(v);
  EXPECT_NE(v->why.find("rank 0's val_loss has not improved on its best, 3.9, for 3 values"), std::string::npos) << v->why;
  r.mode = "max";
  StoppingRuleWatch up({r}, 0);
  for (double v : {0.1, 0.2, 0.3, 0.4}) EXPECT_FALSE(up.OnMetric("val_loss", 0, v, 1));
}

TEST(StoppingRules, NoOutputAndLowGpuNeedTheirDuration) {
  StoppingRule gpu = Rule("gpu_utilization_below", "", 0, 10);
  gpu.percent = 20;
  StoppingRuleWatch w({Rule("no_output", "", 0, 5), gpu}, 100);
  w.OnLine(103);
  EXPECT_FALSE(w.OnTick(107));
  w.OnMetric("gpu_utilization_percent", -1, 5, 107);
  w.OnLine(110);
  EXPECT_FALSE(w.OnTick(112));
  w.OnMetric("gpu_utilization_percent", -1, 80, 112);  // busy again: the clock restarts
  w.OnLine(112);
  w.OnMetric("gpu_utilization_percent", -1, 3, 113);
  w.OnLine(116);
  EXPECT_FALSE(w.OnTick(120));
  w.OnLine(122);
  auto v = w.OnTick(123);  // under 20 % since 113
  ASSERT_TRUE(v);
  EXPECT_EQ(v->index, 1);
  auto quiet = w.OnTick(127.5);  // no line since 122: 5.5 s
  ASSERT_TRUE(quiet);
  EXPECT_EQ(quiet->index, 0);
  EXPECT_NE(quiet->why.find("no rank printed a line for 5.5 s"), std::string::npos) << quiet->why;
}

}  // namespace
}  // namespace anneal
