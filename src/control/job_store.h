// JobStore: the control plane's durable state in one SQLite file (docs/formats/job-store.md has the
// schema). WAL journal, synchronous=NORMAL for logs and metrics but every status change in its own
// committed transaction, and submits synced to disk before they are answered (CreateJob); schema
// migrations by PRAGMA user_version. Restarting the server re-opens the file and finds every job,
// instance, log line and metric point as it was (after a crash of the machine too: every submit).
//
// Thread-safety: every method may be called from any thread (writes on one connection behind a
// mutex; reads on a pool of read-only connections, without it).
// Failure: SQLite errors are IoError naming the statement and the file; a status change the state
// machine does not allow is Internal (job_state.h).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/instance_state.h"
#include "protocol/job_definition.h"
#include "control/job_state.h"
#include "protocol/records.h"
#include "core/status.h"

struct sqlite3;

namespace anneal {

struct JobRecord {
  int64_t seq = 0;  // submission order
  std::string id, name, owner;
  // Typed, parsed from the stored normalized document (JobSpec::ToJson) when the record is read. A
  // listing's records (ListJobs) carry only spec.instance_count.
  JobSpec spec;
  JobPhase phase = JobPhase::kPending;
  std::string failure_reason;
  int exit_code = -1;  // -1 until the job ends
  int attempt = 0;
  double created_at = 0, updated_at = 0, started_at = 0, ended_at = 0;
  // The warm pool this job's instances formed when it ended (resources.keep_alive_s), null if none:
  // {"status": Available|InUse|Reused|Terminated, "expires_at", "instances", "reused_by"}.
  nlohmann::json warm_pool;
  std::string idempotency_key;  // the submit's Idempotency-Key ("" = none)
};

// Why a job went to Stopping, recorded with that transition (what the scheduler does when its ranks
// end depends on it): a user's stop request, a requeue (anneal stop --requeue: the job goes back to
// the queue), or max_runtime_s. kNone on every other transition.
enum class StopCause { kNone, kRequest, kRequeue, kRuntime };
// Its name in the store: "", "request", "requeue", "max_runtime".
const char* StopCauseName(StopCause c);
StopCause ParseStopCause(const std::string& name);  // an unknown name: kNone

struct TransitionRecord {
  double at = 0;
  JobPhase phase = JobPhase::kPending;
  std::string message;
  StopCause stop = StopCause::kNone;
};

struct InstanceRecord {
  std::string id;
  std::string job_id;  // "" when idle
  int node = -1;       // the instance's index in its job
  std::string address;
  std::string instance_type;
  int slots = 1;
  InstanceState state = InstanceState::kRequested;  // control/instance_state.h
  std::string backend;  // local | static
  double registered_at = 0, last_heartbeat = 0;
  // Warm pool (state available): what a job must match to reuse it, and until when it is kept.
  std::string pool_key;
  double keep_until = 0;
};

// The instances holding `job` now (neither released nor kept as a warm pool), by node.
std::vector<InstanceRecord> InstancesHolding(const std::vector<InstanceRecord>& all, const std::string& job);

// A status change with its job, for event delivery (webhooks) in the order they happened.
struct EventRecord {
  int64_t id = 0;  // ascending
  std::string job_id, owner;
  int attempt = 0;
  double at = 0;
  JobPhase phase = JobPhase::kPending;
  std::string message;
};

struct UserRecord {
  std::string name;
  std::string role;        // admin | user | viewer
  int max_instances = -1;  // instances across the user's running jobs; -1: the server's default
  double created_at = 0;
};

// A bearer token: only the SHA-256 of its secret is stored.
struct TokenRecord {
  std::string id;         // public, for listing and revoking ("tok-..." / "agt-...")
  std::string principal;  // the user, or the instance id of an agent token
  std::string kind;       // user | agent | join
  std::string sha256;
  std::string description;
  double created_at = 0;
  double expires_at = 0;    // 0: never (service tokens, agents' tokens)
  double last_used_at = 0;  // refreshed at most once a minute (control/auth.cc)
};

struct HealthRecord {
  std::string instance_id;
  int node = 0;
  bool ok = false;
  nlohmann::json result;  // agent/health_check.h
  double at = 0;
};

class JobStore {
 public:
  // Opens (creating if missing) the database file and migrates it to the current schema.
  static Result<std::unique_ptr<JobStore>> Open(const std::string& path);
  ~JobStore();

  static constexpr int kSchemaVersion = 10;

