#include "core/clock.h"

#include <gtest/gtest.h>

#include <thread>

namespace anneal {
namespace {

TEST(ClockTest, SimulatedTimeMovesOnlyWhenSleptOrAdvanced) {
  SimulatedClock c;
  const double m0 = c.Monotonic(), w0 = c.Wall();
  EXPECT_GT(m0, 0);
  EXPECT_GT(w0, 1e9);
  const double real0 = MonotonicSeconds();
  c.SleepFor(3600);  // an hour, at once
  EXPECT_DOUBLE_EQ(c.Monotonic() - m0, 3600);
  EXPECT_DOUBLE_EQ(c.Wall() - w0, 3600);
  c.Advance(0.5);
  c.Advance(-7);  // time never goes back
  EXPECT_DOUBLE_EQ(c.Monotonic() - m0, 3600.5);
  EXPECT_LT(MonotonicSeconds() - real0, 5.0);
}

TEST(ClockTest, SimulatedWaitReleasesTheLockAndAdvances) {
  SimulatedClock c;
  std::mutex mu;
  std::condition_variable cv;
  bool flag = false;
  std::unique_lock<std::mutex> l(mu);
  std::thread other([&] {
    std::lock_guard<std::mutex> g(mu);  // needs the lock the waiter holds
    flag = true;
  });
  const double m0 = c.Monotonic();
  while (!flag) c.WaitFor(cv, l, 0.25);
  other.join();
  EXPECT_GE(c.Monotonic() - m0, 0.25);
}

TEST(ClockTest, RealClockAgreesWithItsReadings) {
  const double a = Clock::Real().Monotonic();
  const double b = MonotonicSeconds();
  EXPECT_LE(a, b);
  EXPECT_LT(b - a, 1.0);
  EXPECT_GT(WallSeconds(), 1.7e9);
}

}  // namespace
}  // namespace anneal
