#include "control/job_store.h"

#include <algorithm>

#include <mutex>

#include <sqlite3.h>

#include <cstdio>
#include <functional>

#include "control/sql_stmt.h"

namespace anneal {

namespace {

// The schema, one step per version (docs/formats/job-store.md). A database at version v runs steps
// v+1.. in one transaction each; never edit a released step, add one.
const char* const kMigrations[] = {
    // 1: jobs, their history, instances, logs, metrics, node reports, rendezvous.
    R"sql(
CREATE TABLE jobs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  owner TEXT NOT NULL DEFAULT '',
  spec TEXT NOT NULL,
  phase TEXT NOT NULL,
  primary_status TEXT NOT NULL,
  failure_reason TEXT NOT NULL DEFAULT '',
  exit_code INTEGER NOT NULL DEFAULT -1,
  attempt INTEGER NOT NULL DEFAULT 0,
  created_at REAL NOT NULL,
  updated_at REAL NOT NULL,
  started_at REAL NOT NULL DEFAULT 0,
  ended_at REAL NOT NULL DEFAULT 0);
CREATE INDEX jobs_active ON jobs(primary_status, seq);
CREATE TABLE transitions (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id TEXT NOT NULL,
  at REAL NOT NULL,
  phase TEXT NOT NULL,
  message TEXT NOT NULL DEFAULT '');
CREATE INDEX transitions_job ON transitions(job_id, id);
CREATE TABLE instances (
  id TEXT PRIMARY KEY,
  job_id TEXT NOT NULL DEFAULT '',
  node INTEGER NOT NULL DEFAULT -1,
  address TEXT NOT NULL DEFAULT '',
  instance_type TEXT NOT NULL DEFAULT '',
  slots INTEGER NOT NULL DEFAULT 1,
  state TEXT NOT NULL,
  backend TEXT NOT NULL,
  registered_at REAL NOT NULL DEFAULT 0,
  last_heartbeat REAL NOT NULL DEFAULT 0);
CREATE TABLE logs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  node INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  rank INTEGER NOT NULL,
  stream TEXT NOT NULL,
  at REAL NOT NULL,
  text TEXT NOT NULL,
  UNIQUE(job_id, attempt, node, seq));
CREATE INDEX logs_job ON logs(job_id, id);
CREATE TABLE metrics (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  node INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  name TEXT NOT NULL,
  rank INTEGER NOT NULL,
  at REAL NOT NULL,
  value REAL NOT NULL,
  UNIQUE(job_id, attempt, node, seq));
CREATE INDEX metrics_job ON metrics(job_id, name, id);
CREATE TABLE node_reports (
  job_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  node INTEGER NOT NULL,
  state TEXT NOT NULL,
  exit_code INTEGER NOT NULL DEFAULT -1,
  message TEXT NOT NULL DEFAULT '',
  at REAL NOT NULL,
  PRIMARY KEY(job_id, attempt, node));
CREATE TABLE rendezvous (
  job_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY(job_id, attempt));
)sql",
    // 2: the queue's index; why an attempt ended, per node (protocol/exit_cause.h).
    R"sql(
CREATE INDEX IF NOT EXISTS jobs_phase ON jobs(phase, seq);
ALTER TABLE node_reports ADD COLUMN cause TEXT NOT NULL DEFAULT '';
ALTER TABLE node_reports ADD COLUMN local INTEGER NOT NULL DEFAULT 0;
ALTER TABLE node_reports ADD COLUMN failed_rank INTEGER NOT NULL DEFAULT -1;
)sql",
    // 3: users and their tokens (SHA-256 of the secret only), warm pools, pre-start health checks,
    // and small named values (the webhook sender's cursor).
    R"sql(
CREATE TABLE users (
  name TEXT PRIMARY KEY,
  role TEXT NOT NULL,
  max_instances INTEGER NOT NULL DEFAULT -1,
  created_at REAL NOT NULL);
CREATE TABLE tokens (
  id TEXT PRIMARY KEY,
  principal TEXT NOT NULL,
  kind TEXT NOT NULL,
  sha256 TEXT NOT NULL UNIQUE,
  description TEXT NOT NULL DEFAULT '',
  created_at REAL NOT NULL);
CREATE INDEX tokens_principal ON tokens(principal);
ALTER TABLE instances ADD COLUMN pool_key TEXT NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN keep_until REAL NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN warm_pool TEXT NOT NULL DEFAULT '';
CREATE TABLE health_checks (
  job_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  instance_id TEXT NOT NULL,
  node INTEGER NOT NULL,
  ok INTEGER NOT NULL,
  result TEXT NOT NULL,
  at REAL NOT NULL,
  PRIMARY KEY(job_id, attempt, instance_id));
CREATE TABLE kv (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL);
)sql",
    // 4: submits' idempotency keys, one job per (owner, key).
    R"sql(
ALTER TABLE jobs ADD COLUMN idempotency_key TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX jobs_idempotency ON jobs(owner, idempotency_key) WHERE idempotency_key != '';
)sql",
    // 5: tokens' expiry and last use (docs/security.md).
    R"sql(
ALTER TABLE tokens ADD COLUMN expires_at REAL NOT NULL DEFAULT 0;
ALTER TABLE tokens ADD COLUMN last_used_at REAL NOT NULL DEFAULT 0;
)sql",
    // 6: who uploaded which package (quota, clean-up) (docs/security.md).
    R"sql(
CREATE TABLE packages (
  sha256 TEXT NOT NULL,
  owner TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  uploaded_at REAL NOT NULL,
  PRIMARY KEY(sha256, owner));
)sql",
    // 7: the training step of a metric point (-1: none).
    R"sql(
ALTER TABLE metrics ADD COLUMN step INTEGER NOT NULL DEFAULT -1;
)sql",
    // 8: how the node ran the job's ranks: "uid N" (sandboxed), or "off: why" (docs/security.md).
    R"sql(
ALTER TABLE node_reports ADD COLUMN sandbox TEXT NOT NULL DEFAULT '';
)sql",
    // 9: one meeting per (attempt, health round), shared by the round's collective and the start
    // (protocol/wire.h's MeetingKey); it replaces the rendezvous table, keyed by one number.
    R"sql(
