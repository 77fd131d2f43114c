// The scheduler pass's step 2 (control/scheduler.h): running jobs move on from their instances'
// registrations, health checks, heartbeats and node reports; failed attempts are retried or fail.
#include <algorithm>
#include <cstdio>

#include "control/scheduler_pass.h"

namespace anneal {

using nlohmann::json;

namespace {

int CountOf(const JobRecord& j) { return j.spec.instance_count; }


// What failed in a health result, in a line.
std::string HealthFailures(const json& result) {
  std::string out;
  for (const auto& c : result.value("checks", json::array())) {
    if (c.value("ok", true)) continue;
    if (!out.empty()) out += "; ";
    out += c.value("name", std::string("?")) + ": " + c.value("detail", std::string());
  }
  return out.empty() ? "unhealthy" : out;
}

}  // namespace

void SchedulerPass::MoveRunningJobs() {
  for (JobRecord& j : active_) {
    switch (j.phase) {
      case JobPhase::kStarting:
        Starting(j);
        break;
      case JobPhase::kDownloading:
      case JobPhase::kTraining:
      case JobPhase::kUploading:
      case JobPhase::kStopping:
        Progress(j, Mine(j.id));
        break;
      default:
        break;
    }
  }
}

void SchedulerPass::Starting(JobRecord& j) {
  const std::vector<InstanceRecord> mine = Mine(j.id);
  const int count = CountOf(j);
  int up = 0;
  for (const auto& i : mine) up += i.registered_at > 0 ? 1 : 0;
  // A registered instance gone silent is lost here too, not only once the job started: its health
  // round would otherwise hold the job for the whole start timeout (found by the chaos soak).
  for (const auto& i : mine) {
    if (i.registered_at > 0 && Since(i.last_heartbeat) > c_.heartbeat_timeout_s) {
      return FailOrRetry(j, ExitCause::kInfrastructure,
                         "instance " + i.id + " (" + i.address + ") lost before the start: no heartbeat for " +
                             std::to_string(static_cast<int>(Since(i.last_heartbeat))) + " s",
                         3, mine);
    }
  }
  if (up == count && static_cast<int>(mine.size()) == count) {
    StartIfReady(j);
    if (j.phase != JobPhase::kStarting) return;
  }
  // Instances the backend has not started: their reason is the job's, and the wait is not counted.
  for (const auto& i : mine) {
    auto p = v_.instance_pending.find(i.id);
    if (p != v_.instance_pending.end()) {
      d_.pending_reasons[j.id] = "instance " + i.id + ": " + p->second;
      return;
    }
  }
  // From entering Starting (or the last replacement of an unhealthy instance, or the last moment
  // one of its instances was pending).
  const double limit = c_.start_timeout_s + (c_.health.enabled && up == count ? c_.health.collective_timeout_s + 60 : 0);
  auto until = v_.pending_until.find(j.id);
  if (Since(std::max(j.updated_at, until == v_.pending_until.end() ? 0.0 : until->second)) <= limit) return;
  const std::string secs = std::to_string(static_cast<int>(limit));
  const std::string why = up < count ? "only " + std::to_string(up) + " of " + std::to_string(count) +
                                           " instances registered within " + secs + " s (see the agents' logs under " +
                                           c_.instances_dir + ")"
                                     : "the instances' health checks did not all report within " + secs + " s";
  FailOrRetry(j, ExitCause::kInfrastructure, why, 3, mine);
}

// Starting -> Downloading once every instance of the job has registered (and passed its checks).
void SchedulerPass::StartIfReady(JobRecord& j) {
  if (j.phase != JobPhase::kStarting) return;
  const int count = CountOf(j);
  const std::vector<InstanceRecord> mine = Mine(j.id);
  int up = 0;
  for (const auto& i : mine) up += i.registered_at > 0 ? 1 : 0;
  if (up != count) return;
  const std::string all = "all " + std::to_string(count) + " instances";
  if (!c_.health.enabled) return Transition(j, JobPhase::kDownloading, all + " registered");
  // A warm pool whose job just completed on it proved these instances together: no new checks.
  auto from = pool_from_.find(j.id);
  if (from != pool_from_.end() && j.attempt == 0) {
    const JobRecord* prev = Job(from->second);
    if (prev && prev->phase == JobPhase::kCompleted) {
      return Transition(j, JobPhase::kDownloading,
                        all + " of the warm pool of " + from->second + " ready; health checks skipped (" + from->second +
                            " completed on them)");
    }
  }
  DecideHealth(j, mine);
}

// Once every instance passed the round's checks: Downloading. An unhealthy instance is replaced
// (a backend that obtains instances) or the attempt fails as an infrastructure failure (joined
// instances; the bad one is kept out of the pool).
void SchedulerPass::DecideHealth(JobRecord& j, const std::vector<InstanceRecord>& mine) {
  auto recs_it = v_.health.find(j.id);
  const std::vector<HealthRecord> none;
  const std::vector<HealthRecord>& recs = recs_it == v_.health.end() ? none : recs_it->second;
  const int round = round_.count(j.id) ? round_[j.id] : 0;
  std::vector<InstanceRecord> bad;
  std::string what;
  double busbw = -1;
  for (const auto& i : mine) {
    const HealthRecord* got = nullptr;
    for (const auto& r : recs) {
      if (r.instance_id == i.id && r.result.value("round", -1) == round) got = &r;
    }
    if (!got) return;  // still checking
    if (!got->ok) {
      bad.push_back(i);
      what += (what.empty() ? "" : "; ") + std::string("instance ") + i.id + " (node " + std::to_string(i.node) +
              ") failed its health check: " + HealthFailures(got->result);
    }
    for (const auto& c : got->result.value("checks", json::array())) {
      if (c.value("name", std::string()) == "collective" && c.contains("busbw_gbps")) busbw = c["busbw_gbps"].get<double>();
    }
  }
  if (bad.empty()) {
    std::string m = "all " + std::to_string(CountOf(j)) + " instances registered and passed their health checks";
    if (busbw >= 0) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), " (allreduce bus bandwidth %.2f GB/s)", busbw);
      m += buf;
    }
    return Transition(j, JobPhase::kDownloading, m);
  }
  if (c_.backend_obtains && round + 1 <= c_.health.max_replacements) return ReplaceUnhealthy(j, bad, round, what);
  const std::string left =
      c_.backend_obtains ? " (no replacements left: " + std::to_string(c_.health.max_replacements) + ")" : "";
  FailOrRetry(j, ExitCause::kInfrastructure, what + left, 3, mine);
  for (InstanceRecord i : bad) {
    if (Obtained(i)) continue;
    i.state = InstanceState::kUnhealthy;  // out of the pool until its agent registers again
    i.job_id.clear();
    i.node = -1;
    Put(i);
  }
}