  // A submit (control/job_submit.cc): a new job in Pending, its id "<name>-<submission number, 4+
  // digits>". idempotency_key non-empty: (owner, key) names one job for ever; a submit with a key
  // already used returns that job (existed) and creates nothing.
  struct NewJob {
    std::string name, owner;
    JobSpec spec;  // stored as its normalized JSON
    std::string idempotency_key;
  };
  struct Created {
    JobRecord job;
    bool existed = false;
  };
  // Durable when it returns: the commit is synced to disk (synchronous=FULL for it, where the store
  // is NORMAL otherwise). Submits arriving while one commit is being synced wait and are committed
  // together in the next (group commit: one sync for a batch, each submit in its own savepoint, so a
  // bad one fails alone).
  Result<Created> CreateJob(const NewJob& j, double now);
  Result<std::optional<JobRecord>> GetJob(const std::string& id);
  // Newest first; active_only: not terminal. before_seq > 0: only jobs submitted before it (paging).
  // The records' spec holds only instance_count (GetJob has the whole spec).
  // owner non-empty: only that user's jobs.
  Result<std::vector<JobRecord>> ListJobs(int limit, bool active_only, int64_t before_seq = 0,
                                          const std::string& owner = "");
  // GET /v1/jobs's filters, each empty for any: status is a primary status (InProgress, Completed, …)
  // or a secondary one (Training, …), spelt as the store keeps it; name is the job's name (its id
  // without the -NNNN).
  struct ListFilter {
    bool active_only = false;
    int64_t before_seq = 0;
    std::string owner, status, name;
  };
  Result<std::vector<JobRecord>> ListJobs(int limit, const ListFilter& f);
  // Every job started and not yet terminal (not Pending), in submission order.
  Result<std::vector<JobRecord>> ActiveJobs();
  // The oldest Pending jobs, at most limit, in submission order (the scheduler's queue head).
  Result<std::vector<JobRecord>> PendingJobs(int limit);
  // Moves the job (checked by the state machine) and records the transition, in one transaction.
  // failure_reason / exit_code are stored when given (non-empty / >= 0); `stop` with a move to Stopping.
  Status Transition(const std::string& id, JobPhase to, const std::string& message, double now,
                    const std::string& failure_reason = "", int exit_code = -1, StopCause stop = StopCause::kNone);
  Status SetAttempt(const std::string& id, int attempt, double now);
  Result<std::vector<TransitionRecord>> History(const std::string& id);
  // Every status change (of every job) with id > after_id, oldest first.
  Result<std::vector<EventRecord>> EventsAfter(int64_t after_id, int limit);
  Status SetWarmPool(const std::string& id, const nlohmann::json& pool);
  Result<int64_t> CountJobs();
  // Jobs per secondary status ("Training" -> 3), for /metrics.
  Result<std::map<std::string, int64_t>> CountJobsByPhase();

  // Creates or replaces the record; its state must be a move instance_state.h allows from the stored
  // one (or an initial state for a new record), else Internal naming both.
  Status PutInstance(const InstanceRecord& r);
  Result<std::optional<InstanceRecord>> GetInstance(const std::string& id);
  Result<std::vector<InstanceRecord>> Instances();
  Status Heartbeat(const std::string& id, double now);
  Status DeleteInstance(const std::string& id);

  // Inserts lines a node sent; a (job, attempt, node, seq) already stored is skipped.
  Status AppendLogs(const std::string& job, const std::vector<LogLine>& lines);
  // Lines with id > after_id, oldest first; rank >= -1 filters by rank (-2: all ranks).
  // since > 0: only lines whose time (`at`, the agent's clock) is at or after it.
  Result<std::vector<LogLine>> Logs(const std::string& job, int64_t after_id, int rank, int limit, double since = 0);
  // The last n of the lines Logs(job, after_id, rank, ∞, since) would return, oldest first.
  Result<std::vector<LogLine>> TailLogs(const std::string& job, int64_t after_id, int rank, int n, double since = 0);
  // The last n lines of one rank (-1: the agent), oldest first.
  Result<std::vector<LogLine>> LastLogs(const std::string& job, int rank, int n);
  Status AppendMetrics(const std::string& job, const std::vector<MetricPoint>& points);
  // name "" = all; oldest first.
  Result<std::vector<MetricPoint>> Metrics(const std::string& job, const std::string& name, int64_t after_id, int limit);
  // The newest point of each (name, node, rank) of the job, for /metrics.
  Result<std::vector<MetricPoint>> LatestMetrics(const std::string& job);

  // Per rank: the mean and count of a metric's values, slowest (largest mean) first.
  struct RankMean {
    int rank = 0;
    double mean = 0;
    int64_t count = 0;
  };
  Result<std::vector<RankMean>> RankMeans(const std::string& job, const std::string& name);

  Status PutNodeReport(const std::string& job, const NodeReport& r);
  Result<std::vector<NodeReport>> NodeReports(const std::string& job, int attempt);

