// Shipper: sends a running job's log lines and metric points to the server, in order, without loss.
//
// Each record gets the next sequence number of its kind for (job, attempt, node) when it is added;
// a background thread posts batches (what arrived within a second, at most 2000) oldest first and drops a batch only once the server has stored
// it. While the server is unreachable (restarting, say) records wait in memory and the post is
// retried with backoff; the server ignores a (job, attempt, node, seq) it already has, so a batch sent
// twice is stored once. Flush() waits until everything added so far is acknowledged. With a spool
// path, each record is also appended to that file as it is added (protocol/spool.h), so that what an
// agent killed before delivering it is still found by the local backend; RemoveSpool() once Flush()
// delivered everything.
//
// Thread-safety: Add* from any thread; Flush from one.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "protocol/records.h"
#include "protocol/spool.h"

namespace anneal {

class Shipper {
 public:
  Shipper(std::string server_url, std::string job, int attempt, int node, const std::string& spool_path = "");
  ~Shipper();
  // rank -1: the agent's own line (stream "agent").
  void AddLine(int rank, const std::string& stream, const std::string& text);
  // A non-finite value is dropped (JSON and the store have no NaN): the line it came from is shipped.
  // step: the training step the value belongs to, -1 for none (a system sample, a regex's match).
  void AddMetric(const std::string& name, int rank, double value, int64_t step = -1);
  // Waits until every record added so far is stored by the server, or timeout_s passes (false).
  bool Flush(double timeout_s);
  size_t pending() const;
  // Everything added was delivered (Flush returned true): the spool file goes.
  void RemoveSpool();

 private:
  void Loop();
  const std::string url_, job_;
  const int attempt_, node_;
  mutable std::mutex mu_;
  std::condition_variable cv_, drained_;
  std::deque<LogLine> lines_;
  std::deque<MetricPoint> points_;
  int64_t line_seq_ = 0, point_seq_ = 0;
  SpoolWriter spool_;  // under mu_
  bool stop_ = false, flush_ = false;
  std::thread thread_;
};

}  // namespace anneal
