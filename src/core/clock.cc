#include "core/clock.h"

#include <thread>

namespace anneal {

namespace {

class RealClock : public Clock {
 public:
  double Monotonic() override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  double Wall() override {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
  void SleepFor(double seconds) override {
    if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  }
  void WaitFor(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, double seconds) override {
    if (seconds > 0) cv.wait_for(lock, std::chrono::duration<double>(seconds));
  }
};

}  // namespace

Clock& Clock::Real() {
  static RealClock c;
  return c;
}

double SimulatedClock::Monotonic() {
  std::lock_guard<std::mutex> l(mu_);
  return 1000.0 + offset_;
}

double SimulatedClock::Wall() {
  std::lock_guard<std::mutex> l(mu_);
  return 1.8e9 + offset_;
}

void SimulatedClock::Advance(double seconds) {
  std::lock_guard<std::mutex> l(mu_);
  if (seconds > 0) offset_ += seconds;
}

void SimulatedClock::WaitFor(std::condition_variable&, std::unique_lock<std::mutex>& lock, double seconds) {
  // The caller's lock is released meanwhile, as a real wait would, so other threads make progress.
  lock.unlock();
  Advance(seconds);
  std::this_thread::yield();
  lock.lock();
}

double MonotonicSeconds() { return Clock::Real().Monotonic(); }
double WallSeconds() { return Clock::Real().Wall(); }

}  // namespace anneal