DROP TABLE IF EXISTS rendezvous;
CREATE TABLE meetings (
  job_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  round INTEGER NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY(job_id, attempt, round));
)sql",
    // 10: why a job went to Stopping, as a field (StopCause); the stops recorded before it get theirs
    // from the messages the server wrote then.
    R"sql(
ALTER TABLE transitions ADD COLUMN stop_cause TEXT NOT NULL DEFAULT '';
UPDATE transitions SET stop_cause = 'max_runtime' WHERE phase = 'Stopping' AND message LIKE 'max\_runtime\_s %' ESCAPE '\';
UPDATE transitions SET stop_cause = 'requeue' WHERE phase = 'Stopping' AND message LIKE 'requeue requested%';
UPDATE transitions SET stop_cause = 'request' WHERE phase = 'Stopping' AND stop_cause = '';
)sql",
};
constexpr int kMigrationCount = sizeof(kMigrations) / sizeof(kMigrations[0]);
static_assert(kMigrationCount == JobStore::kSchemaVersion, "one migration per schema version");


constexpr const char* kJobColumns =
    "seq, id, name, owner, spec, phase, failure_reason, exit_code, attempt, created_at, updated_at, started_at, ended_at, "
    "warm_pool, idempotency_key";

// summary: column 4 is the spec's instance_count alone (a listing), not the whole document.
Result<JobRecord> ReadJob(const SqlStmt& s, bool summary = false) {
  JobRecord r;
  r.seq = s.Int(0);
  r.id = s.Text(1);
  r.name = s.Text(2);
  r.owner = s.Text(3);
  if (summary) {
    r.spec.instance_count = static_cast<int>(s.Int(4));
  } else {
    const nlohmann::json doc = nlohmann::json::parse(s.Text(4), nullptr, false);
    auto spec = JobSpecFromStored(doc);
    if (!spec.ok()) return IoError("the stored spec of job " + r.id + " cannot be read: " + spec.status().message());
    r.spec = std::move(*spec);
  }
  ANNEAL_ASSIGN_OR_RETURN(r.phase, ParsePhase(s.Text(5)));
  r.failure_reason = s.Text(6);
  r.exit_code = static_cast<int>(s.Int(7));
  r.attempt = static_cast<int>(s.Int(8));
  r.created_at = s.Real(9);
  r.updated_at = s.Real(10);
  r.started_at = s.Real(11);
  r.ended_at = s.Real(12);
  const std::string pool = s.Text(13);
  if (!pool.empty()) r.warm_pool = nlohmann::json::parse(pool, nullptr, false);
  r.idempotency_key = s.Text(14);
  return r;
}

// Columns: id, attempt, node, seq, rank, stream, at, text.
LogLine ReadLogLine(const SqlStmt& s) {
  LogLine x;
  x.id = s.Int(0);
  x.attempt = static_cast<int>(s.Int(1));
  x.node = static_cast<int>(s.Int(2));
  x.seq = s.Int(3);
  x.rank = static_cast<int>(s.Int(4));
  x.stream = s.Text(5);
  x.at = s.Real(6);
  x.text = s.Text(7);
  return x;
}

// Log lines of `job` after after_id (rank -2: every rank's) at or after `since`: the first `limit`, or
// with `last` the last `limit` (newest first in the query, returned oldest first).
Result<std::vector<LogLine>> SelectLogs(sqlite3* db, const std::string& job, int64_t after_id, int rank, int limit,
                                        double since, bool last) {
#define ANNEAL_LOGS_WHERE \
  "SELECT id, attempt, node, seq, rank, stream, at, text FROM logs WHERE job_id = ? AND id > ? AND (? = -2 OR rank = ?) " \
  "AND at >= ? ORDER BY id"
  SqlStmt s(db, last ? ANNEAL_LOGS_WHERE " DESC LIMIT ?" : ANNEAL_LOGS_WHERE " LIMIT ?");
#undef ANNEAL_LOGS_WHERE
  s.Bind(1, job).Bind(2, after_id).Bind(3, rank).Bind(4, rank).Bind(5, since).Bind(6, limit);
  std::vector<LogLine> out;
  Status st;
  while (s.Step(&st)) out.push_back(ReadLogLine(s));
  ANNEAL_RETURN_IF_ERROR(st);
  if (last) std::reverse(out.begin(), out.end());
  return out;
}

// Every row of a statement selecting kJobColumns.
Result<std::vector<JobRecord>> ReadJobs(SqlStmt& s, bool summary = false) {
  std::vector<JobRecord> out;
  Status st;
  while (s.Step(&st)) {
    ANNEAL_ASSIGN_OR_RETURN(JobRecord r, ReadJob(s, summary));
    out.push_back(std::move(r));
  }
  ANNEAL_RETURN_IF_ERROR(st);
  return out;
}

Result<InstanceRecord> ReadInstance(const SqlStmt& s) {
  InstanceRecord r;
  r.id = s.Text(0);
  r.job_id = s.Text(1);
  r.node = static_cast<int>(s.Int(2));
  r.address = s.Text(3);
  r.instance_type = s.Text(4);
  r.slots = static_cast<int>(s.Int(5));
  ANNEAL_ASSIGN_OR_RETURN(r.state, ParseInstanceState(s.Text(6)));
  r.backend = s.Text(7);
  r.registered_at = s.Real(8);
  r.last_heartbeat = s.Real(9);
  r.pool_key = s.Text(10);
  r.keep_until = s.Real(11);
  return r;
}

}  // namespace

std::vector<InstanceRecord> InstancesHolding(const std::vector<InstanceRecord>& all, const std::string& job) {
  std::vector<InstanceRecord> mine;
  for (const auto& i : all) {
    if (i.job_id == job && i.state != InstanceState::kReleased && i.state != InstanceState::kAvailable) mine.push_back(i);
  }
  std::sort(mine.begin(), mine.end(), [](const auto& a, const auto& b) { return a.node < b.node; });
  return mine;
}

