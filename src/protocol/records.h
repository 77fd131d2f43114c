// The records an agent sends the server and the server keeps and serves: a rank's log line, a metric
// point, a node's report of its part of an attempt. Their JSON (docs/api/openapi.yaml) is written and
// read in protocol/wire.h only; their rows in control/job_store.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace anneal {

struct LogLine {
  int64_t id = 0;  // the server's order (ascending = the order lines arrived, per rank in print order)
  int attempt = 0, node = 0;
  int64_t seq = 0;  // the agent's sequence number (duplicates are dropped)
  int rank = -1;    // -1: the agent itself
  std::string stream;  // stdout | stderr | agent
  double at = 0;
  std::string text;
};

struct MetricPoint {
  int64_t id = 0;
  int attempt = 0, node = 0;
  int64_t seq = 0;
  std::string name;
  int rank = -1;  // -1: the instance (system metrics)
  double at = 0, value = 0;
  int64_t step = -1;  // the training step it belongs to (the built-in trainer's, step_time_s); -1: none
};

// Where a node is in an attempt, in the order it goes through them (the scheduler compares them).
enum class NodeState { kDownloading, kTraining, kUploading, kFinished };
// Its name on the wire and in the store: "downloading", "training", "uploading", "finished".
const char* NodeStateName(NodeState s);
// The state a name gives; nullopt for any other text.
std::optional<NodeState> ParseNodeState(const std::string& name);

struct NodeReport {
  int attempt = 0, node = 0;
  NodeState state = NodeState::kDownloading;
  int exit_code = -1;
  std::string message;
  double at = 0;
  // finished only: why (protocol/exit_cause.h), whether the failure began on this node, and the
  // rank that failed first there (-1: none or unknown).
  std::string cause;
  bool local = false;
  int failed_rank = -1;
  // How the node runs the ranks: "uid N" (in the job's sandbox), "off: <why>" (the job's
  // sandbox: false, or an agent started with --no-sandbox); "" = not said (an older agent).
  std::string sandbox;
};

}  // namespace anneal