// The unhealthy instances are released and replaced, as one request, and the next round checks
// every instance again (the collective included).
void SchedulerPass::ReplaceUnhealthy(JobRecord& j, const std::vector<InstanceRecord>& bad, int round,
                                     const std::string& what) {
  act::Obtain gang{j.id, j.attempt, {}};
  std::string ids;
  for (const auto& i : bad) {
    Release({i});
    InstanceRecord n;
    n.id = j.id + "-a" + std::to_string(j.attempt) + "-n" + std::to_string(i.node) + "-h" + std::to_string(round + 1);
    n.job_id = j.id;
    n.node = i.node;
    n.instance_type = i.instance_type;
    n.slots = i.slots;
    n.state = InstanceState::kRequested;
    n.backend = c_.backend_name;
    Claim(n);
    gang.instances.push_back({n.id, n.instance_type, n.slots, "", ""});
    ids += (ids.empty() ? "" : ", ") + n.id;
  }
  d_.actions.push_back(std::move(gang));
  SetValue(HealthRoundKey(j.id, j.attempt), std::to_string(round + 1));
  round_[j.id] = round + 1;
  Transition(j, JobPhase::kStarting, what + "; replaced by " + ids + " before the start");
}

// Moves a started job on from its nodes' reports and heartbeats.
void SchedulerPass::Progress(JobRecord& j, const std::vector<InstanceRecord>& mine) {
  auto it = v_.reports.find(j.id);
  const std::vector<NodeReport> reports = it == v_.reports.end() ? std::vector<NodeReport>() : it->second;
  std::map<int, NodeReport> by_node;
  for (const auto& r : reports) by_node[r.node] = r;
  // A lost instance (agent gone, or its heartbeat) is an infrastructure failure.
  for (const auto& i : mine) {
    const bool done = by_node.count(i.node) && by_node[i.node].state == NodeState::kFinished;
    if (!done && Since(i.last_heartbeat) > c_.heartbeat_timeout_s && j.phase != JobPhase::kStopping) {
      return FailOrRetry(j, ExitCause::kInfrastructure,
                         "instance " + i.id + " (node " + std::to_string(i.node) + ", " + i.address +
                             ") lost: no heartbeat for " + std::to_string(static_cast<int>(Since(i.last_heartbeat))) + " s",
                         3, mine);
    }
  }
  if (j.phase == JobPhase::kStopping) return StoppingJob(j, reports, mine);
  if (FailedNode(j, reports, mine)) return;
  const int count = CountOf(j);
  int finished = 0, least = static_cast<int>(NodeState::kFinished);
  for (int n = 0; n < count; ++n) {
    auto r = by_node.find(n);
    const int s = r == by_node.end() ? -1 : static_cast<int>(r->second.state);
    least = std::min(least, s);
    finished += s == static_cast<int>(NodeState::kFinished) ? 1 : 0;
  }
  const double max_runtime = j.spec.max_runtime_s;
  if (max_runtime > 0 && j.started_at > 0 && now_ - j.started_at > max_runtime) {
    return Transition(j, JobPhase::kStopping, "max_runtime_s " + std::to_string(static_cast<int>(max_runtime)) + " reached", "",
                      -1, StopCause::kRuntime);
  }
  if (finished == count) {
    return Finish(j, JobPhase::kCompleted, "all " + std::to_string(count) + " instances finished with exit code 0", 0, mine);
  }
  // Forward only: the slowest node sets the phase (through Training on the way to Uploading, so the
  // history shows every phase).
  const JobPhase want = least <= 0 ? JobPhase::kDownloading : least == 1 ? JobPhase::kTraining : JobPhase::kUploading;
  if (static_cast<int>(want) <= static_cast<int>(j.phase) || !CanTransition(j.phase, want)) return;
  if (want == JobPhase::kUploading && j.phase == JobPhase::kDownloading) {
    Transition(j, JobPhase::kTraining, "every instance started its ranks");
  }
  Transition(j, want, want == JobPhase::kTraining ? "every instance started its ranks" : "every instance's ranks finished; uploading");
}

