#include "core/progress.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace anneal {

Progress::Progress(std::string label, uint64_t total_bytes, double interval_s)
    : label_(std::move(label)), total_(total_bytes), interval_s_(interval_s), tty_(::isatty(2) == 1) {}

Progress::~Progress() { Stop(); }

void Progress::Start() {
  start_s_ = last_plain_s_ = MonotonicSeconds();
  if (quiet_) return;
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lk(mu_);
    while (!stop_) {
      cv_.wait_for(lk, std::chrono::duration<double>(interval_s_));
      if (!stop_) Print(false);
    }
  });
}

void Progress::Stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (!quiet_) Print(true);
}

void Progress::Print(bool final) {
  double now = MonotonicSeconds();
  double el = std::max(now - start_s_, 1e-9);
  // Plain lines (not a terminal) every 10 s at most, plus the final one.
  if (!tty_ && !final && now - last_plain_s_ < 10.0) return;
  last_plain_s_ = now;
  uint64_t b = bytes_.load(), d = docs_.load(), t = tokens_.load();
  double mbps = static_cast<double>(b) / 1e6 / el;
  char eta[32] = "";
  double frac = total_ ? std::min(1.0, static_cast<double>(b) / static_cast<double>(total_)) : 0.0;
  if (total_ && b > 0 && !final) {
    std::snprintf(eta, sizeof(eta), " ETA %.0fs", el * (1.0 - frac) / frac);
  }
  char bar[32] = "";
  if (tty_ && total_) {
    int filled = static_cast<int>(frac * 20);
    bar[0] = ' ';
    bar[1] = '[';
    for (int i = 0; i < 20; ++i) bar[2 + i] = i < filled ? '#' : '.';
    bar[22] = ']';
    bar[23] = 0;
  }
  std::fprintf(stderr, "%s%s%s %.1f/%.1f MB, %llu docs, %llu tokens, %.1f MB/s%s%s", tty_ ? "\r" : "",
               label_.c_str(), bar, static_cast<double>(b) / 1e6, static_cast<double>(total_) / 1e6,
               static_cast<unsigned long long>(d), static_cast<unsigned long long>(t), mbps, eta,
               final ? " done\n" : (tty_ ? "\033[K" : "\n"));
  std::fflush(stderr);
}

}  // namespace anneal
