#include "storage/s3_stats.h"

namespace anneal {

S3Counters& S3ProcessCounters() {
  static S3Counters c;
  return c;
}

S3Snapshot S3CounterSnapshot() {
  const S3Counters& c = S3ProcessCounters();
  return {{"s3_requests", static_cast<double>(c.requests.load())},
          {"s3_retries", static_cast<double>(c.retries.load())},
          {"s3_throttled", static_cast<double>(c.throttled.load())},
          {"s3_failures", static_cast<double>(c.failures.load())},
          {"s3_bytes_sent", static_cast<double>(c.bytes_sent.load())},
          {"s3_bytes_received", static_cast<double>(c.bytes_received.load())}};
}

S3Snapshot S3CounterDelta(const S3Snapshot& a, const S3Snapshot& b) {
  S3Snapshot d = b;
  for (size_t i = 0; i < d.size() && i < a.size(); ++i) d[i].second -= a[i].second;
  return d;
}

}  // namespace anneal