Result<std::unique_ptr<JobStore>> JobStore::Open(const std::string& path) {
  // SQLite's memory statistics take one process-wide mutex on every allocation: the API's
  // concurrent reads contend on it. Off, before SQLite initializes (later calls are refused, and
  // harmless).
  static std::once_flag once;
  std::call_once(once, [] { sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); });
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string m = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return IoError("cannot open the job store " + path + ": " + m + "; check that --data-dir is writable");
  }
  sqlite3_busy_timeout(db, 10000);
  std::unique_ptr<JobStore> s(new JobStore(db, path));
  ANNEAL_RETURN_IF_ERROR(s->Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"));
  ANNEAL_RETURN_IF_ERROR(s->Migrate());
  ANNEAL_RETURN_IF_ERROR(s->OpenReaders());
  return s;
}

Status JobStore::OpenReaders() {
  for (int n = 0; n < kReaders; ++n) {
    sqlite3* r = nullptr;
    // One thread at a time uses each (a Reader borrows it): no SQLite mutex needed.
    const int rc = sqlite3_open_v2(path_.c_str(), &r, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
      std::string m = r ? sqlite3_errmsg(r) : "out of memory";
      sqlite3_close(r);
      return IoError("cannot open the job store " + path_ + " for reading: " + m);
    }
    sqlite3_busy_timeout(r, 10000);
    readers_.push_back(r);
    free_readers_.push_back(r);
  }
  return Status::Ok();
}

JobStore::Reader::Reader(JobStore* s) : s_(s) {
  std::unique_lock<std::mutex> l(s_->readers_mu_);
  s_->readers_cv_.wait(l, [&] { return !s_->free_readers_.empty(); });
  db_ = s_->free_readers_.back();
  s_->free_readers_.pop_back();
}

JobStore::Reader::~Reader() {
  {
    std::lock_guard<std::mutex> l(s_->readers_mu_);
    s_->free_readers_.push_back(db_);
  }
  s_->readers_cv_.notify_one();
}

JobStore::~JobStore() {
  for (sqlite3* r : readers_) sqlite3_close(r);
  sqlite3_close(db_);
}

Status JobStore::Exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string m = err ? err : "unknown error";
    sqlite3_free(err);
    return IoError("job store " + path_ + ": " + m);
  }
  return Status::Ok();
}

Status JobStore::Migrate() {
  std::lock_guard<std::mutex> l(mu_);
  int version = 0;
  {  // finalized before the migrations: an unfinished statement would lock the tables a DROP names
    SqlStmt v(db_, "PRAGMA user_version");
    Status st;
    if (v.Step(&st)) version = static_cast<int>(v.Int(0));
    ANNEAL_RETURN_IF_ERROR(st);
  }
  if (version > kSchemaVersion) {
    return InvalidInput("the job store " + path_ + " has schema version " + std::to_string(version) +
                        ", newer than this anneal's " + std::to_string(kSchemaVersion) + ": run a newer anneal server");
  }
  for (int to = version + 1; to <= kSchemaVersion; ++to) {
    Status s = InTransaction([&]() -> Status {
      ANNEAL_RETURN_IF_ERROR(Exec(kMigrations[to - 1]));
      return Exec("PRAGMA user_version = " + std::to_string(to));
    });
    if (!s.ok()) return s.Annotate("migrating the job store to schema version " + std::to_string(to));
  }
  return Status::Ok();
}

Result<std::optional<JobRecord>> JobStore::GetJobOn(sqlite3* db, const std::string& id) {
  const std::string sql = std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = ?";
  SqlStmt s(db, sql.c_str());
  ANNEAL_RETURN_IF_ERROR(s.prepared());
  s.Bind(1, id);
  Status st;
  if (!s.Step(&st)) {
    ANNEAL_RETURN_IF_ERROR(st);
    return std::optional<JobRecord>();
  }
  ANNEAL_ASSIGN_OR_RETURN(JobRecord r, ReadJob(s));
  return std::optional<JobRecord>(std::move(r));
}

Result<std::optional<JobRecord>> JobStore::GetJob(const std::string& id) {
  Reader r(this);  // no lock on the writer (WAL)
  return GetJobOn(r.db(), id);
}

Result<std::vector<JobRecord>> JobStore::ListJobs(int limit, bool active_only, int64_t before_seq,
                                                  const std::string& owner) {
  ListFilter f;
  f.active_only = active_only;
  f.before_seq = before_seq;
  f.owner = owner;
  return ListJobs(limit, f);
}

Result<std::vector<JobRecord>> JobStore::ListJobs(int limit, const ListFilter& f) {
  Reader r(this);  // no lock on the writer (WAL)
  // A listing needs only resources.instance_count of each spec: SQLite extracts it, so a page of 100
  // jobs does not parse 100 whole specs.
  std::string cols = kJobColumns;
  cols.replace(cols.find(" spec,"), 6,
               " json_extract(spec, '$.resources.instance_count'),");
  std::string sql = "SELECT " + cols + " FROM jobs WHERE seq < ?";
  if (f.active_only) sql += " AND primary_status IN ('InProgress', 'Stopping')";
  if (!f.owner.empty()) sql += " AND owner = ?";
  if (!f.status.empty()) sql += " AND (primary_status = ? OR phase = ?)";
  if (!f.name.empty()) sql += " AND name = ?";
  sql += " ORDER BY seq DESC LIMIT ?";
  SqlStmt s(r.db(), sql.c_str());
  ANNEAL_RETURN_IF_ERROR(s.prepared());
  int i = 1;
  s.Bind(i++, f.before_seq > 0 ? f.before_seq : INT64_MAX);
  if (!f.owner.empty()) s.Bind(i++, f.owner);
  if (!f.status.empty()) {
    s.Bind(i++, f.status);
    s.Bind(i++, f.status);
  }
  if (!f.name.empty()) s.Bind(i++, f.name);
  s.Bind(i, limit);
  return ReadJobs(s, /*summary=*/true);
}

