// One job attempt on this instance, on its own thread (agent/agent.h describes the four phases):
// the node's plan (agent/node_plan.h) carried out — source, channels, folders, the meeting, the
// sandbox —, the launcher run with every rank line shipped and watched (metrics, stopping rules,
// hangs), the uploads, and the node's reports to the server.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "agent/agent.h"
#include "agent/exec_runner.h"
#include "protocol/wire.h"

namespace anneal {

class JobRunner {
 public:
  // Starts the attempt's thread. on_done is called from it once the job's end is reported.
  JobRunner(const AgentOptions& o, std::string address, Assignment assignment, std::function<void()> on_done);
  // Stops the attempt (its ranks get SIGTERM and the grace period) and waits for its end.
  ~JobRunner();
  void Stop();
  // The server has been unreachable past the orphan timeout: stop the ranks (they checkpoint) rather
  // than train on unwatched; what is left to report gets the short budget a signal's stop gets.
  void Orphan();
  bool done() const;
  const std::string& job() const;
  int attempt() const;
  // Where and with what an `anneal exec` into this job runs (set once the job is prepared).
  std::optional<ExecPlace> Place();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace anneal
