// The pure scheduler (control/scheduler.h): hand-made views at times from a SimulatedClock, no
// store, no HTTP, no sleeping. Each test reads the decision's actions: the queue's order within
// quotas, warm pools reused whole, giving way and expiring, max_pending_s, retries after an
// infrastructure failure, health replacement rounds, progress and stops.
#include <gtest/gtest.h>

#include "protocol/job_definition.h"
#include "control/scheduler.h"
#include "core/clock.h"

namespace anneal {
namespace {

using nlohmann::json;

struct JobOpts {
  int count = 1;
  std::string owner = "alice", type = "local";
  double keep_alive_s = 0, max_pending_s = 0;
  int max_attempts = 1;
};

JobRecord MakeJob(const std::string& id, int64_t seq, JobPhase phase, double created, const JobOpts& o = {}) {
  JobSpec s;
  s.name = "j";
  s.command = {"true"};
  s.instance_count = o.count;
  s.instance_type = o.type;
  s.keep_alive_s = o.keep_alive_s;
  s.max_pending_s = o.max_pending_s;
  s.max_attempts = o.max_attempts;
  JobRecord j;
  j.id = id;
  j.seq = seq;
  j.owner = o.owner;
  j.spec = s;
  j.phase = phase;
  j.created_at = j.updated_at = created;
  if (phase != JobPhase::kPending) j.started_at = created;
  return j;
}

InstanceRecord MakeInstance(const std::string& id, const std::string& job, int node, InstanceState state, double heartbeat,
                            const std::string& backend = "local") {
  InstanceRecord i;
  i.id = id;
  i.job_id = job;
  i.node = node;
  i.instance_type = "local";
  i.state = state;
  i.backend = backend;
  i.address = "127.0.0.1";
  i.registered_at = heartbeat > 0 ? heartbeat : 0;
  i.last_heartbeat = heartbeat;
  return i;
}

// Job "job" in `phase` since t0 on two assigned instances that last heartbeated at `heartbeat`.
SchedulerView TwoNodeJob(JobPhase phase, double t0, const JobOpts& o, double heartbeat) {
  SchedulerView v;
  v.server_start = t0;
  v.active = {MakeJob("job", 1, phase, t0, o)};
  v.instances = {MakeInstance("job-a0-n0", "job", 0, InstanceState::kAssigned, heartbeat),
                 MakeInstance("job-a0-n1", "job", 1, InstanceState::kAssigned, heartbeat)};
  return v;
}

SchedulerConfig Local(int capacity = 4) {
  SchedulerConfig c;
  c.backend_obtains = true;
  c.backend_capacity = capacity;
  c.backend_name = "local";
  c.health.enabled = false;
  c.instances_dir = "/data/instances";
  return c;
}

template <typename T>
std::vector<T> All(const Decision& d) {
  std::vector<T> out;
  for (const Action& a : d.actions) {
    if (auto* x = std::get_if<T>(&a)) out.push_back(*x);
  }
  return out;
}

// "job Phase: message" for each transition, in order.
std::vector<std::string> Moves(const Decision& d) {
  std::vector<std::string> out;
  for (const auto& t : All<act::Transition>(d)) out.push_back(t.job + " " + PhaseName(t.to) + ": " + t.message);
  return out;
}

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
std::string ReasonOf(const Decision& d, const std::string& job) {
  return d.pending_reasons.count(job) ? d.pending_reasons.at(job) : "(none)";
}

TEST(Scheduler, FirstComeFirstServedHoldsTheQueueBehindAJobThatDoesNotFit) {
  SimulatedClock clock;
  const double t0 = clock.Wall();
  SchedulerView v;
  v.server_start = t0;
  v.pending = {MakeJob("a", 1, JobPhase::kPending, t0, {.count = 3}), MakeJob("b", 2, JobPhase::kPending, t0, {.count = 2}),
               MakeJob("c", 3, JobPhase::kPending, t0, {.count = 1})};
  const Decision d = Decide(Local(4), v, clock.Wall());
  ASSERT_EQ(Moves(d), std::vector<std::string>{"a Starting: obtaining 3 instance(s) from the local backend: a-a0-n0, a-a0-n1, a-a0-n2"});
  const auto gangs = All<act::Obtain>(d);
  ASSERT_EQ(gangs.size(), 1u);  // one gang request for the job's three instances
  EXPECT_EQ(gangs[0].instances.size(), 3u);
  EXPECT_EQ(d.pending_reasons.at("b"), "waiting for instances: the local backend runs at most 4 at once");
  // c would fit (3 + 1 <= 4) but b came first.
  EXPECT_EQ(d.pending_reasons.at("c"), "queued behind b (first come, first served)");
}

// A record left under an id the scheduler is about to request (a crash, an agent that joined under it
// before the registration checks refused that) is forgotten first: the store would refuse the move
// from its state, failing this pass and every one after it.
TEST(Scheduler, AStaleRecordUnderARequestedIdIsForgottenBeforeThePut) {
  SimulatedClock clock;
  const double t0 = clock.Wall();
  SchedulerView v;
  v.server_start = t0;
  v.pending = {MakeJob("c", 1, JobPhase::kPending, t0)};
  v.instances = {MakeInstance("c-a0-n0", "", -1, InstanceState::kIdle, t0, "static")};
  const Decision d = Decide(Local(4), v, clock.Wall());
  ASSERT_EQ(Moves(d), std::vector<std::string>{"c Starting: obtaining 1 instance(s) from the local backend: c-a0-n0"});
  int forget_at = -1, put_at = -1;
  for (size_t i = 0; i < d.actions.size(); ++i) {
    if (auto* f = std::get_if<act::Forget>(&d.actions[i]); f && f->instance == "c-a0-n0" && forget_at < 0) forget_at = static_cast<int>(i);
    if (auto* p = std::get_if<act::PutInstance>(&d.actions[i]); p && p->instance.id == "c-a0-n0" && put_at < 0) {
      put_at = static_cast<int>(i);
      EXPECT_EQ(p->instance.backend, "local");
      EXPECT_EQ(p->instance.job_id, "c");
    }
  }
  ASSERT_GE(forget_at, 0) << "the stale record was not forgotten";
  ASSERT_GE(put_at, 0) << "the requested instance was not put";
  EXPECT_LT(forget_at, put_at);
}

// A cluster engine with its own queue (Slurm): a gang beyond the capacity in use is requested anyway,
// and waits in the engine's queue; a job that can never fit is still refused at submit (job_routes).
TEST(Scheduler, ABackendThatQueuesGetsGangsBeyondTheCapacityInUse) {
  SimulatedClock clock;
  const double t0 = clock.Wall();
  SchedulerView v;
  v.server_start = t0;
  v.active = {MakeJob("a", 1, JobPhase::kTraining, t0, {.count = 2})};
  v.instances = {MakeInstance("a-a0-n0", "a", 0, InstanceState::kAssigned, t0),
                 MakeInstance("a-a0-n1", "a", 1, InstanceState::kAssigned, t0)};
  v.pending = {MakeJob("b", 2, JobPhase::kPending, t0, {.count = 2})};
  SchedulerConfig c = Local(2);
  EXPECT_EQ(ReasonOf(Decide(c, v, t0), "b"), "waiting for instances: the local backend runs at most 2 at once");
  c.backend_queues = true;
  c.backend_name = "slurm";
  const Decision d = Decide(c, v, t0);
  ASSERT_EQ(All<act::Obtain>(d).size(), 1u);
  EXPECT_EQ(All<act::Obtain>(d)[0].job, "b");
  EXPECT_FALSE(d.pending_reasons.count("b"));
}

TEST(Scheduler, AJobHeldByItsUsersQuotaLetsLaterJobsPass) {
  SimulatedClock clock;
  const double t0 = clock.Wall();
  SchedulerConfig c = Local(8);
  c.quota.user_max_instances = 2;
  SchedulerView v;
  v.server_start = t0;
  v.active = {MakeJob("run", 1, JobPhase::kTraining, t0, {.count = 2})};
  v.instances = {MakeInstance("run-a0-n0", "run", 0, InstanceState::kAssigned, t0),
                 MakeInstance("run-a0-n1", "run", 1, InstanceState::kAssigned, t0)};
  v.pending = {MakeJob("mine", 2, JobPhase::kPending, t0), MakeJob("bobs", 3, JobPhase::kPending, t0, {.owner = "bob"})};
  Decision d = Decide(c, v, t0 + 1);
  EXPECT_EQ(d.pending_reasons.at("mine"),
            "waiting for the quota of user alice: 2 of 2 instances in use, the job needs 1");
  ASSERT_EQ(Moves(d).size(), 1u);
  EXPECT_TRUE(Contains(Moves(d)[0], "bobs Starting: obtaining 1 instance(s)")) << Moves(d)[0];
  // The overall limit holds the queue instead.
  c.quota = {};
  c.quota.max_running_instances = 2;
  d = Decide(c, v, t0 + 1);
  EXPECT_TRUE(Moves(d).empty());
  EXPECT_EQ(d.pending_reasons.at("bobs"), "queued behind mine (first come, first served)");
}

TEST(Scheduler, MaxPendingStopsAJobThatWaitedTooLong) {
  SimulatedClock clock;
  const double t0 = clock.Wall();
  SchedulerView v;
  v.server_start = t0;
  v.pending = {MakeJob("big", 1, JobPhase::kPending, t0, {.count = 9, .max_pending_s = 50})};
  EXPECT_TRUE(Moves(Decide(Local(4), v, t0 + 49)).empty());
  clock.Advance(51);
  const Decision d = Decide(Local(4), v, clock.Wall());
  ASSERT_EQ(Moves(d), std::vector<std::string>{"big Stopped: max_pending_s 50 reached before instances were available"});
  EXPECT_EQ(All<act::Transition>(d)[0].exit_code, 1);
}

// An ended job's warm pool of two available instances.
void AddPool(SchedulerView* v, const std::string& from, double heartbeat, double keep_until, const JobOpts& o) {
  JobRecord e = MakeJob(from, 0, JobPhase::kCompleted, heartbeat - 10, o);
  e.warm_pool = {{"status", "Available"}};
  v->ended[from] = e;
  for (int n = 0; n < o.count; ++n) {
    InstanceRecord i = MakeInstance(from + "-a0-n" + std::to_string(n), from, n, InstanceState::kAvailable, heartbeat);
    i.pool_key = PoolKey(e.spec);
    i.keep_until = keep_until;
    v->instances.push_back(i);
  }
}

TEST(Scheduler, AWarmPoolIsReusedWholeByAMatchingJob) {
  SimulatedClock clock;
  const double t0 = clock.Wall();
  SchedulerView v;
  v.server_start = t0;
  AddPool(&v, "old", t0, t0 + 60, {.count = 2, .keep_alive_s = 60});
  v.pending = {MakeJob("new", 1, JobPhase::kPending, t0, {.count = 2})};
  const Decision d = Decide(Local(4), v, t0 + 1);
  EXPECT_EQ(Moves(d), std::vector<std::string>{"new Starting: reusing the warm pool of old: old-a0-n0, old-a0-n1"});
  EXPECT_TRUE(All<act::Obtain>(d).empty());
  for (const auto& p : All<act::PutInstance>(d)) {
    EXPECT_EQ(p.instance.job_id, "new");
    EXPECT_EQ(p.instance.state, InstanceState::kAssigned);
  }
  ASSERT_EQ(All<act::SetWarmPool>(d).size(), 1u);
  EXPECT_EQ(All<act::SetWarmPool>(d)[0].pool["status"], "InUse");
  EXPECT_EQ(All<act::SetValue>(d)[0].key, PoolFromKey("new"));
  // The pool's agents are woken after the job is Starting.
  EXPECT_TRUE(std::holds_alternative<act::WakePool>(d.actions.back()));
}

TEST(Scheduler, AnIdleWarmPoolGivesWayToAJobThatDoesNotMatchIt) {
  SimulatedClock clock;
  const double t0 = clock.Wall();
  SchedulerView v;
  v.server_start = t0;
  AddPool(&v, "old", t0, t0 + 60, {.count = 2, .keep_alive_s = 60});
  v.pending = {MakeJob("wide", 1, JobPhase::kPending, t0, {.count = 3})};
  const Decision d = Decide(Local(4), v, t0 + 1);  // 2 pooled + 3 > 4: the pool goes
  ASSERT_EQ(All<act::Release>(d).size(), 2u);
  ASSERT_EQ(All<act::SetWarmPool>(d).size(), 1u);
  EXPECT_EQ(All<act::SetWarmPool>(d)[0].pool["status"], "Terminated");
  EXPECT_EQ(All<act::SetWarmPool>(d)[0].pool["ended_because"], "made room for wide");
  ASSERT_EQ(All<act::Obtain>(d).size(), 1u);
  EXPECT_EQ(All<act::Obtain>(d)[0].instances.size(), 3u);
  // With room for both, the pool stays.
  const Decision roomy = Decide(Local(5), v, t0 + 1);
  EXPECT_TRUE(All<act::Release>(roomy).empty());
  EXPECT_EQ(All<act::Obtain>(roomy).size(), 1u);
}

TEST(Scheduler, AWarmPoolEndsWhenItsKeepAliveExpiresOrAnInstanceIsLost) {
  SimulatedClock clock;
  const double t0 = clock.Wall();
  SchedulerView v;
  v.server_start = t0;
  AddPool(&v, "old", t0, t0 + 60, {.count = 2, .keep_alive_s = 60});
  EXPECT_TRUE(Decide(Local(), v, t0 + 10).actions.empty());
  Decision d = Decide(Local(), v, t0 + 61);
  ASSERT_EQ(All<act::SetWarmPool>(d).size(), 1u);
  EXPECT_EQ(All<act::SetWarmPool>(d)[0].pool["ended_because"], "keep_alive_s expired");
  EXPECT_EQ(All<act::Release>(d).size(), 2u);
  v.server_start = t0 - 100;
  v.instances[1].last_heartbeat = t0 - 40;  // silent past heartbeat_timeout_s (30), within keep-alive
  d = Decide(Local(), v, t0 + 10);
  ASSERT_EQ(All<act::SetWarmPool>(d).size(), 1u);
  EXPECT_EQ(All<act::SetWarmPool>(d)[0].pool["ended_because"], "an instance of the pool was lost");
}

// A Training job "run" of two instances whose node 1 went silent at t0.
SchedulerView LostInstance(double t0, int max_attempts) {
  SchedulerView v;
  v.server_start = t0 - 100;
  v.active = {MakeJob("run", 1, JobPhase::kTraining, t0 - 50, {.count = 2, .max_attempts = max_attempts})};
  v.instances = {MakeInstance("run-a0-n0", "run", 0, InstanceState::kAssigned, t0 + 30),
                 MakeInstance("run-a0-n1", "run", 1, InstanceState::kAssigned, t0)};
  return v;
}

TEST(Scheduler, ALostInstanceRestartsTheJobOnFreshInstancesWhileAttemptsRemain) {
  SimulatedClock clock;
  const double t0 = clock.Wall();
  const SchedulerView v = LostInstance(t0, 2);
  EXPECT_TRUE(Decide(Local(), v, t0 + 30).actions.empty());  // silent for exactly the timeout: not yet
  const Decision d = Decide(Local(), v, t0 + 31);
  const auto moves = Moves(d);
  ASSERT_EQ(moves.size(), 2u);
  EXPECT_TRUE(Contains(moves[0], "run Restarting: attempt 0 failed (infrastructure: instance run-a0-n1 (node 1, 127.0.0.1) "
                                 "lost: no heartbeat for 31 s); restarting on fresh instances as attempt 1 of 2"))
      << moves[0];
  // Released, and in the same pass placed again, first in the queue, as attempt 1.
  EXPECT_EQ(All<act::Release>(d).size(), 2u);
  EXPECT_EQ(All<act::SetAttempt>(d)[0].attempt, 1);
  EXPECT_EQ(moves[1], "run Starting: attempt 1: obtaining 2 instance(s) from the local backend: run-a1-n0, run-a1-n1");
}

// Found by the chaos soak: an instance that registered and then went silent during the pre-start
// health round held its job for the whole start timeout (here 60 + 60 + 60 s); it is lost after the
// heartbeat timeout as in a started job.
TEST(Scheduler, AnInstanceSilentDuringTheHealthRoundIsLostAfterTheHeartbeatTimeout) {
  SimulatedClock clock;
  const double t0 = clock.Wall();
  SchedulerView v = LostInstance(t0, 2);
  v.active[0].phase = JobPhase::kStarting;
  v.active[0].updated_at = t0 - 5;
  SchedulerConfig c = Local();
  c.health.enabled = true;
  EXPECT_TRUE(Moves(Decide(c, v, t0 + 30)).empty());  // silent for exactly the timeout: not yet
  const auto moves = Moves(Decide(c, v, t0 + 31));
  ASSERT_FALSE(moves.empty());
  EXPECT_TRUE(Contains(moves[0], "run Restarting: attempt 0 failed (infrastructure: instance run-a0-n1 (127.0.0.1) lost "
                                 "before the start: no heartbeat for 31 s)"))
      << moves[0];
}

TEST(Scheduler, ALostInstanceFailsTheJobWithNoAttemptsLeft) {
  SimulatedClock clock;
  const double t0 = clock.Wall();
  const Decision d = Decide(Local(), LostInstance(t0, 1), t0 + 31);
  ASSERT_EQ(All<act::Transition>(d).size(), 1u);
  const auto t = All<act::Transition>(d)[0];
  EXPECT_EQ(t.to, JobPhase::kFailed);
  EXPECT_EQ(t.exit_code, 3);
  EXPECT_TRUE(Contains(t.failure_reason, "infrastructure: instance run-a0-n1")) << t.failure_reason;
  EXPECT_EQ(All<act::Release>(d).size(), 2u);
}

// A Starting job of two registered instances, each with a health result for round `round`.
SchedulerView Checked(double t0, int round, bool node1_ok, const std::string& backend = "local") {
  SchedulerView v;
  v.server_start = t0 - 100;
  v.active = {MakeJob("job", 1, JobPhase::kStarting, t0, {.count = 2})};
  for (int n = 0; n < 2; ++n) {
    v.instances.push_back(MakeInstance("job-a0-n" + std::to_string(n), "job", n, InstanceState::kAssigned, t0, backend));
    HealthRecord h;
    h.instance_id = v.instances.back().id;
    h.node = n;
    h.ok = n == 0 || node1_ok;
    h.result = {{"round", round}, {"checks", json::array({{{"name", "disk"}, {"ok", h.ok}, {"detail", "0.1 GB free"}}})}};
    v.health["job"].push_back(h);
  }
  v.health_round["job"] = round;
  return v;
}

TEST(Scheduler, AnUnhealthyInstanceIsReplacedUntilNoReplacementsAreLeft) {
  SimulatedClock clock;
  const double t0 = clock.Wall();
  SchedulerConfig c = Local();
  c.health.enabled = true;
  c.health.max_replacements = 3;
  EXPECT_EQ(Moves(Decide(c, Checked(t0, 0, true), t0 + 1)),
            std::vector<std::string>{"job Downloading: all 2 instances registered and passed their health checks"});
  Decision d = Decide(c, Checked(t0, 0, false), t0 + 1);
  ASSERT_EQ(Moves(d).size(), 1u);
  EXPECT_EQ(Moves(d)[0],
            "job Starting: instance job-a0-n1 (node 1) failed its health check: disk: 0.1 GB free; replaced by job-a0-n1-h1 "
            "before the start");
  ASSERT_EQ(All<act::Obtain>(d).size(), 1u);
  EXPECT_EQ(All<act::Obtain>(d)[0].instances[0].id, "job-a0-n1-h1");
  EXPECT_EQ(All<act::Release>(d)[0].instance, "job-a0-n1");
  EXPECT_EQ(All<act::SetValue>(d)[0].key, HealthRoundKey("job", 0));
  EXPECT_EQ(All<act::SetValue>(d)[0].value, "1");
  // Round 3 failing: no replacements left; the attempt fails as an infrastructure failure.
  d = Decide(c, Checked(t0, 3, false), t0 + 1);
  ASSERT_EQ(All<act::Transition>(d).size(), 1u);
  EXPECT_EQ(All<act::Transition>(d)[0].to, JobPhase::kFailed);
  EXPECT_TRUE(Contains(All<act::Transition>(d)[0].message, "(no replacements left: 3)"));
  // Joined instances are not replaced: the bad one leaves the pool (unhealthy), the good one returns.
  SchedulerConfig joined = c;
  joined.backend_obtains = false;
  joined.backend_capacity = -1;
  joined.backend_name = "static";
  d = Decide(joined, Checked(t0, 0, false, "static"), t0 + 1);
  EXPECT_EQ(All<act::Transition>(d)[0].to, JobPhase::kFailed);
  const auto puts = All<act::PutInstance>(d);
  ASSERT_FALSE(puts.empty());
  EXPECT_EQ(puts.back().instance.id, "job-a0-n1");
  EXPECT_EQ(puts.back().instance.state, InstanceState::kUnhealthy);
}

// Job "job" Starting since t0: node 0 registered at t0, node 1 requested and never registered.
SchedulerView HalfRegistered(double t0) {
  SchedulerView v;
  v.server_start = t0;
  v.active = {MakeJob("job", 1, JobPhase::kStarting, t0, {.count = 2})};
  v.instances = {MakeInstance("job-a0-n0", "job", 0, InstanceState::kAssigned, t0),
                 MakeInstance("job-a0-n1", "job", 1, InstanceState::kRequested, 0)};
  v.instances[0].last_heartbeat = t0 + 521;  // node 0 keeps heartbeating through every moment the tests look at
  return v;
}

TEST(Scheduler, InstancesThatNeverRegisterTimeOutTheStart) {
  SimulatedClock clock;
  const double t0 = clock.Wall();
  SchedulerView v = HalfRegistered(t0);
  EXPECT_TRUE(Decide(Local(), v, t0 + 120).actions.empty());
  const Decision d = Decide(Local(), v, t0 + 121);
  ASSERT_EQ(All<act::Transition>(d).size(), 1u);
  EXPECT_EQ(All<act::Transition>(d)[0].failure_reason,
            "infrastructure: only 1 of 2 instances registered within 120 s (see the agents' logs under /data/instances)");
}

TEST(Scheduler, AnInstanceTheBackendHasNotStartedGivesTheReasonAndStopsTheStartClock) {
  SimulatedClock clock;
  const double t0 = clock.Wall();
  SchedulerView v = HalfRegistered(t0);
  v.instance_pending["job-a0-n1"] = "Resources";
  Decision d = Decide(Local(), v, t0 + 500);  // far past the start timeout, but pending
  EXPECT_TRUE(d.actions.empty());
  EXPECT_EQ(d.pending_reasons.at("job"), "instance job-a0-n1: Resources");
  // Started at t0 + 400 (the loop's pending_until): the 120 s count from then.
  v.instance_pending.clear();
  v.pending_until["job"] = t0 + 400;
  d = Decide(Local(), v, t0 + 520);
  EXPECT_TRUE(d.actions.empty());
  EXPECT_FALSE(d.pending_reasons.count("job"));
  EXPECT_EQ(All<act::Transition>(Decide(Local(), v, t0 + 521)).size(), 1u);
}

TEST(Scheduler, NodesMoveTheJobForwardAndItEndsAsAWarmPool) {
  SimulatedClock clock;
  const double t0 = clock.Wall();
  SchedulerView v = TwoNodeJob(JobPhase::kDownloading, t0, {.count = 2, .keep_alive_s = 30}, t0 + 5);
  NodeReport r;
  r.state = NodeState::kTraining;
  r.node = 0;
  v.reports["job"] = {r};
  EXPECT_TRUE(Decide(Local(), v, t0 + 6).actions.empty());  // node 1 still downloading
  r.node = 1;
  r.state = NodeState::kUploading;
  v.reports["job"].push_back(r);
  EXPECT_EQ(Moves(Decide(Local(), v, t0 + 6)), std::vector<std::string>{"job Training: every instance started its ranks"});
  for (auto& x : v.reports["job"]) {
    x.state = NodeState::kFinished;
    x.exit_code = 0;
  }
  const Decision d = Decide(Local(), v, t0 + 6);
  EXPECT_EQ(Moves(d), (std::vector<std::string>{"job Training: every instance started its ranks",
                                                "job Completed: all 2 instances finished with exit code 0"}));
  ASSERT_EQ(All<act::SetWarmPool>(d).size(), 1u);
  EXPECT_EQ(All<act::SetWarmPool>(d)[0].pool["status"], "Available");
  EXPECT_TRUE(All<act::Release>(d).empty());
  for (const auto& p : All<act::PutInstance>(d)) EXPECT_EQ(p.instance.state, InstanceState::kAvailable);
}

// A node's final report, as its agent posts it.
NodeReport Finished(int node, int exit_code, const std::string& message, const std::string& cause, int failed_rank = -1) {
  NodeReport r;
  r.node = node;
  r.state = NodeState::kFinished;
  r.exit_code = exit_code;
  r.message = message;
  r.cause = cause;
  r.local = true;
  r.failed_rank = failed_rank;
  return r;
}

TEST(Scheduler, AFailedRankEndsTheJobWithItsCauseAndLastLines) {
  SimulatedClock clock;
  const double t0 = clock.Wall();
  SchedulerView v = TwoNodeJob(JobPhase::kTraining, t0, {.count = 2, .max_attempts = 3}, t0 + 5);
  v.reports["job"] = {Finished(1, 1, "rank 1 exited with code 1", "user_error", 1)};
  v.last_lines[{"job", 1}] = {"Traceback", "ValueError: bad"};
  const Decision d = Decide(Local(), v, t0 + 6);
  ASSERT_EQ(All<act::Transition>(d).size(), 1u);
  const auto t = All<act::Transition>(d)[0];
  EXPECT_EQ(t.to, JobPhase::kFailed);  // a user error is never retried, attempts or not
  EXPECT_EQ(t.failure_reason,
            "user_error: node 1: rank 1 exited with code 1\nlast lines of rank 1:\n  Traceback\n  ValueError: bad");
  EXPECT_EQ(t.exit_code, 1);
}

// The cluster's SIGTERM (pre-emption, a time limit) reaches an agent: its ranks checkpoint, it reports
// "interrupted", and the job goes through Interrupted to a new attempt even with no attempts left;
// interruptions never use up retry.max_attempts, failures still do.
TEST(Scheduler, AnInterruptedAttemptResumesAsANewAttemptThatIsNotAFailure) {
  SimulatedClock clock;
  const double t0 = clock.Wall();
  SchedulerView v = TwoNodeJob(JobPhase::kTraining, t0, {.count = 2, .max_attempts = 1}, t0 + 5);
  v.reports["job"] = {Finished(0, 1, "interrupted: the instance got SIGTERM from its cluster", "interrupted")};
  const Decision d = Decide(Local(), v, t0 + 6);
  const auto moves = Moves(d);
  ASSERT_GE(moves.size(), 3u);
  EXPECT_EQ(moves[0], "job Interrupted: attempt 0 interrupted: node 0: interrupted: the instance got SIGTERM from its cluster");
  EXPECT_TRUE(Contains(moves[1], "job Restarting: resuming as attempt 1 from the newest complete checkpoint (interruption 1;"))
      << moves[1];
  EXPECT_EQ(moves[2], "job Starting: attempt 1: obtaining 2 instance(s) from the local backend: job-a1-n0, job-a1-n1");
  ASSERT_EQ(All<act::SetValue>(d).size(), 1u);
  EXPECT_EQ(All<act::SetValue>(d)[0].key, InterruptionsKey("job"));
  EXPECT_EQ(All<act::SetValue>(d)[0].value, "1");
  // Attempt 1 of a job with 2 attempts, once interrupted: a lost instance is its first failure, retried.
  SchedulerView lost = TwoNodeJob(JobPhase::kTraining, t0, {.count = 2, .max_attempts = 2}, t0 + 5);
  lost.active[0].attempt = 1;
  lost.interruptions["job"] = 1;
  EXPECT_EQ(All<act::Transition>(Decide(Local(), lost, t0 + 36))[0].to, JobPhase::kRestarting);
  lost.interruptions.clear();  // without the interruption it was the second failure: Failed
  EXPECT_EQ(All<act::Transition>(Decide(Local(), lost, t0 + 36))[0].to, JobPhase::kFailed);
}

TEST(Scheduler, ARequeuedStopEndsInterruptedAndResumes) {
  SimulatedClock clock;
  const double t0 = clock.Wall();
  SchedulerView v = TwoNodeJob(JobPhase::kStopping, t0, {.count = 2}, t0 + 1);
  v.busy["job-a0-n0"] = {"", -1, t0 + 2};
  v.busy["job-a0-n1"] = {"", -1, t0 + 2};
  v.requeued.insert("job");
  const auto moves = Moves(Decide(Local(), v, t0 + 3));
  ASSERT_GE(moves.size(), 2u);
  EXPECT_EQ(moves[0], "job Interrupted: attempt 0 interrupted: requeued by request; the ranks were stopped to save a checkpoint");
  EXPECT_TRUE(Contains(moves[1], "job Restarting: resuming as attempt 1")) << moves[1];
}

TEST(Scheduler, AStoppingJobEndsOnceEveryNodeIsQuiet) {
  SimulatedClock clock;
  const double t0 = clock.Wall();
  SchedulerView v = TwoNodeJob(JobPhase::kStopping, t0, {.count = 2}, t0 + 1);
  v.busy["job-a0-n0"] = {"", -1, t0 + 1};      // stopped its ranks
  v.busy["job-a0-n1"] = {"job", 0, t0 + 1};    // still running them
  EXPECT_TRUE(Decide(Local(), v, t0 + 2).actions.empty());
  v.busy["job-a0-n1"] = {"", -1, t0 + 2};
  EXPECT_EQ(Moves(Decide(Local(), v, t0 + 3)), std::vector<std::string>{"job Stopped: stopped by request"});
  v.stopped_by_runtime.insert("job");
  EXPECT_EQ(Moves(Decide(Local(), v, t0 + 3)), std::vector<std::string>{"job MaxRuntimeExceeded: stopped: max_runtime_s reached"});
  // A node that never answers: the grace period (30 s) and a margin (3 heartbeats + 30 s) end it.
  v.busy.erase("job-a0-n1");
  EXPECT_TRUE(Decide(Local(), v, t0 + 63).actions.empty());
  EXPECT_EQ(Moves(Decide(Local(), v, t0 + 64)).size(), 1u);
}

TEST(Scheduler, JoinedInstancesAreAssignedByTypeSlotsAndLiveness) {
  SimulatedClock clock;
  const double t0 = clock.Wall();
  SchedulerConfig c;
  c.health.enabled = false;
  c.backend_name = "static";
  SchedulerView v;
  v.server_start = t0;
  v.pending = {MakeJob("job", 1, JobPhase::kPending, t0, {.count = 2})};
  v.instances = {MakeInstance("quiet", "", -1, InstanceState::kIdle, t0 - 31, "static"),
                 MakeInstance("a", "", -1, InstanceState::kIdle, t0, "static")};
  Decision d = Decide(c, v, t0);
  EXPECT_EQ(d.pending_reasons.at("job"), "waiting for 2 idle joined instance(s) of type local with 1 slot(s)");
  v.instances.push_back(MakeInstance("b", "", -1, InstanceState::kIdle, t0, "static"));
  d = Decide(c, v, t0);
  EXPECT_EQ(Moves(d), std::vector<std::string>{"job Starting: assigned 2 joined instance(s): a, b"});
  EXPECT_TRUE(All<act::Obtain>(d).empty());
}

TEST(Scheduler, DecideStartMovesOnlyTheJobItIsGiven) {
  SimulatedClock clock;
  const double t0 = clock.Wall();
  SchedulerView v = Checked(t0, 0, true);
  v.pending = {MakeJob("other", 2, JobPhase::kPending, t0)};
  SchedulerConfig c = Local();
  c.health.enabled = true;
  const Decision d = DecideStart(c, v, "job", t0 + 1);
  EXPECT_EQ(Moves(d), std::vector<std::string>{"job Downloading: all 2 instances registered and passed their health checks"});
}

}  // namespace
}  // namespace anneal