Result<std::vector<JobRecord>> JobStore::ActiveJobs() {
  Reader r(this);  // no lock on the writer (WAL)
  const std::string sql = std::string("SELECT ") + kJobColumns +
                          " FROM jobs WHERE primary_status IN ('InProgress', 'Stopping') AND phase != 'Pending' ORDER BY seq";
  SqlStmt s(r.db(), sql.c_str());
  ANNEAL_RETURN_IF_ERROR(s.prepared());
  return ReadJobs(s);
}

Result<std::vector<JobRecord>> JobStore::PendingJobs(int limit) {
  Reader r(this);  // no lock on the writer (WAL)
  const std::string sql = std::string("SELECT ") + kJobColumns + " FROM jobs WHERE phase = 'Pending' ORDER BY seq LIMIT ?";
  SqlStmt s(r.db(), sql.c_str());
  ANNEAL_RETURN_IF_ERROR(s.prepared());
  s.Bind(1, limit);
  return ReadJobs(s);
}

Result<int64_t> JobStore::CountJobs() {
  Reader r(this);  // no lock on the writer (WAL)
  SqlStmt s(r.db(), "SELECT COUNT(*) FROM jobs");
  Status st;
  int64_t n = 0;
  if (s.Step(&st)) n = s.Int(0);
  ANNEAL_RETURN_IF_ERROR(st);
  return n;
}

Result<std::map<std::string, int64_t>> JobStore::CountJobsByPhase() {
  Reader r(this);  // no lock on the writer (WAL)
  SqlStmt s(r.db(), "SELECT phase, COUNT(*) FROM jobs GROUP BY phase");
  std::map<std::string, int64_t> out;
  Status st;
  while (s.Step(&st)) out[s.Text(0)] = s.Int(1);
  ANNEAL_RETURN_IF_ERROR(st);
  return out;
}

const char* StopCauseName(StopCause c) {
  switch (c) {
    case StopCause::kNone: return "";
    case StopCause::kRequest: return "request";
    case StopCause::kRequeue: return "requeue";
    case StopCause::kRuntime: return "max_runtime";
  }
  return "";
}

StopCause ParseStopCause(const std::string& name) {
  for (StopCause c : {StopCause::kRequest, StopCause::kRequeue, StopCause::kRuntime}) {
    if (name == StopCauseName(c)) return c;
  }
  return StopCause::kNone;
}

Status JobStore::Transition(const std::string& id, JobPhase to, const std::string& message, double now,
                            const std::string& failure_reason, int exit_code, StopCause stop) {
  std::lock_guard<std::mutex> l(mu_);
  return InTransaction([&]() -> Status {
    ANNEAL_ASSIGN_OR_RETURN(std::optional<JobRecord> j, GetJobOn(db_, id));
    if (!j) return NotFound("no job " + id);
    ANNEAL_RETURN_IF_ERROR(CheckTransition(j->phase, to).Annotate("job " + id));
    SqlStmt u(db_,
           "UPDATE jobs SET phase = ?, primary_status = ?, updated_at = ?, "
           "failure_reason = CASE WHEN ? = '' THEN failure_reason ELSE ? END, "
           "exit_code = CASE WHEN ? < 0 THEN exit_code ELSE ? END, "
           "started_at = CASE WHEN ? AND started_at = 0 THEN ? ELSE started_at END, "
           "ended_at = CASE WHEN ? THEN ? ELSE ended_at END WHERE id = ?");
    ANNEAL_RETURN_IF_ERROR(u.prepared());
    u.Bind(1, std::string(PhaseName(to))).Bind(2, std::string(PrimaryStatus(to))).Bind(3, now);
    u.Bind(4, failure_reason).Bind(5, failure_reason).Bind(6, exit_code).Bind(7, exit_code);
    u.Bind(8, static_cast<int>(to == JobPhase::kStarting)).Bind(9, now);
    u.Bind(10, static_cast<int>(IsTerminal(to))).Bind(11, now).Bind(12, id);
    ANNEAL_RETURN_IF_ERROR(u.Run());
    SqlStmt tr(db_, "INSERT INTO transitions(job_id, at, phase, message, stop_cause) VALUES(?,?,?,?,?)");
    tr.Bind(1, id).Bind(2, now).Bind(3, std::string(PhaseName(to))).Bind(4, message).Bind(5, std::string(StopCauseName(stop)));
    return tr.Run();
  });
}

Status JobStore::SetAttempt(const std::string& id, int attempt, double now) {
  std::lock_guard<std::mutex> l(mu_);
  SqlStmt u(db_, "UPDATE jobs SET attempt = ?, updated_at = ? WHERE id = ?");
  u.Bind(1, attempt).Bind(2, now).Bind(3, id);
  return u.Run();
}

Result<std::vector<TransitionRecord>> JobStore::History(const std::string& id) {
  Reader r(this);  // no lock on the writer (WAL)
  SqlStmt s(r.db(), "SELECT at, phase, message, stop_cause FROM transitions WHERE job_id = ? ORDER BY id");
  s.Bind(1, id);
  std::vector<TransitionRecord> out;
  Status st;
  while (s.Step(&st)) {
    TransitionRecord t;
    t.at = s.Real(0);
    ANNEAL_ASSIGN_OR_RETURN(t.phase, ParsePhase(s.Text(1)));
    t.message = s.Text(2);
    t.stop = ParseStopCause(s.Text(3));
    out.push_back(std::move(t));
  }
  ANNEAL_RETURN_IF_ERROR(st);
  return out;
}

Status JobStore::PutInstance(const InstanceRecord& r) {
  std::lock_guard<std::mutex> l(mu_);
  SqlStmt was(db_, "SELECT state FROM instances WHERE id = ?");
  was.Bind(1, r.id);
  Status wst;
  if (was.Step(&wst)) {
    ANNEAL_ASSIGN_OR_RETURN(InstanceState from, ParseInstanceState(was.Text(0)));
    if (!CanMoveInstance(from, r.state)) {
      return Internal("instance " + r.id + ": no move from " + InstanceStateName(from) + " to " + InstanceStateName(r.state));
    }
  } else {
    ANNEAL_RETURN_IF_ERROR(wst);
    if (!IsInitialInstanceState(r.state)) {
      return Internal("instance " + r.id + ": a new instance cannot start " + InstanceStateName(r.state));
    }
  }
  SqlStmt s(db_,
         "INSERT OR REPLACE INTO instances(id, job_id, node, address, instance_type, slots, state, backend, "
         "registered_at, last_heartbeat, pool_key, keep_until) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)");
  s.Bind(1, r.id).Bind(2, r.job_id).Bind(3, r.node).Bind(4, r.address).Bind(5, r.instance_type).Bind(6, r.slots);
  s.Bind(7, std::string(InstanceStateName(r.state))).Bind(8, r.backend).Bind(9, r.registered_at).Bind(10, r.last_heartbeat);
  s.Bind(11, r.pool_key).Bind(12, r.keep_until);
  return s.Run();
}

