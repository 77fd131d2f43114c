// The shipper's spool: every log line and metric point an agent's Shipper takes, appended to a file
// in the agent's work folder before it is sent (docs/formats/agent-spool.md), so that records an
// agent had not yet delivered when it died (SIGKILL, a crash, stopped past its heartbeat timeout)
// still reach the store: the local backend reads the spool of each agent it finds gone and the
// server stores what it holds (the store drops every (job, attempt, node, seq) it already has).
//
// One file per (job, attempt, node): <work dir>/spool/<job>.<attempt>.<node>.jsonl, one JSON object
// per line: {"job": J, "line": LogLine} or {"job": J, "point": MetricPoint} (protocol/wire.h's JSON).
// A write that fails (a full disk) leaves the record only in memory: the spool is for the agent's
// death, not the server's absence, which the shipper rides out by itself.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "protocol/records.h"

namespace anneal {

class SpoolWriter {
 public:
  // path "": writes nothing.
  explicit SpoolWriter(const std::string& path, std::string job);
  ~SpoolWriter();
  SpoolWriter(const SpoolWriter&) = delete;
  SpoolWriter& operator=(const SpoolWriter&) = delete;
  void Add(const LogLine& x);
  void Add(const MetricPoint& p);
  // Everything was delivered: the file goes.
  void Remove();
  const std::string& path() const { return path_; }

 private:
  void Write(const std::string& text);
  std::string path_, job_;
  int fd_ = -1;
};

// The spool file of (job, attempt, node) under an agent's work folder.
std::string SpoolPath(const std::string& work_dir, const std::string& job, int attempt, int node);

// What a dead agent's spool holds, by job.
struct SpoolRecords {
  std::vector<LogLine> lines;
  std::vector<MetricPoint> points;
};
// Reads every spool file under work_dir/spool (none: an empty map). A line that does not parse (the
// last one, cut by the agent's death) is skipped and counted in *bad.
std::map<std::string, SpoolRecords> ReadSpool(const std::string& work_dir, int* bad = nullptr);

}  // namespace anneal
