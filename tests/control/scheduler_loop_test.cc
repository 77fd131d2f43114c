// SchedulerLoop against a real job store and a recording backend: a pass reads the store, obtains a
// job's instances as one gang with the server's URL, writes the job's move and its instances, and
// keeps the reasons (the queue's, and the backend's for a pending instance). Passes are run by the
// test (no thread, no sleeping).
#include "control/scheduler_loop.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/clock.h"
#include "testing/temp_dir.h"

namespace anneal {
namespace {

class RecordingBackend : public InstanceProvider {
 public:
  std::string name() const override { return "recording"; }
  bool obtains() const override { return true; }
  int capacity() const override { return 4; }
  Status Obtain(const GangRequest& g) override {
    gangs.push_back(g);
    return Status::Ok();
  }
  void Release(const std::string& id) override { released.push_back(id); }
  ProvisionReport Poll() override { return report; }

  std::vector<GangRequest> gangs;
  std::vector<std::string> released;
  ProvisionReport report;
};

JobSpec Spec(int count) {
  JobSpec s;
  s.name = "job";
  s.command = {"true"};
  s.instance_count = count;
  return s;
}

// The server's configuration for this backend, without health checks.
SchedulerConfig ConfigFor(const InstanceProvider& backend) {
  SchedulerConfig c;
  c.backend_obtains = backend.obtains();
  c.backend_capacity = backend.capacity();
  c.backend_name = backend.name();
  c.health.enabled = false;
  return c;
}

TEST(SchedulerLoop, APassObtainsAGangWritesTheMoveAndKeepsTheReasons) {
  testing::TempDir dir;
  auto store = JobStore::Open(dir.path() + "/anneal.db");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  RecordingBackend backend;
  const SchedulerConfig c = ConfigFor(backend);
  SchedulerLoop loop(store->get(), &backend, c, "http://server:8470", WallSeconds(), 1.0, {});
  auto a = (*store)->CreateJob({"job", "alice", Spec(2)}, WallSeconds());
  auto b = (*store)->CreateJob({"job", "alice", Spec(3)}, WallSeconds());
  ASSERT_TRUE(a.ok() && b.ok());

  ASSERT_TRUE(loop.Pass().ok());
  ASSERT_EQ(backend.gangs.size(), 1u);  // a's two instances in one request; b does not fit (2 + 3 > 4)
  EXPECT_EQ(backend.gangs[0].job, a->job.id);
  ASSERT_EQ(backend.gangs[0].instances.size(), 2u);
  EXPECT_EQ(backend.gangs[0].instances[1].server_url, "http://server:8470");
  auto ja = (*store)->GetJob(a->job.id);
  ASSERT_TRUE(ja.ok() && *ja);
  EXPECT_EQ((*ja)->phase, JobPhase::kStarting);
  auto insts = (*store)->Instances();
  ASSERT_TRUE(insts.ok());
  ASSERT_EQ(insts->size(), 2u);
  EXPECT_EQ((*insts)[0].state, InstanceState::kRequested);
  EXPECT_EQ((*insts)[0].backend, "recording");
  EXPECT_EQ(loop.PendingReason(b->job.id).value_or(""), "waiting for instances: the recording backend runs at most 4 at once");

  // The backend says one instance has not started: its reason becomes the Starting job's.
  backend.report.pending[backend.gangs[0].instances[1].id] = "Resources";
  ASSERT_TRUE(loop.Pass().ok());
  EXPECT_EQ(loop.PendingReason(a->job.id).value_or(""), "instance " + backend.gangs[0].instances[1].id + ": Resources");
  EXPECT_EQ(backend.gangs.size(), 1u);  // nothing obtained twice
}

// The server's end goes through the scheduler's actions on the loop's clock: the instances a job holds
// are released through the backend, a joined agent goes back to the pool, and a warm pool ends
// Terminated at the clock's time.
TEST(SchedulerLoop, DrainReleasesEveryInstanceAndEndsTheWarmPools) {
  testing::TempDir dir;
  auto store = JobStore::Open(dir.path() + "/anneal.db");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  RecordingBackend backend;
  const SchedulerConfig c = ConfigFor(backend);
  SimulatedClock clock;
  SchedulerLoop loop(store->get(), &backend, c, "http://server:8470", clock.Wall(), 1.0, {}, clock);
  auto a = (*store)->CreateJob({"job", "alice", Spec(2)}, clock.Wall());
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(loop.Pass().ok());
  ASSERT_EQ(backend.gangs.size(), 1u);  // a's two instances
  // An ended job's warm pool of one obtained instance, and an operator's agent that joined, idle.
  auto pooled = (*store)->CreateJob({"pooled", "alice", Spec(1)}, clock.Wall());
  ASSERT_TRUE(pooled.ok());
  const std::string from = pooled->job.id;
  for (JobPhase p : {JobPhase::kStarting, JobPhase::kDownloading, JobPhase::kTraining, JobPhase::kCompleted}) {
    ASSERT_TRUE((*store)->Transition(from, p, "", clock.Wall()).ok());
  }
  ASSERT_TRUE((*store)->SetWarmPool(from, {{"status", "Available"}}).ok());
  InstanceRecord kept;
  kept.id = from + "-a0-n0";
  kept.job_id = from;
  kept.node = 0;
  kept.backend = "recording";
  kept.keep_until = clock.Wall() + 600;
  kept.registered_at = kept.last_heartbeat = clock.Wall();
  for (InstanceState st : {InstanceState::kRequested, InstanceState::kAssigned, InstanceState::kAvailable}) {
    kept.state = st;  // the moves instance_state.h allows
    ASSERT_TRUE((*store)->PutInstance(kept).ok());
  }
  InstanceRecord joined;
  joined.id = "operator-1";
  joined.state = InstanceState::kIdle;
  joined.backend = kJoinedBackend;
  joined.registered_at = joined.last_heartbeat = clock.Wall();
  ASSERT_TRUE((*store)->PutInstance(joined).ok());
  clock.Advance(30);

  ASSERT_TRUE(loop.Drain().ok());
  std::vector<std::string> released = backend.released;
  std::sort(released.begin(), released.end());
  std::vector<std::string> want = {backend.gangs[0].instances[0].id, backend.gangs[0].instances[1].id, kept.id};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(released, want);
  auto insts = (*store)->Instances();
  ASSERT_TRUE(insts.ok());
  for (const InstanceRecord& i : *insts) {
    EXPECT_EQ(i.state, i.id == "operator-1" ? InstanceState::kIdle : InstanceState::kReleased) << i.id;
  }
  auto ended = (*store)->GetJob(from);
  ASSERT_TRUE(ended.ok() && *ended);
  EXPECT_EQ((*ended)->warm_pool["status"], "Terminated");
  EXPECT_EQ((*ended)->warm_pool["ended_at"], clock.Wall());
  EXPECT_NE((*ended)->warm_pool["ended_because"].get<std::string>().find("the server ended"), std::string::npos);
}

}  // namespace
}  // namespace anneal
