// Scheduler: the control plane's decisions as a pure function. One pass reads everything it needs
// at once (a SchedulerView, read by control/scheduler_loop.cc), decides, and returns the writes to
// make (a Decision: actions in the order they must be applied, and why each Pending job waits). It
// does no I/O and reads no clock: `now` is given, so a test drives it with a SimulatedClock and
// hand-made views, without HTTP and without sleeping (tests/control/scheduler_test.cc).
//
// A pass, in order (each step sees what the earlier ones decided):
//   1. instances whose agents are gone are forgotten; warm pools past keep_alive_s, or with a lost
//      instance, are released;
//   2. running jobs move on: Starting -> Downloading once every instance registered and passed its
//      health checks (an unhealthy one replaced, max_replacements rounds), a start timeout, a lost
//      instance or a failed node fails the attempt (retried on fresh instances while
//      retry.max_attempts allows and the cause is retryable); the slowest node sets the phase;
//      max_runtime_s stops the job; a Stopping job ends once every node is quiet;
//   3. the queue: Restarting jobs first, then Pending ones strictly first come, first served within
//      the quotas (control/quota.h): a job held by its user's or its type's limit lets later ones
//      pass, one that does not fit the overall limit or the backend holds the queue; a warm pool of
//      an ended job with the same instance type, count, slots and role is reused whole; idle pools
//      give way to a waiting job, the soonest to expire first; max_pending_s stops a job that waited
//      too long.
// Thread-safety: none needed (no shared state).
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "provision/instance_provider.h"
#include "control/job_store.h"
#include "control/quota.h"

