// The scheduler pass's working state, its steps 1 and 3 (the queue, warm pools) and Decide
// (control/scheduler.h). Step 2, running jobs, is in scheduler_progress.cc.
#include "control/scheduler.h"

#include <algorithm>
#include <cstdio>

#include "control/scheduler_pass.h"

namespace anneal {

using nlohmann::json;

namespace {

int CountOf(const JobRecord& j) { return j.spec.instance_count; }
const std::string& TypeOf(const JobRecord& j) { return j.spec.instance_type; }
int SlotsOf(const JobRecord& j) { return j.spec.procs_per_instance; }
// "attempt 2: " before a restarted job's message.
std::string AttemptPrefix(const JobRecord& j) {
  return j.phase == JobPhase::kRestarting ? "attempt " + std::to_string(j.attempt) + ": " : "";
}

}  // namespace

std::string PoolKey(const JobSpec& spec) {
  return spec.instance_type + "|" + std::to_string(spec.instance_count) + "|" + std::to_string(spec.procs_per_instance) +
         "|" + spec.role;
}
std::string HealthRoundKey(const std::string& job, int attempt) { return "health_round:" + job + ":" + std::to_string(attempt); }
std::string InterruptionsKey(const std::string& job) { return "interruptions:" + job; }
std::string PoolFromKey(const std::string& job) { return "pool_from:" + job; }

SchedulerPass::SchedulerPass(const SchedulerConfig& c, const SchedulerView& v, double now)
    : c_(c), v_(v), now_(now), active_(v.active), pending_(v.pending), ended_(v.ended), insts_(v.instances),
      round_(v.health_round), pool_from_(v.pool_from) {}

// ---- Reads ----
JobRecord* SchedulerPass::Job(const std::string& id) {
  for (auto* list : {&active_, &pending_}) {
    for (JobRecord& j : *list) {
      if (j.id == id) return &j;
    }
  }
  auto it = ended_.find(id);
  return it == ended_.end() ? nullptr : &it->second;
}

std::vector<InstanceRecord> SchedulerPass::Mine(const std::string& job) const { return InstancesHolding(insts_, job); }

const InstanceRecord* SchedulerPass::Instance(const std::string& id) const {
  for (const auto& i : insts_) {
    if (i.id == id) return &i;
  }
  return nullptr;
}

bool SchedulerPass::Obtained(const InstanceRecord& i) { return i.backend != kJoinedBackend; }

double SchedulerPass::Since(double t) const { return now_ - std::max(t, v_.server_start); }

// ---- Writes ----
void SchedulerPass::Transition(JobRecord& j, JobPhase to, const std::string& message, const std::string& failure,
                               int exit_code, StopCause stop) {
  d_.actions.push_back(act::Transition{j.id, to, message, failure, exit_code, stop});
  j.phase = to;
  j.updated_at = now_;
  if (to == JobPhase::kStarting && j.started_at == 0) j.started_at = now_;
  if (IsTerminal(to)) j.ended_at = now_;
  if (!failure.empty()) j.failure_reason = failure;
  if (exit_code >= 0) j.exit_code = exit_code;
}

void SchedulerPass::SetAttempt(JobRecord& j, int attempt) {
  d_.actions.push_back(act::SetAttempt{j.id, attempt});
  j.attempt = attempt;
  j.updated_at = now_;
}

void SchedulerPass::Put(const InstanceRecord& r) {
  d_.actions.push_back(act::PutInstance{r});
  auto it = std::find_if(insts_.begin(), insts_.end(), [&](const auto& i) { return i.id == r.id; });
  if (it != insts_.end()) {
    *it = r;
    return;
  }
  insts_.push_back(r);
  std::sort(insts_.begin(), insts_.end(), [](const auto& a, const auto& b) {
    return a.registered_at != b.registered_at ? a.registered_at < b.registered_at : a.id < b.id;
  });
}

// A requested instance's record. An older record under its id (left by a crash, or anything the
// registration checks did not foresee) is forgotten first, with a message: never a move the store
// refuses, which would fail this pass and every pass after it.
void SchedulerPass::Claim(const InstanceRecord& r) {
  if (const InstanceRecord* old = Instance(r.id)) {
    std::fprintf(stderr, "anneal server: instance id %s was held by a %s record (%s): forgotten for the new request\n",
                 r.id.c_str(), InstanceStateName(old->state), old->backend.c_str());
    Forget(r.id);
  }
  Put(r);
}

void SchedulerPass::Forget(const std::string& id) {
  d_.actions.push_back(act::Forget{id});
  insts_.erase(std::remove_if(insts_.begin(), insts_.end(), [&](const auto& i) { return i.id == id; }), insts_.end());
}

void SchedulerPass::SetWarmPool(const std::string& job, const json& pool) {
  d_.actions.push_back(act::SetWarmPool{job, pool});
  if (JobRecord* j = Job(job)) j->warm_pool = pool;
}

void SchedulerPass::SetValue(const std::string& key, const std::string& value) {
  d_.actions.push_back(act::SetValue{key, value});
}

// ---- Step 1: instances gone, warm pools expired ----
void SchedulerPass::ForgetGone() {
  for (const std::string& gone : v_.gone) {
    const InstanceRecord* i = Instance(gone);
    if (i && i->state == InstanceState::kReleased) Forget(gone);
  }
  // Released instances whose agent went quiet (gone after a server restart, or another backend).
  const std::vector<InstanceRecord> all = insts_;
  for (const auto& i : all) {
    if (i.state == InstanceState::kReleased && Since(i.last_heartbeat) > 3 * c_.heartbeat_s + 5) Forget(i.id);
    // An operator's agent that joined and went away: its record (and token) do not stay forever.
    const bool idle = i.state == InstanceState::kIdle || i.state == InstanceState::kUnhealthy;
    if (!Obtained(i) && idle && i.job_id.empty() && Since(i.last_heartbeat) > c_.joined_forget_s) Forget(i.id);
  }
}

void SchedulerPass::ExpireWarmPools() {
  std::map<std::string, bool> expired;  // the job that left the pool -> an instance was lost
  for (const auto& i : insts_) {
    if (i.state != InstanceState::kAvailable) continue;
    if (i.keep_until < now_ || Since(i.last_heartbeat) > c_.heartbeat_timeout_s) {
      expired.emplace(i.job_id, i.keep_until >= now_);
    }
  }
  for (const auto& [from, lost] : expired) {
    // Every instance of the pool goes: a pool is reused whole.
    std::vector<InstanceRecord> all;
    for (const auto& i : insts_) {
      if (i.state == InstanceState::kAvailable && i.job_id == from) all.push_back(i);
    }
    EndWarmPool(from, all, "Terminated", lost ? "an instance of the pool was lost" : "keep_alive_s expired");
  }
}

void SchedulerPass::EndWarmPool(const std::string& from, const std::vector<InstanceRecord>& pool,
                                const std::string& status, const std::string& why) {
  Release(pool);
  JobRecord* old = Job(from);
  if (!old) return;
  json wp = old->warm_pool.is_object() ? old->warm_pool : json::object();
  wp["status"] = status;
  wp["ended_because"] = why;
  wp["ended_at"] = now_;
  SetWarmPool(from, wp);
}

// The job no longer needs these instances: obtained ones are released (their agents told to exit,
// the ranks get SIGTERM and the grace period), joined ones go back to the pool.
void SchedulerPass::Release(const std::vector<InstanceRecord>& mine) {
  for (InstanceRecord r : mine) {
    if (Obtained(r)) {
      r.state = InstanceState::kReleased;
      Put(r);
      d_.actions.push_back(act::Release{r.id});
    } else {
      r.state = InstanceState::kIdle;
      r.job_id.clear();
      r.node = -1;
      Put(r);
    }
  }
}

// ---- Step 3: the queue ----
// Restarting jobs first (they held instances a moment ago), then Pending ones, strictly first come,
// first served within the quotas: a job that does not fit holds the rest, unless only its user's or
// its type's limit holds it.
void SchedulerPass::PlaceQueue() {
  std::string blocker;
  for (JobRecord& j : active_) {
    if (j.phase == JobPhase::kRestarting && !Place(j)) {
      blocker = j.id;
      break;
    }
  }
  // Quotas count what the running jobs hold (placing a Restarting job changes its phase, not that).
  QuotaUsage usage;
  for (const JobRecord& j : active_) {
    if (!IsTerminal(j.phase)) usage.Add(j.owner, TypeOf(j), CountOf(j));
  }
  for (JobRecord& j : pending_) {
    const double max_pending = j.spec.max_pending_s;
    if (max_pending > 0 && now_ - j.created_at > max_pending) {
      Transition(j, JobPhase::kStopped,
                 "max_pending_s " + std::to_string(static_cast<int>(max_pending)) + " reached before instances were available",
                 "", 1);
      continue;
    }
    if (!blocker.empty()) {
      d_.pending_reasons[j.id] = "queued behind " + blocker + " (first come, first served)";
      continue;
    }
    auto limit = v_.user_limits.find(j.owner);
    const QuotaDemand demand{j.owner, TypeOf(j), CountOf(j), limit == v_.user_limits.end() ? -1 : limit->second};
    bool holds = false;
    const std::string over = QuotaBlock(c_.quota, usage, demand, &holds);
    if (!over.empty()) {
      d_.pending_reasons[j.id] = "waiting for the " + over;
      if (holds) blocker = j.id;
      continue;
    }
    if (!Place(j)) {
      d_.pending_reasons[j.id] = PendingWhy(j);
      blocker = j.id;
      continue;
    }
    usage.Add(demand.user, demand.type, demand.count);
  }
}

std::string SchedulerPass::PendingWhy(const JobRecord& j) const {
  if (c_.backend_obtains) {
    return "waiting for instances: the " + c_.backend_name + " backend runs at most " + std::to_string(c_.backend_capacity) +
           " at once";
  }
  return "waiting for " + std::to_string(CountOf(j)) + " idle joined instance(s) of type " + TypeOf(j) + " with " +
         std::to_string(SlotsOf(j)) + " slot(s)";
}

// Obtains or assigns instances for a queued job; false when they are not available yet.
bool SchedulerPass::Place(JobRecord& j) { return c_.backend_obtains ? Obtain(j) : AssignJoined(j); }

bool SchedulerPass::Obtain(JobRecord& j) {
  const int count = CountOf(j);
  // A warm pool of an ended job with the same instance type, count, slots and execution role.
  const std::string key = PoolKey(j.spec);
  std::map<std::string, std::vector<InstanceRecord>> pools;  // by the job that left it
  for (const auto& i : insts_) {
    if (i.state == InstanceState::kAvailable) pools[i.job_id].push_back(i);
  }
  for (const auto& [from, pool] : pools) {
    if (static_cast<int>(pool.size()) == count && pool[0].pool_key == key) {
      ReusePool(j, from, pool);
      return true;
    }
  }
  if (!MakeRoom(j.id, count)) return false;
  act::Obtain gang{j.id, j.attempt, {}};
  std::string ids;
  for (int n = 0; n < count; ++n) {
    InstanceRecord r;
    r.id = j.id + "-a" + std::to_string(j.attempt) + "-n" + std::to_string(n);
    r.job_id = j.id;
    r.node = n;
    r.instance_type = TypeOf(j);
    r.slots = SlotsOf(j);
    r.state = InstanceState::kRequested;
    r.backend = c_.backend_name;
    Claim(r);
    gang.instances.push_back({r.id, r.instance_type, r.slots, "", ""});
    ids += (n ? ", " : "") + r.id;
  }
  d_.actions.push_back(std::move(gang));
  Transition(j, JobPhase::kStarting,
             AttemptPrefix(j) + "obtaining " + std::to_string(count) + " instance(s) from the " + c_.backend_name +
                 " backend: " + ids);
  return true;
}

// Whether the backend has room for count more instances, after ending idle warm pools (the soonest
// to expire first) if that is what it takes; always, for a backend that queues gangs itself.
bool SchedulerPass::MakeRoom(const std::string& for_job, int count) {
  if (c_.backend_capacity < 0) return true;
  int used = 0, idle = 0;
  std::map<std::string, std::vector<InstanceRecord>> pools;
  for (const auto& i : insts_) {
    // Released agents are idle and about to exit: they no longer count.
    used += Obtained(i) && i.state != InstanceState::kReleased ? 1 : 0;
    if (i.state == InstanceState::kAvailable) {
      pools[i.job_id].push_back(i);
      ++idle;
    }
  }
  if (used + count <= c_.backend_capacity) return true;
  // An engine with its own queue takes the gang now (it waits there, with the engine's reason).
  if (used - idle + count > c_.backend_capacity) return c_.backend_queues;
  std::vector<std::pair<double, std::string>> order;
  for (const auto& [from, pool] : pools) order.push_back({pool[0].keep_until, from});
  std::sort(order.begin(), order.end());
  for (const auto& [until, from] : order) {
    if (used + count <= c_.backend_capacity) break;
    EndWarmPool(from, pools[from], "Terminated", "made room for " + for_job);
    used -= static_cast<int>(pools[from].size());
  }
  return true;
}

bool SchedulerPass::AssignJoined(JobRecord& j) {
  const int count = CountOf(j);
  const int slots = SlotsOf(j);
  std::vector<InstanceRecord> free;
  for (const auto& i : insts_) {
    if (!Obtained(i) && i.state == InstanceState::kIdle && i.job_id.empty() && i.instance_type == TypeOf(j) &&
        i.slots >= slots && now_ - i.last_heartbeat < c_.heartbeat_timeout_s) {
      free.push_back(i);
    }
  }
  if (static_cast<int>(free.size()) < count) return false;
  std::string ids;
  for (int n = 0; n < count; ++n) {
    InstanceRecord r = free[n];
    r.job_id = j.id;
    r.node = n;
    r.state = InstanceState::kAssigned;
    Put(r);
    ids += (n ? ", " : "") + r.id;
  }
  Transition(j, JobPhase::kStarting, AttemptPrefix(j) + "assigned " + std::to_string(count) + " joined instance(s): " + ids);
  return true;
}

// A queued job takes over the warm pool `from` left (its agents are registered and idle).
void SchedulerPass::ReusePool(JobRecord& j, const std::string& from, std::vector<InstanceRecord> pool) {
  std::sort(pool.begin(), pool.end(), [](const auto& a, const auto& b) { return a.node < b.node; });
  std::string ids;
  act::WakePool wake;
  for (size_t n = 0; n < pool.size(); ++n) {
    InstanceRecord r = pool[n];
    r.job_id = j.id;
    r.node = static_cast<int>(n);
    r.state = InstanceState::kAssigned;
    r.pool_key.clear();
    r.keep_until = 0;
    Put(r);
    ids += (n ? ", " : "") + r.id;
    wake.instances.push_back(r.id);
  }
  SetValue(PoolFromKey(j.id), from);
  pool_from_[j.id] = from;
  if (JobRecord* old = Job(from)) {
    json wp = old->warm_pool.is_object() ? old->warm_pool : json::object();
    wp["status"] = "InUse";
    wp["reused_by"] = j.id;
    SetWarmPool(from, wp);
  }
  Transition(j, JobPhase::kStarting, AttemptPrefix(j) + "reusing the warm pool of " + from + ": " + ids);
  // Only now wake the pool's held heartbeats: woken before the job is Starting, a heartbeat finds
  // nothing to do and its agent waits a whole heartbeat.
  d_.actions.push_back(std::move(wake));
}

// ---- The passes ----
Decision Decide(const SchedulerConfig& c, const SchedulerView& v, double now) {
  SchedulerPass p(c, v, now);
  p.ForgetGone();
  p.ExpireWarmPools();
  p.MoveRunningJobs();
  // After the running jobs, so instances a job just released are reused at once.
  p.PlaceQueue();
  return p.Take();
}

// Every instance a job holds is let go as a job that no longer needs it lets it go (obtained ones
// released, joined ones back to the pool), and every warm pool ends with its instances.
void SchedulerPass::Drain() {
  std::map<std::string, std::vector<InstanceRecord>> pools;
  std::vector<InstanceRecord> held;
  for (const auto& i : insts_) {
    if (i.state == InstanceState::kReleased) continue;
    if (i.state == InstanceState::kAvailable) {
      pools[i.job_id].push_back(i);
    } else if (Obtained(i) || !i.job_id.empty()) {
      held.push_back(i);
    }
  }
  Release(held);
  for (const auto& [from, pool] : pools) {
    EndWarmPool(from, pool, "Terminated", "the server ended (anneal submit --local releases every instance)");
  }
}

Decision DecideDrain(const SchedulerConfig& c, const SchedulerView& v, double now) {
  SchedulerPass p(c, v, now);
  p.Drain();
  return p.Take();
}

Decision DecideStart(const SchedulerConfig& c, const SchedulerView& v, const std::string& job, double now) {
  SchedulerPass p(c, v, now);
  if (JobRecord* j = p.Job(job)) p.StartIfReady(*j);
  return p.Take();
}

}  // namespace anneal
