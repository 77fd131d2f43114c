// Progress reporting for long commands (prep, downloads): counters that worker threads bump, and a
// reporter thread that prints them to stderr every interval — a redrawn bar on a terminal, plain
// lines otherwise (logs, CI). Thread-safety: Add() from any thread; Start/Stop from the owner.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "core/clock.h"

namespace anneal {

class Progress {
 public:
  // total_bytes: the work's size for the bar and the ETA (0 if unknown).
  Progress(std::string label, uint64_t total_bytes, double interval_s = 0.5);
  ~Progress();
  void Start();
  // Prints the final line and stops the reporter.
  void Stop();
  void Add(uint64_t bytes, uint64_t docs, uint64_t tokens) {
    bytes_ += bytes;
    docs_ += docs;
    tokens_ += tokens;
  }
  // Disables output (tests), or forces plain lines.
  void set_quiet(bool q) { quiet_ = q; }

 private:
  void Print(bool final);
  std::string label_;
  uint64_t total_;
  double interval_s_;
  bool tty_;
  bool quiet_ = false;
  std::atomic<uint64_t> bytes_{0}, docs_{0}, tokens_{0};
  double start_s_ = 0, last_plain_s_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};


}  // namespace anneal