Result<std::optional<InstanceRecord>> JobStore::GetInstance(const std::string& id) {
  Reader r(this);  // no lock on the writer (WAL)
  SqlStmt s(r.db(),
         "SELECT id, job_id, node, address, instance_type, slots, state, backend, registered_at, last_heartbeat, "
         "pool_key, keep_until "
         "FROM instances WHERE id = ?");
  s.Bind(1, id);
  Status st;
  if (s.Step(&st)) {
    ANNEAL_ASSIGN_OR_RETURN(InstanceRecord r, ReadInstance(s));
    return std::optional<InstanceRecord>(std::move(r));
  }
  ANNEAL_RETURN_IF_ERROR(st);
  return std::optional<InstanceRecord>();
}

Result<std::vector<InstanceRecord>> JobStore::Instances() {
  Reader r(this);  // no lock on the writer (WAL)
  SqlStmt s(r.db(),
         "SELECT id, job_id, node, address, instance_type, slots, state, backend, registered_at, last_heartbeat, "
         "pool_key, keep_until "
         "FROM instances ORDER BY registered_at, id");
  std::vector<InstanceRecord> out;
  Status st;
  while (s.Step(&st)) {
    ANNEAL_ASSIGN_OR_RETURN(InstanceRecord r, ReadInstance(s));
    out.push_back(std::move(r));
  }
  ANNEAL_RETURN_IF_ERROR(st);
  return out;
}

Status JobStore::Heartbeat(const std::string& id, double now) {
  std::lock_guard<std::mutex> l(mu_);
  SqlStmt s(db_, "UPDATE instances SET last_heartbeat = ? WHERE id = ?");
  s.Bind(1, now).Bind(2, id);
  return s.Run();
}

Status JobStore::DeleteInstance(const std::string& id) {
  std::lock_guard<std::mutex> l(mu_);
  SqlStmt s(db_, "DELETE FROM instances WHERE id = ?");
  s.Bind(1, id);
  return s.Run();
}

Status JobStore::InTransaction(const std::function<Status()>& body) {
  ANNEAL_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  SqlRollbackGuard rollback(db_);  // on an error, a failed COMMIT or an exception
  ANNEAL_RETURN_IF_ERROR(body());
  ANNEAL_RETURN_IF_ERROR(Exec("COMMIT"));
  rollback.Done();
  return Status::Ok();
}

Status JobStore::AppendLogs(const std::string& job, const std::vector<LogLine>& lines) {
  std::lock_guard<std::mutex> l(mu_);
  return InTransaction([&]() -> Status {
    SqlStmt s(db_,
           "INSERT OR IGNORE INTO logs(job_id, attempt, node, seq, rank, stream, at, text) VALUES(?,?,?,?,?,?,?,?)");
    ANNEAL_RETURN_IF_ERROR(s.prepared());
    for (const LogLine& x : lines) {
      s.Bind(1, job).Bind(2, x.attempt).Bind(3, x.node).Bind(4, x.seq).Bind(5, x.rank).Bind(6, x.stream);
      s.Bind(7, x.at).Bind(8, x.text);
      ANNEAL_RETURN_IF_ERROR(s.Run());
      s.Reset();
    }
    return Status::Ok();
  });
}

Result<std::vector<LogLine>> JobStore::Logs(const std::string& job, int64_t after_id, int rank, int limit, double since) {
  Reader r(this);  // no lock on the writer (WAL)
  return SelectLogs(r.db(), job, after_id, rank, limit, since, false);
}

Result<std::vector<LogLine>> JobStore::TailLogs(const std::string& job, int64_t after_id, int rank, int n, double since) {
  Reader r(this);
  return SelectLogs(r.db(), job, after_id, rank, n, since, true);
}

Result<std::vector<LogLine>> JobStore::LastLogs(const std::string& job, int rank, int n) { return TailLogs(job, 0, rank, n); }

Result<std::vector<JobStore::RankMean>> JobStore::RankMeans(const std::string& job, const std::string& name) {
  Reader r(this);  // no lock on the writer (WAL)
  SqlStmt s(r.db(),
         "SELECT rank, AVG(value), COUNT(*) FROM metrics WHERE job_id = ? AND name = ? GROUP BY rank "
         "ORDER BY 2 DESC, rank");
  s.Bind(1, job).Bind(2, name);
  std::vector<RankMean> out;
  Status st;
  while (s.Step(&st)) out.push_back({static_cast<int>(s.Int(0)), s.Real(1), s.Int(2)});
  ANNEAL_RETURN_IF_ERROR(st);
  return out;
}

Status JobStore::AppendMetrics(const std::string& job, const std::vector<MetricPoint>& points) {
  std::lock_guard<std::mutex> l(mu_);
  return InTransaction([&]() -> Status {
    SqlStmt s(db_,
           "INSERT OR IGNORE INTO metrics(job_id, attempt, node, seq, name, rank, at, value, step) "
           "VALUES(?,?,?,?,?,?,?,?,?)");
    ANNEAL_RETURN_IF_ERROR(s.prepared());
    for (const MetricPoint& p : points) {
      s.Bind(1, job).Bind(2, p.attempt).Bind(3, p.node).Bind(4, p.seq).Bind(5, p.name).Bind(6, p.rank);
      s.Bind(7, p.at).Bind(8, p.value).Bind(9, p.step);
      ANNEAL_RETURN_IF_ERROR(s.Run());
      s.Reset();
    }
    return Status::Ok();
  });
}

