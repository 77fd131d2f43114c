// What an agent measures on its instance while a job runs (all reported through the Shipper):
//   system metrics, rank -1, every interval: cpu_percent (all CPUs, from /proc/stat), memory_used_mb
//     (MemTotal - MemAvailable), disk_used_percent (the agent's work dir), and with nvidia-smi on the
//     PATH gpu_utilization_percent and gpu_memory_used_mb (mean over the GPUs);
//   metric_definitions: each rank line is matched against every (name, regex); the first capture
//     group, read as a number, is the value for that rank;
//   step_time_s per rank: ranks that know their step (the built-in trainer does) rewrite
//     $ANNEAL_PROGRESS_DIR/rank-<RANK> with "<step> <seconds of that step> [<sum of all step seconds>]";
//     each poll that finds a new step gives one point at that step: the mean step time since the
//     previous poll (from the running sum), or the latest step's time when the file has no sum;
//   the built-in trainer's metrics: each rank appends "<step> <name>=<value> ..." lines to
//     $ANNEAL_PROGRESS_DIR/metrics-<RANK> (train/report.h, docs/formats/job-store.md); each poll gives
//     the values of the complete lines appended since the last one, each a point of its step. A name
//     the spec's metric_definitions also defines is left out: the user's regex replaces it.
// Thread-safety: SystemSampler, ProgressReader and TrainerMetricsReader are used by one thread;
// MetricExtractor::Match is const and may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/job_definition.h"

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

struct RankStepTime {
  int rank = 0;
  int64_t step = 0;      // the rank's step now
  double seconds = 0;    // mean seconds per step since the last poll
};

class ProgressReader {
 public:
  explicit ProgressReader(std::string dir) : dir_(std::move(dir)) {}
  // One for every rank whose step advanced since the last call.
  std::vector<RankStepTime> Poll();

 private:
  std::string dir_;
  std::map<int, std::pair<long long, double>> last_;  // rank -> (step, running total of step seconds)
};

// One value of a trainer's metrics file.
struct StepPoint {
  int rank = 0;
  int64_t step = 0;
  std::string name;
  double value = 0;  // NaN and infinities as written (the Shipper drops them, the stopping rules see them)
};

// One line of a metrics file without its newline: false (nothing appended) unless it starts with a
// step (digits); then each "<name>=<value>" token whose name is [A-Za-z0-9_]+ and whose value is a
// whole number strtod reads is appended to out, other tokens skipped.
bool ParseTrainerMetricsLine(std::string_view line, int64_t* step, std::vector<std::pair<std::string, double>>* out);

class TrainerMetricsReader {
 public:
  // skip: names the spec's metric_definitions define (their regexes' values are shipped instead).
  TrainerMetricsReader(std::string dir, std::set<std::string> skip) : dir_(std::move(dir)), skip_(std::move(skip)) {}
  // The values of every complete line appended to a metrics-<RANK> file since the last call, in file
  // order per rank (at most 4 MiB read per file per call; the rest the next time). A file that shrank
  // was replaced: read again from its start. A line of more than 64 KiB is dropped.
  std::vector<StepPoint> Poll();

 private:
  struct File {
    uint64_t offset = 0;   // bytes consumed
    std::string partial;   // an incomplete last line
    bool overlong = false; // dropping a line longer than the limit, up to its newline
  };
  std::string dir_;
  std::set<std::string> skip_;
  std::map<int, File> files_;
};

}  // namespace anneal
