#include "control/job_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <csignal>
#include <set>
#include <thread>

#include "protocol/exit_cause.h"
#include "testing/temp_dir.h"

namespace anneal {
namespace {

// A valid spec named `name` (the store parses what it reads back).
JobSpec Spec(const std::string& name, const std::string& command = "true") {
  JobSpec s;
  s.name = name;
  s.command = {command};
  return s;
}

TEST(JobState, TransitionsFollowTheTable) {
  EXPECT_TRUE(CanTransition(JobPhase::kPending, JobPhase::kStarting));
  EXPECT_TRUE(CanTransition(JobPhase::kTraining, JobPhase::kStopping));
  EXPECT_TRUE(CanTransition(JobPhase::kStopping, JobPhase::kMaxRuntimeExceeded));
  EXPECT_TRUE(CanTransition(JobPhase::kStopping, JobPhase::kInterrupted));  // anneal stop --requeue
  EXPECT_TRUE(CanTransition(JobPhase::kInterrupted, JobPhase::kRestarting));
  EXPECT_FALSE(CanTransition(JobPhase::kPending, JobPhase::kTraining));
  EXPECT_FALSE(CanTransition(JobPhase::kCompleted, JobPhase::kFailed));
  EXPECT_FALSE(CanTransition(JobPhase::kStopped, JobPhase::kStarting));
  EXPECT_STREQ(PrimaryStatus(JobPhase::kMaxRuntimeExceeded), "Stopped");
  EXPECT_STREQ(PrimaryStatus(JobPhase::kUploading), "InProgress");
  for (JobPhase p : {JobPhase::kCompleted, JobPhase::kFailed, JobPhase::kStopped, JobPhase::kMaxRuntimeExceeded}) {
    EXPECT_TRUE(IsTerminal(p));
    auto back = ParsePhase(PhaseName(p));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, p);
  }
  EXPECT_FALSE(ParsePhase("Running").ok());
}

TEST(InstanceState, MovesFollowTheTable) {
  using S = InstanceState;
  EXPECT_TRUE(CanMoveInstance(S::kRequested, S::kAssigned));
  EXPECT_TRUE(CanMoveInstance(S::kAssigned, S::kAvailable));
  EXPECT_TRUE(CanMoveInstance(S::kAvailable, S::kAssigned));
  EXPECT_TRUE(CanMoveInstance(S::kUnhealthy, S::kIdle));
  EXPECT_TRUE(CanMoveInstance(S::kReleased, S::kReleased));
  EXPECT_FALSE(CanMoveInstance(S::kReleased, S::kAssigned));
  EXPECT_FALSE(CanMoveInstance(S::kAvailable, S::kIdle));
  EXPECT_FALSE(CanMoveInstance(S::kRequested, S::kAvailable));
  EXPECT_FALSE(CanMoveInstance(S::kUnhealthy, S::kAssigned));
  for (S st : {S::kRequested, S::kIdle, S::kAssigned, S::kAvailable, S::kUnhealthy, S::kReleased}) {
    auto back = ParseInstanceState(InstanceStateName(st));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, st);
  }
  EXPECT_FALSE(ParseInstanceState("busy").ok());
}

