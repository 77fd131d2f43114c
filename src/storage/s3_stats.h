// What this process's S3 client did (storage/s3_object_store.cc counts every attempt): requests,
// retries, throttling answers (503 SlowDown), requests that failed for good, and bytes each way. The
// agent ships a job's share (the difference since the job started) as the node's metrics s3_*, so a
// user sees throttling before it hurts. Thread-safe (atomics).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace anneal {

struct S3Counters {
  std::atomic<uint64_t> requests{0}, retries{0}, throttled{0}, failures{0}, bytes_sent{0}, bytes_received{0};
};

S3Counters& S3ProcessCounters();

// (metric name, value): s3_requests, s3_retries, s3_throttled, s3_failures, s3_bytes_sent, s3_bytes_received.
using S3Snapshot = std::vector<std::pair<std::string, double>>;
S3Snapshot S3CounterSnapshot();
// b - a, name by name (both from S3CounterSnapshot).
S3Snapshot S3CounterDelta(const S3Snapshot& a, const S3Snapshot& b);

}  // namespace anneal
