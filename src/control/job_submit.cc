// JobStore::CreateJob: durable, idempotent submits by group commit (job_store.h).
//
// A submit is answered 2xx only after its row is synced to disk. One sync per submit would cap the
// server at the disk's sync rate, so submits that arrive while a commit is being written queue up and
// the first of them (the leader) writes the whole queue in the next transaction: one sync for a
// batch, however many clients wait. Each submit runs in its own savepoint, so one that fails (a bad
// row) is rolled back alone and the others commit.
#include <sqlite3.h>

#include <cstdio>

#include "control/job_store.h"
#include "control/sql_stmt.h"

namespace anneal {

struct JobStore::SubmitWait {
  const NewJob* in = nullptr;
  double now = 0;
  Status st;
  Created out;
  bool done = false;  // submit_mu_
};

Result<JobStore::Created> JobStore::CreateJob(const NewJob& j, double now) {
  SubmitWait w;
  w.in = &j;
  w.now = now;
  std::unique_lock<std::mutex> l(submit_mu_);
  submit_queue_.push_back(&w);
  while (!w.done) {
    if (committing_) {
      submit_cv_.wait(l);
      continue;
    }
    committing_ = true;  // this thread leads the next batch: everything queued so far
    std::vector<SubmitWait*> batch;
    batch.swap(submit_queue_);
    l.unlock();
    CommitSubmits(batch);
    l.lock();
    committing_ = false;
    for (SubmitWait* b : batch) b->done = true;
    submit_cv_.notify_all();
  }
  if (!w.st.ok()) return w.st;
  return std::move(w.out);
}

void JobStore::CommitSubmits(const std::vector<SubmitWait*>& batch) {
  std::lock_guard<std::mutex> l(mu_);
  // FULL in WAL mode syncs the log at this commit; the store's other writes stay NORMAL.
  Status st = Exec("PRAGMA synchronous=FULL");
  if (st.ok()) {
    st = InTransaction([&]() -> Status {
      for (SubmitWait* w : batch) {  // each submit its own savepoint: one refused leaves the others
        w->st = Exec("SAVEPOINT submit");
        if (w->st.ok()) {
          try {  // one submit's exception must fail it alone, not the batch's waiters
            w->st = InsertJobLocked(*w->in, w->now, &w->out);
          } catch (const std::exception& e) {
            w->st = InvalidInput(std::string("the job cannot be stored: ") + e.what());
          }
        }
        if (!w->st.ok()) (void)Exec("ROLLBACK TO submit");
        (void)Exec("RELEASE submit");
      }
      return Status::Ok();
    });
  }
  (void)Exec("PRAGMA synchronous=NORMAL");
  if (st.ok()) return;
  for (SubmitWait* w : batch) w->st = st.Annotate("committing " + std::to_string(batch.size()) + " submit(s)");
}

Status JobStore::InsertJobLocked(const NewJob& j, double now, Created* out) {
  if (!j.idempotency_key.empty()) {
    // (the `!= ''` lets SQLite use the partial index jobs_idempotency instead of scanning every job)
    SqlStmt find(db_, "SELECT id FROM jobs WHERE owner = ? AND idempotency_key = ? AND idempotency_key != ''");
    ANNEAL_RETURN_IF_ERROR(find.prepared());
    find.Bind(1, j.owner).Bind(2, j.idempotency_key);
    Status st;
    if (find.Step(&st)) {
      ANNEAL_ASSIGN_OR_RETURN(std::optional<JobRecord> had, GetJobOn(db_, find.Text(0)));
      if (!had) return Internal("job store: the job of idempotency key " + j.idempotency_key + " vanished");
      out->job = std::move(*had);
      out->existed = true;
      return Status::Ok();
    }
    ANNEAL_RETURN_IF_ERROR(st);
  }
  SqlStmt next(db_, "SELECT COALESCE(MAX(seq), 0) + 1 FROM jobs");
  Status st;
  int64_t seq = 1;
  if (next.Step(&st)) seq = next.Int(0);
  ANNEAL_RETURN_IF_ERROR(st);
  char num[32];
  std::snprintf(num, sizeof(num), "%04lld", static_cast<long long>(seq));
  const std::string id = j.name + "-" + num;
  const std::string phase = PhaseName(JobPhase::kPending);
  SqlStmt ins(db_,
              "INSERT INTO jobs(seq, id, name, owner, spec, phase, primary_status, created_at, updated_at, idempotency_key) "
              "VALUES(?,?,?,?,?,?,?,?,?,?)");
  ANNEAL_RETURN_IF_ERROR(ins.prepared());
  ins.Bind(1, seq).Bind(2, id).Bind(3, j.name).Bind(4, j.owner).Bind(5, j.spec.ToJson().dump()).Bind(6, phase);
  ins.Bind(7, std::string(PrimaryStatus(JobPhase::kPending))).Bind(8, now).Bind(9, now).Bind(10, j.idempotency_key);
  ANNEAL_RETURN_IF_ERROR(ins.Run());
  SqlStmt tr(db_, "INSERT INTO transitions(job_id, at, phase, message) VALUES(?,?,?,?)");
  tr.Bind(1, id).Bind(2, now).Bind(3, phase).Bind(4, std::string("submitted"));
  ANNEAL_RETURN_IF_ERROR(tr.Run());
  JobRecord& r = out->job;
  r.seq = seq;
  r.id = id;
  r.name = j.name;
  r.owner = j.owner;
  r.spec = j.spec;
  r.idempotency_key = j.idempotency_key;
  r.created_at = r.updated_at = now;
  out->existed = false;
  return Status::Ok();
}

}  // namespace anneal
