#include "control/request_stats.h"

#include <cctype>
#include <string_view>
#include <sstream>
#include <vector>

namespace anneal {

std::string RouteLabel(const std::string& path) {
  const std::string p = path.substr(0, path.find('?'));
  if (p == "/metrics" || p.rfind("/ui", 0) == 0) return p == "/metrics" ? p : "/ui";
  if (p.rfind("/v1/", 0) != 0) return "other";
  // Trivially destructible: a request still being logged while the process exits must not read a
  // destroyed std::set (ASan found it in the api fuzz harness's replay, at exit).
  static constexpr std::string_view kCollections[] = {"jobs", "users", "packages", "instances", "tokens"};
  auto is_collection = [](const std::string& s) {
    for (std::string_view c : kCollections) {
      if (s == c) return true;
    }
    return false;
  };
  std::vector<std::string> segs;
  std::istringstream in(p.substr(1));
  for (std::string s; std::getline(in, s, '/');) segs.push_back(s);
  std::string out;
  for (size_t i = 0; i < segs.size(); ++i) {
    bool variable = i > 0 && is_collection(segs[i - 1]);
    for (char c : segs[i]) variable |= std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.';
    if (i == 0) variable = false;  // "v1"
    out += '/';
    out += variable ? std::string("{id}") : segs[i];
  }
  return out;
}

void RequestStats::Observe(const std::string& method, const std::string& path, int status, double seconds) {
  const std::string route = RouteLabel(path);
  PromHistogram* h;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto& slot = latency_[{method, route}];
    if (!slot) slot = std::make_unique<PromHistogram>(PromHistogram::LatencyBounds());
    h = slot.get();
    ++counts_[{method, route, status}];
  }
  h->Observe(seconds);
}

void RequestStats::Write(PromText* t) const {
  std::lock_guard<std::mutex> l(mu_);
  t->Family("anneal_http_request_duration_seconds", "histogram", "API request latency, by method and route");
  for (const auto& [key, h] : latency_) {
    h->Write(t, "anneal_http_request_duration_seconds", {{"method", key.first}, {"route", key.second}});
  }
  t->Family("anneal_http_requests_total", "counter", "API requests answered, by method, route and HTTP status");
  for (const auto& [key, n] : counts_) {
    t->Sample("anneal_http_requests_total",
              {{"method", std::get<0>(key)}, {"route", std::get<1>(key)}, {"code", std::to_string(std::get<2>(key))}},
              static_cast<double>(n));
  }
}

}  // namespace anneal