// A failed node ends the attempt: the node where the failure began decides its cause. A node that
// only saw another's failure waits for that one's report (or for every node's). True if it ended.
bool SchedulerPass::FailedNode(JobRecord& j, const std::vector<NodeReport>& reports, const std::vector<InstanceRecord>& mine) {
  std::map<int, NodeReport> by_node;
  for (const auto& r : reports) by_node[r.node] = r;
  const NodeReport* origin = nullptr;
  int failed = 0, finished_nodes = 0;
  for (const auto& [node, r] : by_node) {
    if (r.state != NodeState::kFinished) continue;
    ++finished_nodes;
    if (r.exit_code == 0) continue;
    ++failed;
    if (r.local && !origin) origin = &r;
  }
  if (failed == 0 || (!origin && finished_nodes != CountOf(j))) return false;
  const NodeReport& r = origin ? *origin : by_node.begin()->second;
  const ExitCause cause = origin ? ParseExitCause(r.cause) : ExitCause::kInfrastructure;
  std::string reason = "node " + std::to_string(r.node) + ": " + r.message;
  auto last = v_.last_lines.find({j.id, r.failed_rank});
  if (r.failed_rank >= 0 && last != v_.last_lines.end() && !last->second.empty()) {
    reason += "\nlast lines of rank " + std::to_string(r.failed_rank) + ":";
    for (const auto& x : last->second) reason += "\n  " + x;
  }
  FailOrRetry(j, cause, reason, r.exit_code, mine);
  return true;
}

// A Stopping job ends once every node either reported its end or is not running this attempt, or
// after the grace period and a margin.
void SchedulerPass::StoppingJob(JobRecord& j, const std::vector<NodeReport>& reports, const std::vector<InstanceRecord>& mine) {
  int quiet = 0;
  for (const auto& i : mine) {
    bool reported = false;
    for (const auto& r : reports) reported |= r.node == i.node && r.state == NodeState::kFinished;
    auto b = v_.busy.find(i.id);
    const bool idle = b != v_.busy.end() && b->second.at > j.updated_at &&
                      !(b->second.job == j.id && b->second.attempt == j.attempt);
    quiet += reported || idle ? 1 : 0;
  }
  const double grace = j.spec.grace_period_s;
  if (quiet != static_cast<int>(mine.size()) && now_ - j.updated_at <= grace + 3 * c_.heartbeat_s + 30) return;
  if (v_.requeued.count(j.id)) return Interrupt(j, "requeued by request; the ranks were stopped to save a checkpoint", mine);
  const bool runtime = v_.stopped_by_runtime.count(j.id) > 0;
  Finish(j, runtime ? JobPhase::kMaxRuntimeExceeded : JobPhase::kStopped,
         runtime ? "stopped: max_runtime_s reached" : "stopped by request", 1, mine);
}

