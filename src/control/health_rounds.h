// Health rounds: the server's side of the pre-start health checks (agent/health_check.h runs them,
// docs/health-checks.md). Once every instance of a Starting job registered, each runs the round's
// checks once (memory, disk, an allreduce across the job's instances, the operator's command) and
// posts its result; the scheduler (control/scheduler.h) decides from the results: all pass ->
// Downloading, an unhealthy instance replaced and every instance checks again in the next round.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/job_store.h"
#include "control/scheduler.h"

namespace anneal {

// The check the instance `inst` of the Starting job j runs now, if any: none until all of the job's
// instances (`mine`, by node) registered, none once it posted this round's result or while it runs
// it (`running`: what its heartbeat says it runs, {"job", "attempt", "round"}).
std::optional<nlohmann::json> HealthCheckFor(const HealthPolicy& policy, const JobRecord& j,
                                             const std::vector<InstanceRecord>& mine,
                                             const std::vector<HealthRecord>& results, int round,
                                             const InstanceRecord& inst, const nlohmann::json& running);

// The attempt's current health round (0 before any replacement): the store's HealthRoundKey value.
Result<int> CurrentHealthRound(JobStore& store, const std::string& job, int attempt);

// The record of a result an agent posted ({"node", "ok", "result", "round", "attempt"}).
HealthRecord HealthResultFrom(const std::string& instance, const nlohmann::json& body, double now);

}  // namespace anneal
