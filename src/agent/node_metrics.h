// What an agent measures on its instance while a job runs (all reported through the Shipper):
//   system metrics, rank -1, every interval: cpu_percent (all CPUs, from /proc/stat), memory_used_mb
//     (MemTotal - MemAvailable), disk_used_percent (the agent's work dir), and with nvidia-smi on the
//     PATH gpu_utilization_percent and gpu_memory_used_mb (mean over the GPUs);
//   metric_definitions: each rank line is matched against every (name, regex); the first capture
//     group, read as a number, is the value for that rank;
//   step_time_s per rank: ranks that know their step (the built-in trainer does) rewrite
//     $ANNEAL_PROGRESS_DIR/rank-<RANK> with "<step> <seconds of that step> [<sum of all step seconds>]";
//     each poll that finds a new step gives one point: the mean step time since the previous poll
//     (from the running sum), or the latest step's time when the file has no sum.
// Thread-safety: SystemSampler and ProgressReader are used by one thread; MetricExtractor::Match is
// const and may be called from any thread.
#pragma once

#include <map>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "control/job_spec.h"

namespace anneal {

class SystemSampler {
 public:
  explicit SystemSampler(std::string disk_path) : disk_path_(std::move(disk_path)) {}
  // (name, value) pairs; the first call's cpu_percent covers the time since construction.
  std::vector<std::pair<std::string, double>> Sample();

 private:
  std::string disk_path_;
  unsigned long long last_busy_ = 0, last_total_ = 0;
};

class MetricExtractor {
 public:
  explicit MetricExtractor(const std::vector<MetricDefinition>& defs);
  // (name, value) for every definition the line matches.
  std::vector<std::pair<std::string, double>> Match(const std::string& line) const;

 private:
  std::vector<std::pair<std::string, std::regex>> defs_;
};

class ProgressReader {
 public:
  explicit ProgressReader(std::string dir) : dir_(std::move(dir)) {}
  // (rank, mean seconds per step since the last call) for every rank whose step advanced.
  std::vector<std::pair<int, double>> Poll();

 private:
  std::string dir_;
  std::map<int, std::pair<long long, double>> last_;  // rank -> (step, running total of step seconds)
};

}  // namespace anneal
