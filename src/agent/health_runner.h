// A pre-start health check of one (job, attempt, round) on this instance, on its own thread
// (docs/health-checks.md): the local checks (agent/health_check.h), then the collective across the
// job's instances, then the result POSTed to /v1/jobs/<job>/health, retried with backoff while the
// server is unreachable (a 4xx answer ends the retries: the server no longer wants it). Stop()
// abandons the check: a running command and the collective's rank are killed and nothing is posted.
// While it runs, the heartbeat carries Key() so the server does not ask again.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/agent.h"

namespace anneal {

class HealthRunner {
 public:
  // request: the heartbeat's "health" object. on_done is called from the runner's thread at its end.
  HealthRunner(const AgentOptions& o, std::string address, const nlohmann::json& request, std::function<void()> on_done);
  ~HealthRunner();
  void Stop();
  bool done() const;
  // {"job", "attempt", "round"}: what the heartbeat reports while this runs.
  nlohmann::json Key() const;
  bool Is(const nlohmann::json& request) const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace anneal
