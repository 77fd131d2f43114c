// Time, in one place: a Clock gives monotonic seconds (durations, deadlines, timeouts) and wall
// seconds (what histories and logs show), and sleeps. Code whose behaviour depends on time takes a
// Clock (default: the real one), so a test can run it on a SimulatedClock — time that moves only when
// the code sleeps or waits, or the test advances it — with no real waiting.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace anneal {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual double Monotonic() = 0;  // seconds since an arbitrary start, never going back
  virtual double Wall() = 0;       // seconds since the Unix epoch
  virtual void SleepFor(double seconds) = 0;
  // Waits on cv (lock held by the caller) at most `seconds`; may return early, spuriously or when
  // notified: callers re-check their condition.
  virtual void WaitFor(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, double seconds) = 0;
  // The process's real clock (steady_clock and system_clock).
  static Clock& Real();
};

// Time that moves only through SleepFor, WaitFor and Advance (thread-safe). Starts at monotonic 1000 s
// and wall 1.8e9 s (2027), so a zero is never mistaken for a time.
class SimulatedClock : public Clock {
 public:
  double Monotonic() override;
  double Wall() override;
  void SleepFor(double seconds) override { Advance(seconds); }
  void WaitFor(std::condition_variable&, std::unique_lock<std::mutex>& lock, double seconds) override;
  void Advance(double seconds);

 private:
  std::mutex mu_;
  double offset_ = 0;
};

// The real clock's readings, for code that only measures (step times, log lines).
double MonotonicSeconds();
double WallSeconds();

}  // namespace anneal