TEST(JobStore, PutInstanceRefusesAMoveTheTableForbids) {
  testing::TempDir dir;
  auto s = JobStore::Open(dir.File("anneal.db"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  InstanceRecord r;
  r.id = "i-1";
  r.backend = "local";
  r.state = InstanceState::kAssigned;
  EXPECT_EQ((*s)->PutInstance(r).code(), Code::kInternal);  // a new record starts requested or idle
  r.state = InstanceState::kRequested;
  ASSERT_TRUE((*s)->PutInstance(r).ok());
  r.state = InstanceState::kAssigned;
  ASSERT_TRUE((*s)->PutInstance(r).ok());
  r.state = InstanceState::kReleased;
  ASSERT_TRUE((*s)->PutInstance(r).ok());
  r.state = InstanceState::kAssigned;
  Status back = (*s)->PutInstance(r);
  EXPECT_EQ(back.code(), Code::kInternal);
  EXPECT_NE(back.message().find("no move from released to assigned"), std::string::npos) << back.message();
  EXPECT_EQ((*(*s)->GetInstance("i-1"))->state, InstanceState::kReleased);  // unchanged
}

// What schemathesis found (tests/peers/api_schema_test.sh): a submit whose spec could not be written
// as JSON (invalid UTF-8 in a string) threw inside the store's transaction, which stayed open, so
// every later write failed with "cannot start a transaction within a transaction" and new tokens
// "vanished". The submit now fails alone and the store goes on.
TEST(JobStore, ASubmitThatCannotBeStoredFailsAloneAndLeavesNoTransactionOpen) {
  testing::TempDir dir;
  auto s = JobStore::Open(dir.File("anneal.db"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  JobSpec bad = Spec("bad");
  bad.environment["A"] = "\xff\xfe";
  auto refused = (*s)->CreateJob({"bad", "alice", bad}, 100.0);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("cannot be stored"), std::string::npos) << refused.status().ToString();
  auto next = (*s)->CreateJob({"good", "alice", Spec("good")}, 101.0);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_TRUE((*s)->Transition(next->job.id, JobPhase::kStarting, "obtaining", 102.0).ok());
  auto back = (*s)->GetJob(next->job.id);  // the writer committed: another connection reads it
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ((**back).phase, JobPhase::kStarting);
}

TEST(JobStore, JobsTransitionsAndReopen) {
  testing::TempDir dir;
  const std::string db = dir.File("anneal.db");
  std::string id;
  {
    auto s = JobStore::Open(db);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto j = (*s)->CreateJob({"demo", "alice", Spec("demo")}, 100.0);
    ASSERT_TRUE(j.ok()) << j.status().ToString();
    id = j->job.id;
    EXPECT_EQ(id, "demo-0001");
    EXPECT_TRUE((*s)->Transition(id, JobPhase::kStarting, "obtaining", 101.0).ok());
    // A move the state machine forbids is refused and changes nothing.
    Status bad = (*s)->Transition(id, JobPhase::kCompleted, "skip", 102.0);
    EXPECT_EQ(bad.code(), Code::kInternal);
    EXPECT_TRUE((*s)->Transition(id, JobPhase::kFailed, "boom", 103.0, "rank 1 exited 1", 1).ok());
    auto second = (*s)->CreateJob({"demo", "", Spec("demo")}, 104.0);
    ASSERT_TRUE(second.ok());
    EXPECT_EQ(second->job.id, "demo-0002");
  }
  // Everything is still there after reopening (a server restart).
  auto s = JobStore::Open(db);
  ASSERT_TRUE(s.ok());
  auto j = (*s)->GetJob(id);
  ASSERT_TRUE(j.ok() && j->has_value());
  EXPECT_EQ((*j)->phase, JobPhase::kFailed);
  EXPECT_EQ((*j)->failure_reason, "rank 1 exited 1");
  EXPECT_EQ((*j)->exit_code, 1);
  EXPECT_DOUBLE_EQ((*j)->started_at, 101.0);
  EXPECT_DOUBLE_EQ((*j)->ended_at, 103.0);
  EXPECT_EQ((*j)->owner, "alice");
  auto h = (*s)->History(id);
  ASSERT_TRUE(h.ok());
  ASSERT_EQ(h->size(), 3u);
  EXPECT_EQ((*h)[0].phase, JobPhase::kPending);
  EXPECT_EQ((*h)[2].message, "boom");
  auto active = (*s)->ActiveJobs();  // started and not ended: none
  ASSERT_TRUE(active.ok());
  EXPECT_TRUE(active->empty());
  auto pending = (*s)->PendingJobs(10);
  ASSERT_TRUE(pending.ok());
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ((*pending)[0].id, "demo-0002");
  auto all = (*s)->ListJobs(10, false);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].id, "demo-0002");  // newest first
  auto page = (*s)->ListJobs(10, false, (*all)[0].seq);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].id, "demo-0001");
}

