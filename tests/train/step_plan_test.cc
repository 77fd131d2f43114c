#include "train/step_plan.h"

#include <gtest/gtest.h>

namespace anneal {
namespace {

// train.max_seconds on simulated time: not out of time until the deadline, then out of time.
TEST(StepPlanTest, StopSignalsReadTheirClock) {
  SimulatedClock c;
  std::atomic<bool> stop{false};
  StopSignals s;
  s.requested = &stop;
  s.clock = &c;
  s.deadline = c.Monotonic() + 30;
  EXPECT_FALSE(s.OutOfTime());
  c.SleepFor(29.9);
  EXPECT_FALSE(s.OutOfTime());
  c.SleepFor(0.2);
  EXPECT_TRUE(s.OutOfTime());
  EXPECT_FALSE(s.Requested());
  stop = true;
  EXPECT_TRUE(s.Requested());
  s.deadline = 0;  // no limit
  EXPECT_FALSE(s.OutOfTime());
}

}  // namespace
}  // namespace anneal
