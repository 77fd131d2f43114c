// RequestStats: the API's request latencies by method and route, for /metrics
// (anneal_http_request_duration_seconds, anneal_http_requests_total). A route is the path with its
// variable parts replaced ("/v1/jobs/{id}/logs"), so the label set stays small.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "control/prometheus_text.h"

namespace anneal {

// "/v1/jobs/kjv-0007/logs" -> "/v1/jobs/{id}/logs": a segment with a digit, '-' or '.', or right after
// jobs, users, packages, instances or tokens, is a variable; paths outside /v1 and /metrics are "other".
std::string RouteLabel(const std::string& path);

class RequestStats {
 public:
  void Observe(const std::string& method, const std::string& path, int status, double seconds);
  void Write(PromText* t) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::unique_ptr<PromHistogram>> latency_;  // (method, route)
  std::map<std::tuple<std::string, std::string, int>, int64_t> counts_;                    // + status
};

}  // namespace anneal