Result<std::vector<MetricPoint>> JobStore::Metrics(const std::string& job, const std::string& name, int64_t after_id,
                                                   int limit) {
  Reader r(this);  // no lock on the writer (WAL)
  SqlStmt s(r.db(),
         "SELECT id, attempt, node, seq, name, rank, at, value, step FROM metrics WHERE job_id = ? AND id > ? "
         "AND (? = '' OR name = ?) ORDER BY id LIMIT ?");
  s.Bind(1, job).Bind(2, after_id).Bind(3, name).Bind(4, name).Bind(5, limit);
  std::vector<MetricPoint> out;
  Status st;
  while (s.Step(&st)) {
    MetricPoint p;
    p.id = s.Int(0);
    p.attempt = static_cast<int>(s.Int(1));
    p.node = static_cast<int>(s.Int(2));
    p.seq = s.Int(3);
    p.name = s.Text(4);
    p.rank = static_cast<int>(s.Int(5));
    p.at = s.Real(6);
    p.value = s.Real(7);
    p.step = s.Int(8);
    out.push_back(std::move(p));
  }
  ANNEAL_RETURN_IF_ERROR(st);
  return out;
}

Result<std::vector<MetricPoint>> JobStore::LatestMetrics(const std::string& job) {
  Reader r(this);  // no lock on the writer (WAL)
  SqlStmt s(r.db(),
         "SELECT m.attempt, m.node, m.name, m.rank, m.at, m.value, m.step FROM metrics m JOIN "
         "(SELECT MAX(id) AS id FROM metrics WHERE job_id = ? GROUP BY name, node, rank) l ON m.id = l.id ORDER BY m.name");
  s.Bind(1, job);
  std::vector<MetricPoint> out;
  Status st;
  while (s.Step(&st)) {
    MetricPoint p;
    p.attempt = static_cast<int>(s.Int(0));
    p.node = static_cast<int>(s.Int(1));
    p.name = s.Text(2);
    p.rank = static_cast<int>(s.Int(3));
    p.at = s.Real(4);
    p.value = s.Real(5);
    p.step = s.Int(6);
    out.push_back(std::move(p));
  }
  ANNEAL_RETURN_IF_ERROR(st);
  return out;
}

Status JobStore::PutNodeReport(const std::string& job, const NodeReport& r) {
  std::lock_guard<std::mutex> l(mu_);
  SqlStmt s(db_,
         "INSERT OR REPLACE INTO node_reports(job_id, attempt, node, state, exit_code, message, at, cause, local, "
         "failed_rank, sandbox) VALUES(?,?,?,?,?,?,?,?,?,?,?)");
  s.Bind(1, job).Bind(2, r.attempt).Bind(3, r.node).Bind(4, std::string(NodeStateName(r.state))).Bind(5, r.exit_code).Bind(6, r.message).Bind(7, r.at);
  s.Bind(8, r.cause).Bind(9, static_cast<int>(r.local)).Bind(10, r.failed_rank).Bind(11, r.sandbox);
  return s.Run();
}

Result<std::vector<NodeReport>> JobStore::NodeReports(const std::string& job, int attempt) {
  Reader r(this);  // no lock on the writer (WAL)
  SqlStmt s(r.db(),
         "SELECT attempt, node, state, exit_code, message, at, cause, local, failed_rank, sandbox FROM node_reports "
         "WHERE job_id = ? AND attempt = ? ORDER BY node");
  s.Bind(1, job).Bind(2, attempt);
  std::vector<NodeReport> out;
  Status st;
  while (s.Step(&st)) {
    NodeReport r;
    r.attempt = static_cast<int>(s.Int(0));
    r.node = static_cast<int>(s.Int(1));
    // (An older server stored any text an agent sent: read as the least advanced state.)
    r.state = ParseNodeState(s.Text(2)).value_or(NodeState::kDownloading);
    r.exit_code = static_cast<int>(s.Int(3));
    r.message = s.Text(4);
    r.at = s.Real(5);
    r.cause = s.Text(6);
    r.local = s.Int(7) != 0;
    r.failed_rank = static_cast<int>(s.Int(8));
    r.sandbox = s.Text(9);
    out.push_back(std::move(r));
  }
  ANNEAL_RETURN_IF_ERROR(st);
  return out;
}

Result<std::string> JobStore::SetMeeting(const std::string& job, int attempt, int round, const std::string& value) {
  {
    std::lock_guard<std::mutex> l(mu_);
    SqlStmt s(db_, "INSERT OR IGNORE INTO meetings(job_id, attempt, round, value) VALUES(?,?,?,?)");
    s.Bind(1, job).Bind(2, attempt).Bind(3, round).Bind(4, value);
    ANNEAL_RETURN_IF_ERROR(s.Run());
  }
  ANNEAL_ASSIGN_OR_RETURN(std::optional<std::string> v, GetMeeting(job, attempt, round));
  if (!v) return Internal("the meeting of " + job + " vanished");
  return *v;
}

Result<std::optional<std::string>> JobStore::GetMeeting(const std::string& job, int attempt, int round) {
  Reader r(this);  // no lock on the writer (WAL)
  SqlStmt s(r.db(), "SELECT value FROM meetings WHERE job_id = ? AND attempt = ? AND round = ?");
  s.Bind(1, job).Bind(2, attempt).Bind(3, round);
  Status st;
  if (s.Step(&st)) return std::optional<std::string>(s.Text(0));
  ANNEAL_RETURN_IF_ERROR(st);
  return std::optional<std::string>();
}