TEST(JobStore, LogsAreDeduplicatedAndOrdered) {
  testing::TempDir dir;
  auto s = JobStore::Open(dir.File("anneal.db"));
  ASSERT_TRUE(s.ok());
  auto line = [](int node, int64_t seq, int rank, const std::string& text) {
    LogLine x;
    x.node = node;
    x.seq = seq;
    x.rank = rank;
    x.stream = "stdout";
    x.text = text;
    return x;
  };
  ASSERT_TRUE((*s)->AppendLogs("j", {line(0, 1, 0, "a"), line(0, 2, 0, "b")}).ok());
  // A batch sent again (the agent never saw the answer) with one new line: stored once.
  ASSERT_TRUE((*s)->AppendLogs("j", {line(0, 1, 0, "a"), line(0, 2, 0, "b"), line(0, 3, 1, "c")}).ok());
  ASSERT_TRUE((*s)->AppendLogs("j", {line(1, 1, 2, "d")}).ok());  // another node's seq 1 is its own
  auto all = (*s)->Logs("j", 0, -2, 100);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[0].text, "a");
  EXPECT_EQ((*all)[2].text, "c");
  EXPECT_EQ((*all)[3].text, "d");
  auto rank1 = (*s)->Logs("j", 0, 1, 100);
  ASSERT_TRUE(rank1.ok());
  ASSERT_EQ(rank1->size(), 1u);
  auto after = (*s)->Logs("j", (*all)[1].id, -2, 100);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->size(), 2u);
  auto last = (*s)->LastLogs("j", 0, 1);
  ASSERT_TRUE(last.ok());
  ASSERT_EQ(last->size(), 1u);
  EXPECT_EQ((*last)[0].text, "b");
}

TEST(JobStore, LogsSinceATimeAndTheLastN) {
  testing::TempDir dir;
  auto s = JobStore::Open(dir.File("anneal.db"));
  ASSERT_TRUE(s.ok());
  std::vector<LogLine> lines;
  for (int i = 0; i < 6; ++i) {
    LogLine x;
    x.seq = i + 1;
    x.rank = i % 2;
    x.stream = "stdout";
    x.at = 100.0 + i;
    x.text = 'l';
    x.text += std::to_string(i);
    lines.push_back(x);
  }
  ASSERT_TRUE((*s)->AppendLogs("j", lines).ok());
  auto since = (*s)->Logs("j", 0, -2, 100, 103.0);
  ASSERT_TRUE(since.ok());
  ASSERT_EQ(since->size(), 3u);
  EXPECT_EQ((*since)[0].text, "l3");
  auto tail = (*s)->TailLogs("j", 0, -2, 2);  // the last 2, oldest first
  ASSERT_TRUE(tail.ok());
  ASSERT_EQ(tail->size(), 2u);
  EXPECT_EQ((*tail)[0].text, "l4");
  EXPECT_EQ((*tail)[1].text, "l5");
  auto tail_rank0 = (*s)->TailLogs("j", 0, 0, 2, 101.0);  // rank 0's since 101: l2, l4
  ASSERT_TRUE(tail_rank0.ok());
  ASSERT_EQ(tail_rank0->size(), 2u);
  EXPECT_EQ((*tail_rank0)[0].text, "l2");
  EXPECT_EQ((*tail_rank0)[1].text, "l4");
  auto more = (*s)->TailLogs("j", 0, -2, 100, 104.5);
  ASSERT_TRUE(more.ok());
  ASSERT_EQ(more->size(), 1u);
}

TEST(JobStore, ListsJobsByStatusOwnerAndName) {
  testing::TempDir dir;
  auto s = JobStore::Open(dir.File("anneal.db"));
  ASSERT_TRUE(s.ok());
  auto a = (*s)->CreateJob({"kjv", "alice", Spec("kjv")}, 100.0);
  auto b = (*s)->CreateJob({"kjv", "bob", Spec("kjv")}, 101.0);
  auto c = (*s)->CreateJob({"other", "alice", Spec("other")}, 102.0);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  ASSERT_TRUE((*s)->Transition(b->job.id, JobPhase::kFailed, "boom", 103.0).ok());
  auto ids = [&](const JobStore::ListFilter& f) {
    std::vector<std::string> out;
    auto jobs = (*s)->ListJobs(10, f);
    EXPECT_TRUE(jobs.ok());
    if (jobs.ok()) {
      for (const JobRecord& j : *jobs) out.push_back(j.id);
    }
    return out;
  };
  JobStore::ListFilter f;
  f.status = "Failed";
  EXPECT_EQ(ids(f), std::vector<std::string>{b->job.id});
  f.status = "InProgress";  // a primary status
  EXPECT_EQ(ids(f), (std::vector<std::string>{c->job.id, a->job.id}));
  f.status = "Pending";  // a secondary one
  f.owner = "alice";
  EXPECT_EQ(ids(f), (std::vector<std::string>{c->job.id, a->job.id}));
  f.name = "kjv";
  EXPECT_EQ(ids(f), std::vector<std::string>{a->job.id});
  f = {};
  f.name = "kjv";
  EXPECT_EQ(ids(f), (std::vector<std::string>{b->job.id, a->job.id}));
  f.owner = "carol";
  EXPECT_TRUE(ids(f).empty());
}

