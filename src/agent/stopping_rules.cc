#include "agent/stopping_rules.h"

#include <cmath>
#include <cstdio>

namespace anneal {

namespace {

std::string Num(double v) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.6g", v);
  return b;
}

}  // namespace

StoppingRuleWatch::StoppingRuleWatch(std::vector<StoppingRule> rules, double now)
    : rules_(std::move(rules)), last_line_(now) {}

StoppingRuleWatch::Violation StoppingRuleWatch::Broken(int i, const std::string& what) const {
  const StoppingRule& r = rules_[i];
  return {i, r, "stopping rule " + std::to_string(i + 1) + " (" + r.Describe() + ", action " + r.action + "): " + what};
}

std::optional<StoppingRuleWatch::Violation> StoppingRuleWatch::OnMetric(const std::string& name, int rank, double value,
                                                                        double now) {
  if (name == "gpu_utilization_percent" && rank < 0) gpu_last_ = value;
  for (int i = 0; i < static_cast<int>(rules_.size()); ++i) {
    const StoppingRule& r = rules_[i];
    if (r.when == "gpu_utilization_below" && name == "gpu_utilization_percent" && rank < 0) {
      if (value >= r.percent) {
        gpu_low_since_ = -1;
      } else if (gpu_low_since_ < 0) {
        gpu_low_since_ = now;
      }
      continue;
    }
    if (r.metric != name) continue;
    const std::string who = rank >= 0 ? "rank " + std::to_string(rank) : "the instance";
    if (r.when == "non_finite" && !std::isfinite(value)) return Broken(i, who + " logged " + name + " = " + Num(value));
    if (r.when != "no_improvement" || !std::isfinite(value)) continue;
    auto it = best_.find({i, rank});
    const bool better = it == best_.end() || (r.mode == "min" ? value < it->second.first : value > it->second.first);
    if (better) {
      best_[{i, rank}] = {value, 0};
    } else if (++it->second.second >= r.steps) {
      return Broken(i, who + "'s " + name + " has not improved on its best, " + Num(it->second.first) + ", for " +
                           std::to_string(it->second.second) + " values (the newest " + Num(value) + ")");
    }
  }
  return std::nullopt;
}

std::optional<StoppingRuleWatch::Violation> StoppingRuleWatch::OnTick(double now) {
  for (int i = 0; i < static_cast<int>(rules_.size()); ++i) {
    const StoppingRule& r = rules_[i];
    if (r.when == "no_output" && now - last_line_ >= r.for_s) {
      return Broken(i, "no rank printed a line for " + Num(now - last_line_) + " s");
    }
    if (r.when == "gpu_utilization_below" && gpu_low_since_ >= 0 && now - gpu_low_since_ >= r.for_s) {
      return Broken(i, "the GPU utilisation stayed under " + Num(r.percent) + " % for " + Num(now - gpu_low_since_) +
                           " s (the newest " + Num(gpu_last_) + " %)");
    }
  }
  return std::nullopt;
}

}  // namespace anneal
