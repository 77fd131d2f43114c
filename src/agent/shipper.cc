#include "agent/shipper.h"

#include <algorithm>
#include <cmath>

#include "protocol/api_client.h"
#include "protocol/wire.h"

namespace anneal {

namespace {
constexpr size_t kBatch = 2000;
constexpr std::chrono::milliseconds kWindow(1000);
}

Shipper::Shipper(std::string server_url, std::string job, int attempt, int node, const std::string& spool_path)
    : url_(std::move(server_url)), job_(std::move(job)), attempt_(attempt), node_(node), spool_(spool_path, job_) {
  thread_ = std::thread([this] { Loop(); });
}

Shipper::~Shipper() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Shipper::AddLine(int rank, const std::string& stream, const std::string& text) {
  LogLine x;
  x.attempt = attempt_;
  x.node = node_;
  x.rank = rank;
  x.stream = stream;
  x.at = WallSeconds();
  x.text = text;
  {
    std::lock_guard<std::mutex> l(mu_);
    x.seq = ++line_seq_;
    spool_.Add(x);
    lines_.push_back(std::move(x));
  }
  cv_.notify_all();
}

void Shipper::AddMetric(const std::string& name, int rank, double value, int64_t step) {
  // JSON has no NaN or infinity (nlohmann writes null) and the store's values are REAL NOT NULL: a
  // non-finite value is left out of the metrics (its log line keeps it, and the stopping rules see it).
  if (!std::isfinite(value)) return;
  MetricPoint p;
  p.attempt = attempt_;
  p.node = node_;
  p.name = name;
  p.rank = rank;
  p.at = WallSeconds();
  p.value = value;
  p.step = step;
  {
    std::lock_guard<std::mutex> l(mu_);
    p.seq = ++point_seq_;
    spool_.Add(p);
    points_.push_back(std::move(p));
  }
  cv_.notify_all();
}

size_t Shipper::pending() const {
  std::lock_guard<std::mutex> l(mu_);
  return lines_.size() + points_.size();
}

void Shipper::RemoveSpool() {
  std::lock_guard<std::mutex> l(mu_);
  if (lines_.empty() && points_.empty()) spool_.Remove();
}

bool Shipper::Flush(double timeout_s) {
  std::unique_lock<std::mutex> l(mu_);
  flush_ = true;
  cv_.notify_all();
  const bool done = drained_.wait_for(l, std::chrono::duration<double>(timeout_s),
                                      [this] { return lines_.empty() && points_.empty(); });
  flush_ = false;
  return done;
}

void Shipper::Loop() {
  std::unique_ptr<ApiClient> client;
  double backoff = 0.1;
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    // Batch: a record waits up to kWindow for others (fewer requests, fewer wake-ups beside the ranks).
    cv_.wait_for(l, kWindow, [this] { return stop_ || (flush_ && !(lines_.empty() && points_.empty())) || lines_.size() >= kBatch ||
                                      points_.size() >= kBatch;
    });
    if (lines_.empty() && points_.empty()) {
      drained_.notify_all();
      if (stop_) return;
      continue;
    }
    // Copy a batch out; it leaves the queue only once stored.
    nlohmann::json lines = nlohmann::json::array(), points = nlohmann::json::array();
    const size_t nl = std::min(kBatch, lines_.size()), np = std::min(kBatch, points_.size());
    for (size_t i = 0; i < nl; ++i) lines.push_back(ToJson(lines_[i]));
    for (size_t i = 0; i < np; ++i) points.push_back(ToJson(points_[i]));
    const bool stopping = stop_;
    l.unlock();
    bool ok = true;
    if (!client) {
      auto c = ApiClient::Make(url_, 10);
      ok = c.ok();
      if (ok) client = std::move(*c);
    }
    if (ok && nl) ok = client->Post("/v1/jobs/" + job_ + "/logs", {{"lines", lines}}).ok();
    if (ok && np) ok = client->Post("/v1/jobs/" + job_ + "/metrics", {{"points", points}}).ok();
    l.lock();
    if (ok) {
      lines_.erase(lines_.begin(), lines_.begin() + static_cast<std::ptrdiff_t>(nl));
      points_.erase(points_.begin(), points_.begin() + static_cast<std::ptrdiff_t>(np));
      backoff = 0.1;
      if (lines_.empty() && points_.empty()) drained_.notify_all();
    } else {
      client.reset();  // a fresh connection next time
      if (stopping) return;  // the owner gave up waiting (Flush timed out)
      cv_.wait_for(l, std::chrono::duration<double>(backoff), [this] { return stop_; });
      backoff = std::min(2.0, backoff * 2);
    }
  }
}

}  // namespace anneal