TEST(JobStore, MetricsRankMeansAndRendezvous) {
  testing::TempDir dir;
  auto s = JobStore::Open(dir.File("anneal.db"));
  ASSERT_TRUE(s.ok());
  std::vector<MetricPoint> pts;
  for (int i = 0; i < 6; ++i) {
    MetricPoint p;
    p.seq = i + 1;
    p.name = "step_time_s";
    p.rank = i % 2;
    p.value = i % 2 ? 2.0 : 1.0;
    pts.push_back(p);
  }
  ASSERT_TRUE((*s)->AppendMetrics("j", pts).ok());
  ASSERT_TRUE((*s)->AppendMetrics("j", pts).ok());  // again: ignored
  auto m = (*s)->RankMeans("j", "step_time_s");
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->size(), 2u);
  EXPECT_EQ((*m)[0].rank, 1);  // the slowest first
  EXPECT_DOUBLE_EQ((*m)[0].mean, 2.0);
  EXPECT_EQ((*m)[0].count, 3);
  auto first = (*s)->SetMeeting("j", 0, 0, R"({"port":1})");
  auto second = (*s)->SetMeeting("j", 0, 0, R"({"port":2})");
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(*second, R"({"port":1})");  // the first value wins
  auto next_round = (*s)->SetMeeting("j", 0, 1, R"({"port":3})");  // a round that replaced an instance: afresh
  ASSERT_TRUE(next_round.ok());
  EXPECT_EQ(*next_round, R"({"port":3})");
  auto none = (*s)->GetMeeting("j", 1, 0);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(JobStore, RefusesANewerSchema) {
  testing::TempDir dir;
  const std::string db = dir.File("anneal.db");
  { ASSERT_TRUE(JobStore::Open(db).ok()); }
  // Pretend a newer anneal migrated it.
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "PRAGMA user_version = 99", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(raw);
  auto s = JobStore::Open(db);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("newer than this anneal"), std::string::npos);
}

}  // namespace
}  // namespace anneal

namespace anneal {
namespace {

TEST(ExitCause, ClassifiesRankEndings) {
  auto exited = [](int code) { return code << 8; };  // a waitpid status for exit(code)
  EXPECT_EQ(ClassifyRankExit(exited(0), false), ExitCause::kNone);
  EXPECT_EQ(ClassifyRankExit(exited(1), false), ExitCause::kUserError);
  EXPECT_EQ(ClassifyRankExit(exited(2), false), ExitCause::kUserError);
  EXPECT_EQ(ClassifyRankExit(exited(127), false), ExitCause::kUserError);
  EXPECT_EQ(ClassifyRankExit(exited(3), false), ExitCause::kInfrastructure);
  EXPECT_EQ(ClassifyRankExit(SIGSEGV, false), ExitCause::kUserError);
  EXPECT_EQ(ClassifyRankExit(SIGABRT, false), ExitCause::kUserError);
  EXPECT_EQ(ClassifyRankExit(SIGKILL, false), ExitCause::kInfrastructure);
  EXPECT_EQ(ClassifyRankExit(SIGKILL, true), ExitCause::kOutOfMemory);
  EXPECT_EQ(ClassifyRankExit(SIGTERM, false), ExitCause::kInfrastructure);
  EXPECT_TRUE(IsRetryable(ExitCause::kInfrastructure));
  for (ExitCause c : {ExitCause::kUserError, ExitCause::kOutOfMemory, ExitCause::kStopped, ExitCause::kMaxRuntime}) {
    EXPECT_FALSE(IsRetryable(c));
    EXPECT_EQ(ParseExitCause(ExitCauseName(c)), c);
  }
  EXPECT_EQ(ParseExitCause("something new"), ExitCause::kInfrastructure);
  EXPECT_GE(CgroupOomKills(), -1);  // readable here or not: never an error
}

}  // namespace
}  // namespace anneal

