// SqlStmt: a prepared SQLite statement of the job store, finalized on scope exit; binding by
// position, stepping with errors as IoError naming the statement. SqlRollbackGuard: a transaction's
// end on every path. Internal to control/job_store*.cc.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>

#include "core/status.h"

namespace anneal {

// Rolls back the connection's open transaction when its scope ends, unless Done() was called after
// the COMMIT succeeded: an error returned, a failed COMMIT or an exception thrown (a handler's bad
// JSON) inside a transaction never leaves the writer's connection in it for the next request.
class SqlRollbackGuard {
 public:
  explicit SqlRollbackGuard(sqlite3* db) : db_(db) {}
  ~SqlRollbackGuard() {
    if (db_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  SqlRollbackGuard(const SqlRollbackGuard&) = delete;
  SqlRollbackGuard& operator=(const SqlRollbackGuard&) = delete;
  void Done() { db_ = nullptr; }

 private:
  sqlite3* db_;
};

class SqlStmt {
 public:
  SqlStmt(sqlite3* db, const char* sql) : db_(db), sql_(sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr); }
  ~SqlStmt() { sqlite3_finalize(s_); }
  Status prepared() const { return rc_ == SQLITE_OK ? Status::Ok() : Error(); }
  SqlStmt& Bind(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  SqlStmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  SqlStmt& Bind(int i, int v) { return Bind(i, static_cast<int64_t>(v)); }
  SqlStmt& Bind(int i, double v) {
    sqlite3_bind_double(s_, i, v);
    return *this;
  }
  // true: a row is ready; false: done. Errors through *st.
  bool Step(Status* st) {
    rc_ = sqlite3_step(s_);
    if (rc_ == SQLITE_ROW) return true;
    if (rc_ != SQLITE_DONE) *st = Error();
    return false;
  }
  Status Run() {
    Status st;
    while (Step(&st)) {
    }
    return st;
  }
  void Reset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  std::string Text(int c) const {
    const unsigned char* t = sqlite3_column_text(s_, c);
    return t ? std::string(reinterpret_cast<const char*>(t), sqlite3_column_bytes(s_, c)) : std::string();
  }
  int64_t Int(int c) const { return sqlite3_column_int64(s_, c); }
  double Real(int c) const { return sqlite3_column_double(s_, c); }

 private:
  Status Error() const { return IoError(std::string("job store: ") + sqlite3_errmsg(db_) + " (in: " + Short() + ")"); }
  std::string Short() const {
    std::string s(sql_);
    return s.size() > 60 ? s.substr(0, 60) + "..." : s;
  }
  sqlite3* db_;
  const char* sql_;
  sqlite3_stmt* s_ = nullptr;
  int rc_ = SQLITE_OK;
};

}  // namespace anneal
