// Status and Result<T>: how every I/O, parse and RPC path in anneal reports failure.
//
// A Status is ok or carries a Code and a message. The message names what was wrong and what to do
// ("shard data/x.bin is truncated: header says 1000 tokens, file holds 998; re-run anneal prep").
// The Code decides the process exit code (DESIGN.md): kInvalidInput -> 2 (usage, config, data),
// kPeer -> 3 (a peer, store or the cluster failed), anything else -> 1. Library code never exits;
// the CLI maps a Status to an exit code once, in cli/main.cc.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "core/check.h"

namespace anneal {

enum class Code : int {
  kOk = 0,
  kInvalidInput,  // bad usage, config, spec or data: exit 2
  kNotFound,      // a file or key that should exist does not: exit 2 when it came from the user
  kIo,            // the local system failed (disk full, permission): exit 1
  kInternal,      // a bug or an unexpected state: exit 1
  kPeer,          // a peer, store or the cluster failed: exit 3
  kCancelled,     // the operation was stopped on request: exit 1
  kFailed,        // what the command ran (a job, a rank's program) failed, not anneal: exit 1
  kInterrupted,   // stopped by a signal after saving what it could: exit 128 + the signal (130, 143)
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  Status(Code code, std::string message, int signal) : code_(code), message_(std::move(message)), signal_(signal) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid input: <message>"; a kFailed status is its message alone (it names what failed).
  std::string ToString() const;
  // The signal of a kInterrupted status (0 otherwise).
  int signal() const { return signal_; }
  // Prefixes the message with context ("reading data/a.bin: ..."); keeps the code.
  Status Annotate(const std::string& context) const;
  // The process exit code this status maps to (0, 1, 2 or 3; 128 + the signal when interrupted).
  int ExitCode() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
  int signal_ = 0;
};

inline Status InvalidInput(std::string m) { return Status(Code::kInvalidInput, std::move(m)); }
inline Status NotFound(std::string m) { return Status(Code::kNotFound, std::move(m)); }
inline Status IoError(std::string m) { return Status(Code::kIo, std::move(m)); }
inline Status Internal(std::string m) { return Status(Code::kInternal, std::move(m)); }
inline Status PeerError(std::string m) { return Status(Code::kPeer, std::move(m)); }
inline Status Cancelled(std::string m) { return Status(Code::kCancelled, std::move(m)); }
inline Status Failed(std::string m) { return Status(Code::kFailed, std::move(m)); }
inline Status Interrupted(int signal, std::string m) { return Status(Code::kInterrupted, std::move(m), signal); }
// "SIGTERM", "SIGINT", ...; "signal N" for a number without a name.
std::string SignalName(int sig);

// Result<T> holds a T or a non-ok Status. value() on an error aborts (an invariant, not I/O).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).ok()) v_ = Status(Code::kInternal, "Result built from an ok Status");
  }
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { Check(); return std::get<T>(v_); }
  const T& value() const& { Check(); return std::get<T>(v_); }
  // By value on a temporary, so `for (auto& x : *Foo())` never dangles.
  T value() && { Check(); return std::move(std::get<T>(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T operator*() && { return std::move(*this).value(); }

 private:
  void Check() const {
    ANNEAL_CHECK(ok(), std::get<Status>(v_).ToString().c_str());  // the value of a failed Result
  }
  std::variant<T, Status> v_;
};

}  // namespace anneal

// Returns the status from the enclosing function when it is not ok.
#define ANNEAL_RETURN_IF_ERROR(expr)          \
  do {                                        \
    ::anneal::Status _st = (expr);            \
    if (!_st.ok()) return _st;                \
  } while (0)

#define ANNEAL_CONCAT_INNER(a, b) a##b
#define ANNEAL_CONCAT(a, b) ANNEAL_CONCAT_INNER(a, b)
// ANNEAL_ASSIGN_OR_RETURN(auto x, Foo()); declares x from a Result or returns its status.
#define ANNEAL_ASSIGN_OR_RETURN(lhs, expr) \
  ANNEAL_ASSIGN_OR_RETURN_IMPL(ANNEAL_CONCAT(_res_, __LINE__), lhs, expr)
#define ANNEAL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
