#include "control/latest_points.h"

namespace anneal {

void LatestPoints::Note(const std::string& job, const std::vector<MetricPoint>& points) {
  std::lock_guard<std::mutex> l(mu_);
  auto& series = jobs_[job];
  for (const MetricPoint& p : points) {
    auto [it, added] = series.try_emplace({p.name, p.node, p.rank}, p);
    if (!added && p.at >= it->second.at) it->second = p;
  }
}

std::optional<std::vector<MetricPoint>> LatestPoints::Of(const std::string& job) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return std::nullopt;
  std::vector<MetricPoint> out;
  for (const auto& [key, p] : it->second) out.push_back(p);
  return out;
}

void LatestPoints::KeepOnly(const std::set<std::string>& keep) {
  std::lock_guard<std::mutex> l(mu_);
  for (auto it = jobs_.begin(); it != jobs_.end();) it = keep.count(it->first) ? std::next(it) : jobs_.erase(it);
}

}  // namespace anneal