Result<std::vector<EventRecord>> JobStore::EventsAfter(int64_t after_id, int limit) {
  Reader r(this);  // no lock on the writer (WAL)
  SqlStmt s(r.db(),
         "SELECT t.id, t.job_id, j.owner, j.attempt, t.at, t.phase, t.message FROM transitions t "
         "JOIN jobs j ON j.id = t.job_id WHERE t.id > ? ORDER BY t.id LIMIT ?");
  s.Bind(1, after_id).Bind(2, limit);
  std::vector<EventRecord> out;
  Status st;
  while (s.Step(&st)) {
    EventRecord e;
    e.id = s.Int(0);
    e.job_id = s.Text(1);
    e.owner = s.Text(2);
    e.attempt = static_cast<int>(s.Int(3));
    e.at = s.Real(4);
    ANNEAL_ASSIGN_OR_RETURN(e.phase, ParsePhase(s.Text(5)));
    e.message = s.Text(6);
    out.push_back(std::move(e));
  }
  ANNEAL_RETURN_IF_ERROR(st);
  return out;
}

Status JobStore::SetWarmPool(const std::string& id, const nlohmann::json& pool) {
  std::lock_guard<std::mutex> l(mu_);
  SqlStmt s(db_, "UPDATE jobs SET warm_pool = ? WHERE id = ?");
  s.Bind(1, pool.is_null() ? std::string() : pool.dump()).Bind(2, id);
  return s.Run();
}

Status JobStore::PutHealth(const std::string& job, int attempt, const HealthRecord& r) {
  std::lock_guard<std::mutex> l(mu_);
  SqlStmt s(db_,
         "INSERT OR REPLACE INTO health_checks(job_id, attempt, instance_id, node, ok, result, at) VALUES(?,?,?,?,?,?,?)");
  s.Bind(1, job).Bind(2, attempt).Bind(3, r.instance_id).Bind(4, r.node).Bind(5, r.ok ? 1 : 0);
  s.Bind(6, r.result.dump()).Bind(7, r.at);
  return s.Run();
}

Result<std::vector<HealthRecord>> JobStore::Health(const std::string& job, int attempt) {
  Reader r(this);  // no lock on the writer (WAL)
  SqlStmt s(r.db(),
         "SELECT instance_id, node, ok, result, at FROM health_checks WHERE job_id = ? AND attempt = ? ORDER BY at, node");
  s.Bind(1, job).Bind(2, attempt);
  std::vector<HealthRecord> out;
  Status st;
  while (s.Step(&st)) {
    HealthRecord r;
    r.instance_id = s.Text(0);
    r.node = static_cast<int>(s.Int(1));
    r.ok = s.Int(2) != 0;
    r.result = nlohmann::json::parse(s.Text(3), nullptr, false);
    r.at = s.Real(4);
    out.push_back(std::move(r));
  }
  ANNEAL_RETURN_IF_ERROR(st);
  return out;
}

namespace {

UserRecord ReadUser(const SqlStmt& s) {
  UserRecord u;
  u.name = s.Text(0);
  u.role = s.Text(1);
  u.max_instances = static_cast<int>(s.Int(2));
  u.created_at = s.Real(3);
  return u;
}

TokenRecord ReadToken(const SqlStmt& s) {
  TokenRecord t;
  t.id = s.Text(0);
  t.principal = s.Text(1);
  t.kind = s.Text(2);
  t.sha256 = s.Text(3);
  t.description = s.Text(4);
  t.created_at = s.Real(5);
  t.expires_at = s.Real(6);
  t.last_used_at = s.Real(7);
  return t;
}

constexpr const char* kTokenColumns =
    "SELECT id, principal, kind, sha256, description, created_at, expires_at, last_used_at FROM tokens";

}  // namespace

Status JobStore::PutUser(const UserRecord& u) {
  std::lock_guard<std::mutex> l(mu_);
  const AuthChange auth_change(this);  // no cached answer during the write; cleared after it
  SqlStmt s(db_, "INSERT OR REPLACE INTO users(name, role, max_instances, created_at) VALUES(?,?,?,?)");
  s.Bind(1, u.name).Bind(2, u.role).Bind(3, u.max_instances).Bind(4, u.created_at);
  return s.Run();
}

Result<std::optional<UserRecord>> JobStore::GetUser(const std::string& name) {
  uint64_t gen = 0;
  {
    std::lock_guard<std::mutex> c(cache_mu_);
    if (auto it = user_cache_.find(name); it != user_cache_.end()) return std::optional<UserRecord>(it->second);
    gen = cache_gen_;
  }
  Reader r(this);
  SqlStmt s(r.db(), "SELECT name, role, max_instances, created_at FROM users WHERE name = ?");
  s.Bind(1, name);
  Status st;
  if (s.Step(&st)) {
    UserRecord u = ReadUser(s);
    std::lock_guard<std::mutex> c(cache_mu_);
    if (gen == cache_gen_) user_cache_[name] = u;  // not if a change cleared the cache meanwhile
    return std::optional<UserRecord>(u);
  }
  ANNEAL_RETURN_IF_ERROR(st);
  return std::optional<UserRecord>();
}

Result<std::vector<UserRecord>> JobStore::Users() {
  Reader r(this);  // no lock on the writer (WAL)
  SqlStmt s(r.db(), "SELECT name, role, max_instances, created_at FROM users ORDER BY name");
  std::vector<UserRecord> out;
  Status st;
  while (s.Step(&st)) out.push_back(ReadUser(s));
  ANNEAL_RETURN_IF_ERROR(st);
  return out;
}

Status JobStore::DeleteUser(const std::string& name) {
  std::lock_guard<std::mutex> l(mu_);
  const AuthChange auth_change(this);  // no cached answer during the write; cleared after it
  return InTransaction([&]() -> Status {
    SqlStmt t(db_, "DELETE FROM tokens WHERE principal = ? AND kind = 'user'");
    t.Bind(1, name);
    ANNEAL_RETURN_IF_ERROR(t.Run());
    SqlStmt u(db_, "DELETE FROM users WHERE name = ?");
    u.Bind(1, name);
    return u.Run();
  });
}

Status JobStore::PutToken(const TokenRecord& t) {
  std::lock_guard<std::mutex> l(mu_);
  const AuthChange auth_change(this);  // no cached answer during the write; cleared after it
  SqlStmt s(db_,
            "INSERT OR REPLACE INTO tokens(id, principal, kind, sha256, description, created_at, expires_at, last_used_at) "
            "VALUES(?,?,?,?,?,?,?,?)");
  s.Bind(1, t.id).Bind(2, t.principal).Bind(3, t.kind).Bind(4, t.sha256).Bind(5, t.description).Bind(6, t.created_at);
  s.Bind(7, t.expires_at).Bind(8, t.last_used_at);
  return s.Run();
}

