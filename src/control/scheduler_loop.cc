#include "control/scheduler_loop.h"

#include <cstdio>
#include <filesystem>

#include "control/auth.h"
#include "control/health_rounds.h"
#include "core/clock.h"
#include "protocol/spool.h"

namespace anneal {

SchedulerLoop::SchedulerLoop(JobStore* store, InstanceProvider* backend, SchedulerConfig config, std::string server_url,
                             double server_start, double tick_s, Hooks hooks, Clock& clock)
    : store_(store), backend_(backend), c_(std::move(config)), url_(std::move(server_url)), server_start_(server_start),
      tick_s_(tick_s), hooks_(std::move(hooks)), clock_(clock) {}

void SchedulerLoop::Start() { thread_ = std::thread([this] { Run(); }); }

void SchedulerLoop::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopped_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SchedulerLoop::Wake() {
  {
    std::lock_guard<std::mutex> l(mu_);
    wake_ = true;
  }
  cv_.notify_all();
}

std::optional<std::string> SchedulerLoop::PendingReason(const std::string& job) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = reasons_.find(job);
  if (it == reasons_.end()) return std::nullopt;
  return it->second;
}

void SchedulerLoop::Run() {
  const auto tick = std::chrono::duration<double>(tick_s_);
  const auto gap = std::chrono::duration<double>(std::min(kPassGapS, tick_s_));
  std::unique_lock<std::mutex> l(mu_);
  while (!stopped_) {
    wake_ = false;
    l.unlock();
    const double t0 = MonotonicSeconds();
    Status st = Pass();
    pass_seconds_.Observe(MonotonicSeconds() - t0);
    if (!st.ok()) std::fprintf(stderr, "anneal server: scheduler: %s\n", st.ToString().c_str());
    if (hooks_.after_pass) hooks_.after_pass();
    l.lock();
    // An event brings the next pass forward, but passes stay kPassGapS apart (see the header). A
    // lone event finds the loop past the gap and is served at once.
    if (cv_.wait_for(l, gap, [&] { return stopped_; })) break;
    cv_.wait_for(l, tick - gap, [&] { return stopped_ || wake_; });
  }
}

Status SchedulerLoop::Pass() {
  std::lock_guard<std::mutex> w(writers_);
  ProvisionReport report = backend_->Poll();
  DeliverSpools(report.gone_dirs);
  ANNEAL_ASSIGN_OR_RETURN(SchedulerView v, ReadView());
  const double now = clock_.Wall();
  v.gone = std::move(report.gone);
  v.instance_pending = std::move(report.pending);
  NotePending(v, now);
  Decision d = Decide(c_, v, now);
  Status st = Apply(d, now);
  std::lock_guard<std::mutex> l(mu_);
  reasons_.swap(d.pending_reasons);
  return st;
}

