// Quotas: how many instances jobs may hold (docs/quotas.md). Limits, each 0 = none:
//   per job        — resources.instance_count of one job;
//   overall        — instances across every running job;
//   per type       — running instances of one instance_type;
//   per user       — instances across one user's running jobs (the server's default, or the user's
//                    own limit set by an admin: `anneal users add NAME --max-instances N`).
// A job that can never fit (its count above the per-job, overall, type or user limit) is refused at
// submit; one that does not fit yet waits in Pending with the reason. Queueing stays first come,
// first served within the limits: a job held back by its own user's or type's limit lets later jobs
// of other users and types pass; one held back by the overall limit (or the backend's capacity)
// holds the queue, so large jobs are not starved by a stream of small ones.
#pragma once

#include <map>
#include <string>

#include "core/status.h"

namespace anneal {

struct QuotaOptions {
  int max_instances_per_job = 0;
  int max_running_instances = 0;
  int user_max_instances = 0;
  std::map<std::string, int> instance_type_max;
};

// What running jobs hold now (jobs from Starting to Stopping, including Restarting).
struct QuotaUsage {
  int total = 0;
  std::map<std::string, int> by_user, by_type;
  void Add(const std::string& user, const std::string& type, int count) {
    total += count;
    by_user[user] += count;
    by_type[type] += count;
  }
};

struct QuotaDemand {
  std::string user, type;
  int count = 1;
  int user_limit = -1;  // the user's own limit; -1: the server's default
};

// "" when the job fits now; otherwise why not ("user alice: 3 of 4 instances in use, the job needs
// 2 (quota 4)"). *holds_queue: whether later jobs must wait behind it (the overall limit).
std::string QuotaBlock(const QuotaOptions& q, const QuotaUsage& used, const QuotaDemand& d, bool* holds_queue);

// At submit: InvalidInput naming resources.instance_count when no amount of waiting lets it run.
Status CheckQuotaCanFit(const QuotaOptions& q, const QuotaDemand& d);

// "a100=8" -> {"a100", 8}, for --quota-instance-type.
Status ParseTypeQuota(const std::string& s, std::map<std::string, int>* out);

}  // namespace anneal