Status JobStore::TouchToken(const std::string& id, double now) {
  std::lock_guard<std::mutex> l(mu_);
  const AuthChange auth_change(this);  // the cached record's last use is refreshed
  SqlStmt s(db_, "UPDATE tokens SET last_used_at = ? WHERE id = ?");
  s.Bind(1, now).Bind(2, id);
  return s.Run();
}

Result<std::optional<TokenRecord>> JobStore::FindToken(const std::string& sha256) {
  uint64_t gen = 0;
  {
    std::lock_guard<std::mutex> c(cache_mu_);
    if (auto it = token_cache_.find(sha256); it != token_cache_.end()) return std::optional<TokenRecord>(it->second);
    gen = cache_gen_;
  }
  Reader r(this);
  const std::string sql = std::string(kTokenColumns) + " WHERE sha256 = ?";
  SqlStmt s(r.db(), sql.c_str());
  s.Bind(1, sha256);
  Status st;
  if (s.Step(&st)) {
    TokenRecord t = ReadToken(s);
    std::lock_guard<std::mutex> c(cache_mu_);
    // Only known tokens (unknown ones cannot grow the cache), and not if a change (a revocation)
    // cleared the cache while this one was read.
    if (gen == cache_gen_) token_cache_[sha256] = t;
    return std::optional<TokenRecord>(t);
  }
  ANNEAL_RETURN_IF_ERROR(st);
  return std::optional<TokenRecord>();
}

Result<std::vector<TokenRecord>> JobStore::Tokens(const std::string& principal) {
  Reader r(this);  // no lock on the writer (WAL)
  const std::string sql = std::string(kTokenColumns) + (principal.empty() ? "" : " WHERE principal = ?") + " ORDER BY created_at, id";
  SqlStmt s(r.db(), sql.c_str());
  if (!principal.empty()) s.Bind(1, principal);
  std::vector<TokenRecord> out;
  Status st;
  while (s.Step(&st)) out.push_back(ReadToken(s));
  ANNEAL_RETURN_IF_ERROR(st);
  return out;
}

Status JobStore::DeleteToken(const std::string& id) {
  std::lock_guard<std::mutex> l(mu_);
  const AuthChange auth_change(this);  // no cached answer during the write; cleared after it
  SqlStmt s(db_, "DELETE FROM tokens WHERE id = ?");
  s.Bind(1, id);
  ANNEAL_RETURN_IF_ERROR(s.Run());
  if (sqlite3_changes(db_) == 0) return NotFound("no token " + id + " (list them with anneal tokens list)");
  return Status::Ok();
}

Status JobStore::DeleteTokensOf(const std::string& principal, const std::string& kind) {
  std::lock_guard<std::mutex> l(mu_);
  const AuthChange auth_change(this);  // no cached answer during the write; cleared after it
  SqlStmt s(db_, "DELETE FROM tokens WHERE principal = ? AND kind = ?");
  s.Bind(1, principal).Bind(2, kind);
  return s.Run();
}

Status JobStore::PutPackage(const std::string& sha256, const std::string& owner, int64_t bytes, double now) {
  std::lock_guard<std::mutex> l(mu_);
  SqlStmt s(db_, "INSERT OR REPLACE INTO packages(sha256, owner, bytes, uploaded_at) VALUES(?,?,?,?)");
  s.Bind(1, sha256).Bind(2, owner).Bind(3, bytes).Bind(4, now);
  return s.Run();
}

Result<int64_t> JobStore::PackageBytesOf(const std::string& owner) {
  Reader r(this);
  SqlStmt s(r.db(), "SELECT COALESCE(SUM(bytes), 0) FROM packages WHERE owner = ?");
  s.Bind(1, owner);
  Status st;
  if (s.Step(&st)) return s.Int(0);
  ANNEAL_RETURN_IF_ERROR(st);
  return int64_t{0};
}

Result<std::vector<std::string>> JobStore::ForgetPackagesBefore(double before, const std::set<std::string>& keep) {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::pair<std::string, std::string>> old;
  {
    SqlStmt s(db_, "SELECT sha256, owner FROM packages WHERE uploaded_at < ?");
    s.Bind(1, before);
    Status st;
    while (s.Step(&st)) old.push_back({s.Text(0), s.Text(1)});
    ANNEAL_RETURN_IF_ERROR(st);
  }
  for (const auto& [sha, owner] : old) {
    if (keep.count(sha)) continue;
    SqlStmt d(db_, "DELETE FROM packages WHERE sha256 = ? AND owner = ?");
    d.Bind(1, sha).Bind(2, owner);
    ANNEAL_RETURN_IF_ERROR(d.Run());
  }
  std::vector<std::string> unowned;  // no record left: the file may go
  for (const auto& [sha, owner] : old) {
    if (keep.count(sha)) continue;
    SqlStmt c(db_, "SELECT COUNT(*) FROM packages WHERE sha256 = ?");
    c.Bind(1, sha);
    Status st;
    if (c.Step(&st) && c.Int(0) == 0 && (unowned.empty() || unowned.back() != sha)) unowned.push_back(sha);
    ANNEAL_RETURN_IF_ERROR(st);
  }
  return unowned;
}

Result<std::optional<std::string>> JobStore::GetValue(const std::string& key) {
  Reader r(this);  // no lock on the writer (WAL)
  SqlStmt s(r.db(), "SELECT value FROM kv WHERE key = ?");
  s.Bind(1, key);
  Status st;
  if (s.Step(&st)) return std::optional<std::string>(s.Text(0));
  ANNEAL_RETURN_IF_ERROR(st);
  return std::optional<std::string>();
}

Status JobStore::SetValue(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> l(mu_);
  SqlStmt s(db_, "INSERT OR REPLACE INTO kv(key, value) VALUES(?,?)");
  s.Bind(1, key).Bind(2, value);
  return s.Run();
}

}  // namespace anneal