namespace anneal {
namespace {

TEST(JobStore, MigratesAVersion1FileKeepingItsJobs) {
  testing::TempDir dir;
  const std::string db = dir.File("anneal.db");
  // A store as schema version 1 left it: node_reports without the exit-cause columns.
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
  const char* v1 =
      "CREATE TABLE jobs (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, name TEXT NOT NULL,"
      " owner TEXT NOT NULL DEFAULT '', spec TEXT NOT NULL, phase TEXT NOT NULL, primary_status TEXT NOT NULL,"
      " failure_reason TEXT NOT NULL DEFAULT '', exit_code INTEGER NOT NULL DEFAULT -1, attempt INTEGER NOT NULL"
      " DEFAULT 0, created_at REAL NOT NULL, updated_at REAL NOT NULL, started_at REAL NOT NULL DEFAULT 0,"
      " ended_at REAL NOT NULL DEFAULT 0);"
      "CREATE TABLE transitions (id INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL, at REAL NOT NULL,"
      " phase TEXT NOT NULL, message TEXT NOT NULL DEFAULT '');"
      "CREATE TABLE node_reports (job_id TEXT NOT NULL, attempt INTEGER NOT NULL, node INTEGER NOT NULL,"
      " state TEXT NOT NULL, exit_code INTEGER NOT NULL DEFAULT -1, message TEXT NOT NULL DEFAULT '',"
      " at REAL NOT NULL, PRIMARY KEY(job_id, attempt, node));"
      "CREATE TABLE metrics (id INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL, attempt INTEGER NOT NULL,"
      " node INTEGER NOT NULL, seq INTEGER NOT NULL, name TEXT NOT NULL, rank INTEGER NOT NULL, at REAL NOT NULL,"
      " value REAL NOT NULL, UNIQUE(job_id, attempt, node, seq));"
      "CREATE TABLE instances (id TEXT PRIMARY KEY, job_id TEXT NOT NULL DEFAULT '', node INTEGER NOT NULL"
      " DEFAULT -1, address TEXT NOT NULL DEFAULT '', instance_type TEXT NOT NULL DEFAULT '', slots INTEGER NOT"
      " NULL DEFAULT 1, state TEXT NOT NULL, backend TEXT NOT NULL, registered_at REAL NOT NULL DEFAULT 0,"
      " last_heartbeat REAL NOT NULL DEFAULT 0);"
      "INSERT INTO instances(id, state, backend) VALUES('agent-1', 'idle', 'static');"
      "INSERT INTO jobs(id, name, spec, phase, primary_status, created_at, updated_at)"
      " VALUES('old-0001', 'old', '{\"name\": \"old\", \"entrypoint\": {\"command\": \"true\"}}', 'Completed', 'Completed', 1, 2);"
      "INSERT INTO node_reports VALUES('old-0001', 0, 0, 'finished', 0, 'ok', 2);"
      "PRAGMA user_version = 1;";
  ASSERT_EQ(sqlite3_exec(raw, v1, nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(raw);
  auto s = JobStore::Open(db);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto j = (*s)->GetJob("old-0001");
  ASSERT_TRUE(j.ok() && j->has_value());
  EXPECT_EQ((*j)->phase, JobPhase::kCompleted);
  auto reps = (*s)->NodeReports("old-0001", 0);
  ASSERT_TRUE(reps.ok()) << reps.status().ToString();
  ASSERT_EQ(reps->size(), 1u);
  EXPECT_EQ((*reps)[0].failed_rank, -1);
  NodeReport r;
  r.state = NodeState::kFinished;
  r.cause = "user_error";
  r.local = true;
  r.failed_rank = 3;
  ASSERT_TRUE((*s)->PutNodeReport("old-0001", r).ok());
  EXPECT_EQ((*(*s)->NodeReports("old-0001", 0))[0].cause, "user_error");
  // Version 3's additions: the old instance has no warm pool; users can be stored.
  auto insts = (*s)->Instances();
  ASSERT_TRUE(insts.ok() && insts->size() == 1u);
  EXPECT_EQ((*insts)[0].pool_key, "");
  ASSERT_TRUE((*s)->PutUser({"alice", "user", -1, 1.0}).ok());
  EXPECT_EQ((*(*s)->GetUser("alice"))->role, "user");
  // Version 4's: the old job has no idempotency key; keyed submits work on the migrated file.
  EXPECT_EQ((*j)->idempotency_key, "");
  auto k = (*s)->CreateJob({"new", "alice", Spec("new"), "key-1"}, 3.0);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_EQ(k->job.id, "new-0002");
  EXPECT_TRUE((*(*s)->CreateJob({"new", "alice", Spec("new"), "key-1"}, 4.0)).existed);
  // Version 6's: uploads are recorded and counted against their owner.
  ASSERT_TRUE((*s)->PutPackage(std::string(64, 'a'), "alice", 100, 5.0).ok());
  EXPECT_EQ(*(*s)->PackageBytesOf("alice"), 100);
}

// A store a build of schema 5 wrote (tokens' expiry, no packages table) gains the table at the next
// start: a migration once shipped is never edited, the table came as its own step.
TEST(JobStore, AVersion5StoreGainsThePackagesTable) {
  testing::TempDir dir;
  const std::string db = dir.File("anneal.db");
  {
    auto s = JobStore::Open(db);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
  }
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
  // Back to 5: without the packages table (6) and the metrics' step (7).
  ASSERT_EQ(sqlite3_exec(raw, "DROP TABLE packages; ALTER TABLE metrics DROP COLUMN step; ALTER TABLE node_reports DROP COLUMN sandbox; "
                          "DROP TABLE meetings; CREATE TABLE rendezvous(job_id TEXT, attempt INTEGER, value TEXT); "
                          "ALTER TABLE transitions DROP COLUMN stop_cause; PRAGMA user_version = 5;", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  auto s = JobStore::Open(db);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE((*s)->PutPackage(std::string(64, 'b'), "admin", 7, 1.0).ok());
  EXPECT_EQ(*(*s)->PackageBytesOf("admin"), 7);
}

// Why a job went to Stopping is a field of that transition; a store of schema 9 gets the field for
// the stops it recorded from their messages, once, in its migration.
TEST(JobStore, AStopsCauseIsAFieldOfItsTransition) {
  testing::TempDir dir;
  const std::string db = dir.File("anneal.db");
  {
    auto s = JobStore::Open(db);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    for (const char* id : {"a", "b", "c"}) {
      ASSERT_TRUE((*s)->CreateJob({id, "alice", Spec(id), ""}, 1.0).ok());
    }
    auto ids = (*s)->ListJobs(10, false, 0, "");
    ASSERT_TRUE(ids.ok());
    ASSERT_EQ(ids->size(), 3u);
    const StopCause causes[] = {StopCause::kRuntime, StopCause::kRequeue, StopCause::kRequest};
    for (size_t n = 0; n < 3; ++n) {
      const std::string id = (*ids)[n].id;
      ASSERT_TRUE((*s)->Transition(id, JobPhase::kStarting, "go", 2.0).ok());
      ASSERT_TRUE((*s)->Transition(id, JobPhase::kStopping, "any words", 3.0, "", -1, causes[n]).ok());
      auto h = (*s)->History(id);
      ASSERT_TRUE(h.ok());
      EXPECT_EQ(h->back().stop, causes[n]);
      EXPECT_EQ((*h)[h->size() - 2].stop, StopCause::kNone);
    }
  }
  // Back to 9, with the messages the server wrote then.
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw,
                         "ALTER TABLE transitions DROP COLUMN stop_cause;"
                         "UPDATE transitions SET message = 'max_runtime_s 60 reached' WHERE phase = 'Stopping' AND job_id ="
                         " (SELECT id FROM jobs WHERE name = 'a');"
                         "UPDATE transitions SET message = 'requeue requested by alice' WHERE phase = 'Stopping' AND job_id ="
                         " (SELECT id FROM jobs WHERE name = 'b');"
                         "UPDATE transitions SET message = 'stop requested by alice' WHERE phase = 'Stopping' AND job_id ="
                         " (SELECT id FROM jobs WHERE name = 'c');"
                         "PRAGMA user_version = 9;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  auto s = JobStore::Open(db);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto jobs = (*s)->ListJobs(10, false, 0, "");
  ASSERT_TRUE(jobs.ok());
  std::map<std::string, StopCause> got;
  for (const JobRecord& j : *jobs) got[j.name] = (*s)->History(j.id)->back().stop;
  EXPECT_EQ(got["a"], StopCause::kRuntime);
  EXPECT_EQ(got["b"], StopCause::kRequeue);
  EXPECT_EQ(got["c"], StopCause::kRequest);
}

TEST(JobStore, AKeyNamesOneJobPerOwnerForEver) {
  testing::TempDir dir;
  const std::string db = dir.File("anneal.db");
  {
    auto s = JobStore::Open(db);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto a = (*s)->CreateJob({"demo", "alice", Spec("demo"), "k1"}, 1.0);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_FALSE(a->existed);
    EXPECT_EQ(a->job.idempotency_key, "k1");
    // The retry of a submit whose answer was lost: the same job, nothing created.
    auto again = (*s)->CreateJob({"demo", "alice", Spec("demo", "other"), "k1"}, 2.0);
    ASSERT_TRUE(again.ok());
    EXPECT_TRUE(again->existed);
    EXPECT_EQ(again->job.id, a->job.id);
    EXPECT_EQ(again->job.spec.ToJson(), Spec("demo").ToJson());  // the stored spec: the caller compares
    // Another owner's key of the same text is another job; no key: a new job each time.
    auto bob = (*s)->CreateJob({"demo", "bob", Spec("demo"), "k1"}, 3.0);
    ASSERT_TRUE(bob.ok());
    EXPECT_FALSE(bob->existed);
    EXPECT_NE(bob->job.id, a->job.id);
    EXPECT_FALSE((*(*s)->CreateJob({"demo", "alice", Spec("demo")}, 4.0)).existed);
    EXPECT_FALSE((*(*s)->CreateJob({"demo", "alice", Spec("demo")}, 5.0)).existed);
    EXPECT_EQ(*(*s)->CountJobs(), 4);
  }
  // After a restart the key still names its job.
  auto s = JobStore::Open(db);
  ASSERT_TRUE(s.ok());
  auto after = (*s)->CreateJob({"demo", "alice", Spec("demo"), "k1"}, 6.0);
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->existed);
  EXPECT_EQ(after->job.id, "demo-0001");
  EXPECT_EQ(*(*s)->CountJobs(), 4);
}

// Submits from many threads at once, committed in groups: each is created exactly once, with its own
// id, and each retry finds its job.
TEST(JobStore, ConcurrentSubmitsAreEachCreatedOnce) {
  testing::TempDir dir;
  auto s = JobStore::Open(dir.File("anneal.db"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  constexpr int kThreads = 8, kEach = 40;
  std::vector<std::vector<std::string>> ids(kThreads);
  auto submit_all = [&](bool expect_existed) {
    std::vector<std::thread> ts;
    std::atomic<int> wrong{0};
    for (int t = 0; t < kThreads; ++t) {
      ts.emplace_back([&, t] {
        for (int i = 0; i < kEach; ++i) {
          char key[32];
          std::snprintf(key, sizeof(key), "t%d-%d", t, i);
          auto r = (*s)->CreateJob({"job", "alice", Spec("job"), key}, 1.0);
          if (!r.ok() || r->existed != expect_existed) {
            ++wrong;
            continue;
          }
          if (expect_existed) {
            wrong += r->job.id != ids[t][i] ? 1 : 0;
          } else {
            ids[t].push_back(r->job.id);
          }
        }
      });
    }
    for (auto& th : ts) th.join();
    return wrong.load();
  };
  EXPECT_EQ(submit_all(false), 0);
  std::set<std::string> distinct;
  for (const auto& v : ids) distinct.insert(v.begin(), v.end());
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kThreads * kEach));
  EXPECT_EQ(submit_all(true), 0);
  EXPECT_EQ(*(*s)->CountJobs(), kThreads * kEach);
}

}  // namespace
}  // namespace anneal
