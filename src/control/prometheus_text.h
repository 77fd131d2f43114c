// Prometheus's text exposition format, version 0.0.4 (what `GET /metrics` answers; `promtool check
// metrics` lints it): families with # HELP and # TYPE, samples with escaped label values, and a
// thread-safe histogram with fixed bucket bounds.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace anneal {

using PromLabels = std::vector<std::pair<std::string, std::string>>;

// A metric or label name from any text: [a-zA-Z_:][a-zA-Z0-9_:]*, other characters as '_'.
std::string PromName(const std::string& s);
// A label name from any text: [a-zA-Z_][a-zA-Z0-9_]* (no ':', which only metric names may hold).
std::string PromLabelName(const std::string& s);

class PromText {
 public:
  // Starts a family (type: gauge, counter, histogram). Each family once, before its samples.
  void Family(const std::string& name, const char* type, const std::string& help);
  void Sample(const std::string& name, const PromLabels& labels, double value);
  const std::string& text() const { return out_; }

 private:
  std::string out_;
};

class PromHistogram {
 public:
  explicit PromHistogram(std::vector<double> bounds);
  void Observe(double v);
  // The _bucket (cumulative, then +Inf), _sum and _count samples under `name`, with `labels`.
  void Write(PromText* t, const std::string& name, const PromLabels& labels) const;
  // Seconds from 1 ms to 10 s: request and pass latencies.
  static std::vector<double> LatencyBounds();

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  double sum_ = 0;
  int64_t count_ = 0;
};

}  // namespace anneal
