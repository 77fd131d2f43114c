// LatestPoints: each job's newest metric point per (name, node, rank), kept in memory as the agents'
// batches arrive, so that /metrics reads it in O(series) instead of scanning the job's points in the
// store (a job with 1M points took 1.1 s a scrape). A job the server has seen no point of since it
// started is filled once from the store (JobStore::LatestMetrics). Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "control/job_store.h"

namespace anneal {

class LatestPoints {
 public:
  // Keeps each series' newest point (by time; a retried, older batch changes nothing).
  void Note(const std::string& job, const std::vector<MetricPoint>& points);
  // The job's newest points, by name; nullopt when nothing was noted for it.
  std::optional<std::vector<MetricPoint>> Of(const std::string& job) const;
  // Drops every job not in `keep` (ended jobs).
  void KeepOnly(const std::set<std::string>& keep);

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::map<std::tuple<std::string, int, int>, MetricPoint>> jobs_;
};

}  // namespace anneal
