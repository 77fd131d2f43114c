// What the end of a job attempt on this node means for the server (issue 35: decided as data, apart
// from the runner that carries the attempt out): the launcher's result and what the runner saw —
// a stopping rule that fired, a signal to the agent, a hang, a stop request, an OOM kill counted by
// the cgroup — become the node's exit code, cause, summary, failed rank and whether the failure is
// this node's own (docs/job-spec.md, "what ends an attempt").
#pragma once

#include <functional>
#include <string>

#include "protocol/exit_cause.h"
#include "launch/launcher.h"

namespace anneal {

struct AttemptEnd {
  int exit_code = 0;
  int failed_rank = -1;
  ExitCause cause = ExitCause::kNone;
  bool local = false;  // the failure is this node's (false: another node's stopped this one)
  std::string summary;
};

// What the runner saw while the ranks ran.
struct AttemptFacts {
  bool rule_fired = false;  // a stopping rule ended the attempt
  bool rule_retry = false;  // ... and its action is retry
  std::string rule_message;
  bool signalled = false;  // the agent got SIGTERM or SIGINT
  bool hung = false;       // the hang watch ended the ranks
  std::string hang_message;
  bool stopped = false;      // the server (or the orphan timeout) asked this attempt to stop
  bool oom_counted = false;  // the cgroup's OOM kill count rose while the ranks ran
  long long memory_mb = 0;   // the spec's resources.memory_mb (0: none)
};

// The attempt's end when preparing it (preparing) or starting the launcher failed with st: a spec,
// source or dataset that cannot be used is the user's (InvalidInput, and NotFound while preparing);
// a store or server that failed is not.
AttemptEnd EndOfError(const Status& st, bool preparing);

// Stopped before the ranks started: by the server (kStopped), or by a signal to the agent.
AttemptEnd EndBeforeStart(bool signalled, const std::function<ExitCause(std::string*)>& signal_cause);

// The attempt's end from a launcher that ran. signal_cause says what the agent's signal means (and
// why, into its argument): agent/agent_signal.h's SignalCause, or a fake in tests.
AttemptEnd EndOfLaunch(const LaunchResult& r, const AttemptFacts& f,
                       const std::function<ExitCause(std::string*)>& signal_cause);

}  // namespace anneal
