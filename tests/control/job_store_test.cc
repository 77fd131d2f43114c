#include "control/job_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <csignal>

#include "control/exit_cause.h"
#include "testing/temp_dir.h"

namespace anneal {
namespace {

TEST(JobState, TransitionsFollowTheTable) {
  EXPECT_TRUE(CanTransition(JobPhase::kPending, JobPhase::kStarting));
  EXPECT_TRUE(CanTransition(JobPhase::kTraining, JobPhase::kStopping));
  EXPECT_TRUE(CanTransition(JobPhase::kStopping, JobPhase::kMaxRuntimeExceeded));
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

TEST(JobStore, JobsTransitionsAndReopen) {
  testing::TempDir dir;
  const std::string db = dir.File("anneal.db");
  std::string id;
  {
    auto s = JobStore::Open(db);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto j = (*s)->CreateJob("demo", "alice", {{"name", "demo"}}, 100.0);
    ASSERT_TRUE(j.ok()) << j.status().ToString();
    id = j->id;
    EXPECT_EQ(id, "demo-0001");
    EXPECT_TRUE((*s)->Transition(id, JobPhase::kStarting, "obtaining", 101.0).ok());
    // A move the state machine forbids is refused and changes nothing.
    Status bad = (*s)->Transition(id, JobPhase::kCompleted, "skip", 102.0);
    EXPECT_EQ(bad.code(), Code::kInternal);
    EXPECT_TRUE((*s)->Transition(id, JobPhase::kFailed, "boom", 103.0, "rank 1 exited 1", 1).ok());
    auto second = (*s)->CreateJob("demo", "", {{"name", "demo"}}, 104.0);
    ASSERT_TRUE(second.ok());
    EXPECT_EQ(second->id, "demo-0002");
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
  auto first = (*s)->SetRendezvous("j", 0, R"({"port":1})");
  auto second = (*s)->SetRendezvous("j", 0, R"({"port":2})");
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(*second, R"({"port":1})");  // the first value wins
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
      "CREATE TABLE node_reports (job_id TEXT NOT NULL, attempt INTEGER NOT NULL, node INTEGER NOT NULL,"
      " state TEXT NOT NULL, exit_code INTEGER NOT NULL DEFAULT -1, message TEXT NOT NULL DEFAULT '',"
      " at REAL NOT NULL, PRIMARY KEY(job_id, attempt, node));"
      "CREATE TABLE instances (id TEXT PRIMARY KEY, job_id TEXT NOT NULL DEFAULT '', node INTEGER NOT NULL"
      " DEFAULT -1, address TEXT NOT NULL DEFAULT '', instance_type TEXT NOT NULL DEFAULT '', slots INTEGER NOT"
      " NULL DEFAULT 1, state TEXT NOT NULL, backend TEXT NOT NULL, registered_at REAL NOT NULL DEFAULT 0,"
      " last_heartbeat REAL NOT NULL DEFAULT 0);"
      "INSERT INTO instances(id, state, backend) VALUES('agent-1', 'idle', 'static');"
      "INSERT INTO jobs(id, name, spec, phase, primary_status, created_at, updated_at)"
      " VALUES('old-0001', 'old', '{}', 'Completed', 'Completed', 1, 2);"
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
  r.state = "finished";
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
}

}  // namespace
}  // namespace anneal
