// StoppingRuleWatch: a job's stopping.rules (protocol/job_definition.h, docs/job-spec.md) watched by the
// agent of each instance over what its ranks log and what the instance samples:
//   non_finite M             a value of metric M is NaN or infinite;
//   no_improvement M N mode  N values of M in a row (per rank) without a new best (min or max);
//   gpu_utilization_below P  the instance's GPU utilisation under P % for for_s seconds (only where
//                            the agent samples one: nvidia-smi);
//   no_output                no rank printed a line for for_s seconds (from the start for the first).
// The agent ends the attempt on the first violation (agent.cc): the ranks are stopped as for a stop
// request (SIGTERM, the grace, SIGKILL), and the node reports the rule as the failure's reason with
// its action: stop (a user error: the job fails) or retry (an infrastructure failure: retried while
// retry.max_attempts allows). Pure: time is passed in. Not thread-safe (the agent serializes calls).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "protocol/job_definition.h"

namespace anneal {

class StoppingRuleWatch {
 public:
  StoppingRuleWatch(std::vector<StoppingRule> rules, double now);

  struct Violation {
    int index = 0;  // in stopping.rules
    StoppingRule rule;
    std::string why;  // "stopping rule 1 (non_finite train_loss, action stop): rank 0 logged train_loss = nan"
  };
  // A value a rank logged (rank >= 0) or the instance sampled (rank -1).
  std::optional<Violation> OnMetric(const std::string& name, int rank, double value, double now);
  void OnLine(double now) { last_line_ = now; }
  // The time-based rules.
  std::optional<Violation> OnTick(double now);

 private:
  Violation Broken(int i, const std::string& what) const;

  std::vector<StoppingRule> rules_;
  double last_line_;
  std::map<std::pair<int, int>, std::pair<double, int>> best_;  // (rule, rank) -> (best, values since)
  double gpu_low_since_ = -1;  // when the GPU utilisation went under the floor (-1: it is not)
  double gpu_last_ = -1;       // the newest sample
};

}  // namespace anneal