// The folders of gone agents (the local backend's): what their spools still hold is stored like any
// agent's post (the store drops each (job, attempt, node, seq) it has), then the folder goes: an
// agent that ended by itself left only an undelivered spool in it, a killed one everything.
void SchedulerLoop::DeliverSpools(const std::map<std::string, std::string>& gone_dirs) {
  for (const auto& [id, dir] : gone_dirs) {
    for (const auto& [job, recs] : ReadSpool(dir)) {
      Status st = store_->AppendLogs(job, recs.lines);
      if (st.ok()) st = store_->AppendMetrics(job, recs.points);
      if (!st.ok()) std::fprintf(stderr, "anneal server: the spool of %s (%s): %s\n", id.c_str(), job.c_str(), st.ToString().c_str());
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
}

// The last moment each job's instances were seen pending (kept across passes: a restarted server
// starts counting again, which only lengthens the allowance).
void SchedulerLoop::NotePending(SchedulerView& v, double now) {
  for (const auto& i : v.instances) {
    if (v.instance_pending.count(i.id)) pending_until_[i.job_id] = now;
  }
  for (auto it = pending_until_.begin(); it != pending_until_.end();) {
    bool active = false;
    for (const auto& j : v.active) active |= j.id == it->first;
    it = active ? std::next(it) : pending_until_.erase(it);
  }
  v.pending_until = pending_until_;
}

Status SchedulerLoop::StartIfReady(const std::string& job) {
  std::lock_guard<std::mutex> w(writers_);
  ANNEAL_ASSIGN_OR_RETURN(std::optional<JobRecord> j, store_->GetJob(job));
  if (!j || j->phase != JobPhase::kStarting) return Status::Ok();
  SchedulerView v;
  v.server_start = server_start_;
  v.active.push_back(*j);
  v.pending_until = pending_until_;
  ANNEAL_ASSIGN_OR_RETURN(v.instances, store_->Instances());
  ANNEAL_RETURN_IF_ERROR(ReadJob(*j, &v));
  const double now = clock_.Wall();
  return Apply(DecideStart(c_, v, job, now), now);
}

Status SchedulerLoop::Drain() {
  std::lock_guard<std::mutex> w(writers_);
  ANNEAL_ASSIGN_OR_RETURN(SchedulerView v, ReadView());
  const double now = clock_.Wall();
  return Apply(DecideDrain(c_, v, now), now);
}

Result<SchedulerView> SchedulerLoop::ReadView() {
  SchedulerView v;
  v.server_start = server_start_;
  ANNEAL_ASSIGN_OR_RETURN(v.instances, store_->Instances());
  ANNEAL_ASSIGN_OR_RETURN(v.active, store_->ActiveJobs());
  // Only user and type limits let a job be passed by later ones; without them the head of the
  // queue decides, and 16 jobs are plenty to read.
  ANNEAL_ASSIGN_OR_RETURN(auto users, store_->Users());
  bool skips = c_.quota.user_max_instances > 0 || !c_.quota.instance_type_max.empty();
  for (const auto& u : users) {
    v.user_limits[u.name] = u.max_instances;
    skips = skips || u.max_instances > 0;
  }
  ANNEAL_ASSIGN_OR_RETURN(v.pending, store_->PendingJobs(skips ? 64 : 16));
  for (const JobRecord& j : v.active) ANNEAL_RETURN_IF_ERROR(ReadJob(j, &v));
  // The jobs whose warm pools this pass may reuse or end.
  for (const auto& i : v.instances) {
    if (i.state == InstanceState::kAvailable) ANNEAL_RETURN_IF_ERROR(ReadEnded(i.job_id, &v));
  }
  if (hooks_.busy) v.busy = hooks_.busy();
  return v;
}

Status SchedulerLoop::ReadJob(const JobRecord& j, SchedulerView* v) {
  ANNEAL_ASSIGN_OR_RETURN(auto from, store_->GetValue(PoolFromKey(j.id)));
  if (from) v->pool_from[j.id] = *from;
  if (from) ANNEAL_RETURN_IF_ERROR(ReadEnded(*from, v));
  ANNEAL_ASSIGN_OR_RETURN(auto interrupted, store_->GetValue(InterruptionsKey(j.id)));
  if (interrupted) v->interruptions[j.id] = std::stoi(*interrupted);
  if (j.phase == JobPhase::kStarting) {
    ANNEAL_ASSIGN_OR_RETURN(v->health[j.id], store_->Health(j.id, j.attempt));
    ANNEAL_ASSIGN_OR_RETURN(v->health_round[j.id], CurrentHealthRound(*store_, j.id, j.attempt));
    return Status::Ok();
  }
  ANNEAL_ASSIGN_OR_RETURN(auto reps, store_->NodeReports(j.id, j.attempt));
  for (const auto& r : reps) {
    if (r.state != NodeState::kFinished || r.exit_code == 0 || r.failed_rank < 0) continue;
    ANNEAL_ASSIGN_OR_RETURN(auto last, store_->LastLogs(j.id, r.failed_rank, 10));
    auto& lines = v->last_lines[{j.id, r.failed_rank}];
    for (const auto& x : last) lines.push_back(x.text);
  }
  v->reports[j.id] = std::move(reps);
  if (j.phase == JobPhase::kStopping) {
    ANNEAL_ASSIGN_OR_RETURN(auto hist, store_->History(j.id));
    const StopCause why = hist.empty() ? StopCause::kNone : hist.back().stop;
    if (why == StopCause::kRuntime) v->stopped_by_runtime.insert(j.id);
    if (why == StopCause::kRequeue) v->requeued.insert(j.id);
  }
  return Status::Ok();
}

Status SchedulerLoop::ReadEnded(const std::string& job, SchedulerView* v) {
  if (v->ended.count(job)) return Status::Ok();
  ANNEAL_ASSIGN_OR_RETURN(auto j, store_->GetJob(job));
  if (j) v->ended[job] = *j;
  return Status::Ok();
}

Status SchedulerLoop::Apply(const Decision& d, double now) {
  for (const Action& a : d.actions) ANNEAL_RETURN_IF_ERROR(ApplyOne(a, now));
  return Status::Ok();
}

Status SchedulerLoop::ApplyOne(const Action& a, double now) {
  if (auto* t = std::get_if<act::Transition>(&a)) return store_->Transition(t->job, t->to, t->message, now, t->failure_reason, t->exit_code, t->stop);
  if (auto* s = std::get_if<act::SetAttempt>(&a)) return store_->SetAttempt(s->job, s->attempt, now);
  if (auto* p = std::get_if<act::PutInstance>(&a)) return store_->PutInstance(p->instance);
  if (auto* o = std::get_if<act::Obtain>(&a)) {
    GangRequest g{o->job, o->attempt, o->instances};
    for (InstanceRequest& r : g.instances) {
      r.server_url = url_;
      // Its one-time registration secret (control/auth.h "register"): only this agent can join as r.id.
      ANNEAL_RETURN_IF_ERROR(store_->DeleteTokensOf(r.id, "register"));
      ANNEAL_ASSIGN_OR_RETURN(r.secret, IssueToken(store_, r.id, "register", "registers requested instance " + r.id + " once", now));
    }
    return backend_->Obtain(g);
  }
  if (auto* r = std::get_if<act::Release>(&a)) {
    backend_->Release(r->instance);
    return Status::Ok();
  }
  if (auto* f = std::get_if<act::Forget>(&a)) {
    ANNEAL_RETURN_IF_ERROR(store_->DeleteTokensOf(f->instance, "agent"));
    ANNEAL_RETURN_IF_ERROR(store_->DeleteTokensOf(f->instance, "register"));
    return store_->DeleteInstance(f->instance);
  }
  if (auto* w = std::get_if<act::SetWarmPool>(&a)) return store_->SetWarmPool(w->job, w->pool);
  if (auto* v = std::get_if<act::SetValue>(&a)) return store_->SetValue(v->key, v->value);
  if (auto* p = std::get_if<act::WakePool>(&a)) {
    if (hooks_.wake_pool) hooks_.wake_pool(p->instances);
    return Status::Ok();
  }
  return Internal("an action the scheduler loop does not know");
}

}  // namespace anneal