  Status PutHealth(const std::string& job, int attempt, const HealthRecord& r);
  Result<std::vector<HealthRecord>> Health(const std::string& job, int attempt);

  Status PutUser(const UserRecord& u);
  Result<std::optional<UserRecord>> GetUser(const std::string& name);
  Result<std::vector<UserRecord>> Users();
  // Removes the user and every token of theirs.
  Status DeleteUser(const std::string& name);
  Status PutToken(const TokenRecord& t);
  Status TouchToken(const std::string& id, double now);  // sets last_used_at
  Result<std::optional<TokenRecord>> FindToken(const std::string& sha256);
  // principal "" = all.
  Result<std::vector<TokenRecord>> Tokens(const std::string& principal);
  // Removes one token by id (NotFound if none), or every token of a principal.
  Status DeleteToken(const std::string& id);
  Status DeleteTokensOf(const std::string& principal, const std::string& kind);

  // Small named values (the webhook sender's cursor).
  // Packages (POST /v1/packages): who uploaded which, for the per-user quota and the clean-up.
  Status PutPackage(const std::string& sha256, const std::string& owner, int64_t bytes, double now);
  Result<int64_t> PackageBytesOf(const std::string& owner);
  // Forgets the uploads older than `before` of packages not in `keep`; returns the packages no upload
  // record names any more (their files may be deleted).
  Result<std::vector<std::string>> ForgetPackagesBefore(double before, const std::set<std::string>& keep);
  Result<std::optional<std::string>> GetValue(const std::string& key);
  Status SetValue(const std::string& key, const std::string& value);

  // A meeting's value (protocol/wire.h's MeetingKey): the first one set for (job, attempt, round)
  // wins; returns the stored one.
  Result<std::string> SetMeeting(const std::string& job, int attempt, int round, const std::string& value);
  Result<std::optional<std::string>> GetMeeting(const std::string& job, int attempt, int round);

 private:
  explicit JobStore(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  Status Exec(const std::string& sql);
  // BEGIN IMMEDIATE, body, then COMMIT, or ROLLBACK and body's error. mu_ held.
  Status InTransaction(const std::function<Status()>& body);
  Status Migrate();
  Result<std::optional<JobRecord>> GetJobOn(sqlite3* db, const std::string& id);
  // Reads run on read-only connections (WAL: a reader sees the last commit and neither waits for
  // the writer nor makes it wait), borrowed one per call; writes on db_ behind mu_.
  static constexpr int kReaders = 4;
  Status OpenReaders();
  class Reader {
   public:
    explicit Reader(JobStore* s);
    ~Reader();
    sqlite3* db() const { return db_; }

   private:
    JobStore* s_;
    sqlite3* db_ = nullptr;
  };
  // Group commit of submits (job_submit.cc).
  struct SubmitWait;
  void CommitSubmits(const std::vector<SubmitWait*>& batch);
  Status InsertJobLocked(const NewJob& j, double now, Created* out);

  // Tokens and users as last read, for the lookup every API request makes; cleared by every change
  // to either table (this process is the store's only writer), so a revocation counts at once. Its
  // own lock (cache_mu_): a lookup never holds it while SQLite works, so a request's authentication
  // does not wait for a submit's sync. cache_gen_ counts clears, so a lookup that read the table
  // before a change does not put back what the change removed.
  // AuthChange guards a write to users or tokens (mu_ held): it holds cache_mu_ for the write, so no
  // lookup is answered from the cache meanwhile, and clears the cache when the write is done
  // (success or not). Such writes are rare.
  struct AuthChange {
    explicit AuthChange(JobStore* st) : s(st), l(st->cache_mu_) {}
    ~AuthChange() {
      s->token_cache_.clear();
      s->user_cache_.clear();
      ++s->cache_gen_;
    }
    JobStore* s;
    std::lock_guard<std::mutex> l;
  };

  sqlite3* db_;
  std::string path_;
  std::mutex mu_;
  std::mutex cache_mu_;
  std::map<std::string, TokenRecord> token_cache_;  // by sha256; cache_mu_
  std::map<std::string, UserRecord> user_cache_;    // by name; cache_mu_
  uint64_t cache_gen_ = 0;                          // cache_mu_
  std::mutex readers_mu_;                // free_readers_
  std::condition_variable readers_cv_;   // a reader was given back
  std::vector<sqlite3*> readers_, free_readers_;
  std::mutex submit_mu_;                     // submit_queue_, committing_
  std::condition_variable submit_cv_;        // a batch of submits was committed
  std::vector<SubmitWait*> submit_queue_;    // waiting for the next commit
  bool committing_ = false;                  // a submit thread is writing a batch
};

}  // namespace anneal