namespace anneal {

// Pre-start health checks (docs/health-checks.md): every instance of a job, once all registered.
struct HealthPolicy {
  bool enabled = true;
  double min_free_memory_gb = 0.25;
  double min_free_disk_gb = 0.5;
  int collective_mb = 16;             // allreduce across the job's instances (0: none)
  double collective_timeout_s = 60;
  std::string command;                // an operator's own check, run by /bin/sh on each instance
  int max_replacements = 3;           // rounds of replacing unhealthy instances before failing
};

struct SchedulerConfig {
  QuotaOptions quota;
  HealthPolicy health;
  // What the backend is (asked of it once, at start: InstanceProvider::obtains, capacity, name): whether it
  // obtains a fresh gang of instances per job (local) or the scheduler assigns agents that joined
  // by themselves (static), and how many instances it runs at once (-1: no limit known).
  bool backend_obtains = false;
  int backend_capacity = -1;
  bool backend_queues = false;  // InstanceProvider::queues(): gangs wait in the engine's queue, not anneal's
  std::string backend_name;     // for messages
  double heartbeat_s = 1;
  double heartbeat_timeout_s = 30;  // an instance silent this long is lost
  double joined_forget_s = 600;     // an idle (or unhealthy) joined agent silent this long is forgotten
  double start_timeout_s = 120;     // a job's instances must register within this
  std::string instances_dir;        // where the agents' logs are, named when they never register
};

// What an agent said it was running in its last heartbeat.
struct AgentBusy {
  std::string job;
  int attempt = -1;
  double at = 0;
};

// Everything one pass reads.
struct SchedulerView {
  double server_start = 0;  // heartbeat deadlines count from the server's start at the earliest
  // Every started, not terminal job, then the head of the queue (the oldest Pending jobs), each in
  // submission order.
  std::vector<JobRecord> active, pending;
  // Ended jobs the pass may touch: those whose warm pool is available or in use.
  std::map<std::string, JobRecord> ended;
  std::vector<InstanceRecord> instances;                     // the store's order (registered_at, id)
  std::map<std::string, std::vector<NodeReport>> reports;    // active job -> its attempt's reports
  std::map<std::string, std::vector<HealthRecord>> health;   // Starting job -> its attempt's checks
  std::map<std::string, int> health_round;                   // Starting job -> replacement round
  std::map<std::string, int> interruptions;                  // active job -> attempts ended Interrupted
  std::map<std::string, std::string> pool_from;              // job -> the job whose pool it took
  std::map<std::string, int> user_limits;                    // users' own instance limits
  std::map<std::string, AgentBusy> busy;                     // instance -> its last heartbeat's claim
  // The last lines of a rank that failed first on a node: (job, rank) -> lines, oldest first.
  std::map<std::pair<std::string, int>, std::vector<std::string>> last_lines;
  std::set<std::string> stopped_by_runtime;  // Stopping jobs whose stop came from max_runtime_s
  std::set<std::string> requeued;            // Stopping jobs whose stop is a requeue (anneal stop --requeue)
  std::vector<std::string> gone;             // instances whose agent the backend saw exit
  // Instances the backend has not started yet, with its reason (InstanceProvider::Poll), and per job the
  // last time one of its instances was pending: the start timeout counts from then.
  std::map<std::string, std::string> instance_pending;
  std::map<std::string, double> pending_until;
};

// The writes a pass decided, applied in order by the server (control/scheduler_loop.cc).
namespace act {
struct Transition {  // JobStore::Transition at the pass's `now`
  std::string job;
  JobPhase to = JobPhase::kPending;
  std::string message, failure_reason;
  int exit_code = -1;
  StopCause stop = StopCause::kNone;  // a move to Stopping: why
};
struct SetAttempt {
  std::string job;
  int attempt = 0;
};
struct PutInstance {  // a new instance record or a move of one (instance_state.h)
  InstanceRecord instance;
};
struct Obtain {  // one gang request: all of a job attempt's new instances together (InstanceProvider::Obtain)
  std::string job;
  int attempt = 0;
  std::vector<InstanceRequest> instances;
};
struct Release {  // the backend frees an instance it obtained (its record is already released)
  std::string instance;
};
struct Forget {  // the instance is gone for good: its record and its token
  std::string instance;
};
struct SetWarmPool {
  std::string job;
  nlohmann::json pool;
};
struct SetValue {
  std::string key, value;
};
struct WakePool {  // a warm pool was taken: answer its agents' held heartbeats now
  std::vector<std::string> instances;
};
}  // namespace act

using Action = std::variant<act::Transition, act::SetAttempt, act::PutInstance, act::Obtain, act::Release,
                            act::Forget, act::SetWarmPool, act::SetValue, act::WakePool>;

struct Decision {
  std::vector<Action> actions;
  // Why a job waits: a Pending one for instances or a quota, a Starting one for instances the
  // backend has not started ("instance job-a0-n1: Resources").
  std::map<std::string, std::string> pending_reasons;
};

// One whole pass.
Decision Decide(const SchedulerConfig& c, const SchedulerView& v, double now);
// Step 2's start of one Starting job only (from its agent's heartbeat, so that the agent gets its
// assignment in the same answer); v needs that job in `active`, the instances and its health.
Decision DecideStart(const SchedulerConfig& c, const SchedulerView& v, const std::string& job, double now);
// The server's end (anneal submit --local): every instance let go (obtained ones released through the
// backend, joined ones back to the pool) and every warm pool Terminated.
Decision DecideDrain(const SchedulerConfig& c, const SchedulerView& v, double now);

// What a job must share with a warm pool to reuse it.
std::string PoolKey(const JobSpec& spec);
// The record key of a job attempt's health round, and of the pool a job took.
std::string HealthRoundKey(const std::string& job, int attempt);
// The store's key for how many of a job's attempts were interrupted (they do not count as failures).
std::string InterruptionsKey(const std::string& job);
// The start of a Stopping transition's message that makes the stop a requeue (an interruption).
inline constexpr const char* kRequeueRequested = "requeue requested";  // the message's start (StopCause::kRequeue)
std::string PoolFromKey(const std::string& job);

}  // namespace anneal