// An attempt failed: retried on fresh instances when the cause allows and attempts remain
// (retry.max_attempts), otherwise the job fails with the cause first in its reason.
void SchedulerPass::FailOrRetry(JobRecord& j, ExitCause cause, const std::string& reason, int exit_code,
                                const std::vector<InstanceRecord>& mine) {
  if (cause == ExitCause::kInterrupted) return Interrupt(j, reason, mine);
  const int max_attempts = j.spec.max_attempts;
  const std::string what = std::string(ExitCauseName(cause)) + ": " + reason;
  // Interrupted attempts are not failures: they do not use up retry.max_attempts.
  const auto interrupted = v_.interruptions.find(j.id);
  const int failures = j.attempt - (interrupted == v_.interruptions.end() ? 0 : interrupted->second);
  if (IsRetryable(cause) && failures + 1 < max_attempts) {
    Transition(j, JobPhase::kRestarting,
               "attempt " + std::to_string(j.attempt) + " failed (" + what + "); restarting on fresh instances as attempt " +
                   std::to_string(j.attempt + 1) + " of " + std::to_string(max_attempts) +
                   ", resuming from the newest complete checkpoint");
    SetAttempt(j, j.attempt + 1);
    return Release(mine);
  }
  std::string final_reason = what;
  if (IsRetryable(cause) && max_attempts > 1) final_reason += "\n(no attempts left: retry.max_attempts " + std::to_string(max_attempts) + ")";
  Finish(j, JobPhase::kFailed, final_reason, exit_code, mine, cause != ExitCause::kInfrastructure);
}

// The cluster took the instances back (SIGTERM: pre-emption, a time limit) or a user asked for a
// requeue: the attempt ends Interrupted and the job is resumed as a new attempt from its newest
// checkpoint, whatever retry.max_attempts says (an interruption is no failure of the job).
void SchedulerPass::Interrupt(JobRecord& j, const std::string& reason, const std::vector<InstanceRecord>& mine) {
  Transition(j, JobPhase::kInterrupted, "attempt " + std::to_string(j.attempt) + " interrupted: " + reason);
  const auto it = v_.interruptions.find(j.id);
  const int count = (it == v_.interruptions.end() ? 0 : it->second) + 1;
  SetValue(InterruptionsKey(j.id), std::to_string(count));
  Transition(j, JobPhase::kRestarting,
             "resuming as attempt " + std::to_string(j.attempt + 1) + " from the newest complete checkpoint (interruption " +
                 std::to_string(count) + "; not counted against retry.max_attempts)");
  SetAttempt(j, j.attempt + 1);
  Release(mine);
}

// The job ended: its instances are released, or kept as a warm pool (resources.keep_alive_s)
// when keep_warm (not after an infrastructure failure) and they were obtained and are all alive.
void SchedulerPass::Finish(JobRecord& j, JobPhase to, const std::string& reason, int exit_code,
                           const std::vector<InstanceRecord>& mine, bool keep_warm) {
  if (to == JobPhase::kCompleted && j.phase == JobPhase::kDownloading) {
    Transition(j, JobPhase::kTraining, "every instance started its ranks");
  }
  Transition(j, to, reason, to == JobPhase::kFailed ? reason : "", exit_code);
  // A pool this job reused has now been handed on.
  auto from = pool_from_.find(j.id);
  JobRecord* old = from == pool_from_.end() ? nullptr : Job(from->second);
  if (old && old->warm_pool.is_object() && old->warm_pool.value("status", std::string()) == "InUse") {
    json wp = old->warm_pool;
    wp["status"] = "Reused";
    SetWarmPool(old->id, wp);
  }
  const double keep = j.spec.keep_alive_s;
  bool warm = keep_warm && keep > 0 && c_.backend_obtains && !mine.empty();
  for (const auto& i : mine) warm = warm && Obtained(i) && now_ - i.last_heartbeat < c_.heartbeat_timeout_s;
  if (!warm) return Release(mine);
  json ids = json::array();
  for (InstanceRecord r : mine) {
    r.state = InstanceState::kAvailable;
    r.pool_key = PoolKey(j.spec);
    r.keep_until = now_ + keep;
    ids.push_back(r.id);
    Put(r);
  }
  SetWarmPool(j.id, {{"status", "Available"}, {"keep_alive_s", keep}, {"expires_at", now_ + keep}, {"instances", ids}});
}

}  // namespace anneal
