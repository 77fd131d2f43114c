#include "core/status.h"

#include <string.h>

namespace anneal {

namespace {
const char* CodeName(Code c) {
  switch (c) {
    case Code::kOk: return "ok";
    case Code::kInvalidInput: return "invalid input";
    case Code::kNotFound: return "not found";
    case Code::kIo: return "i/o error";
    case Code::kInternal: return "internal error";
    case Code::kPeer: return "peer failure";
    case Code::kCancelled: return "cancelled";
    case Code::kFailed: return "failed";
    case Code::kInterrupted: return "interrupted";
  }
  return "unknown";
}
}  // namespace

std::string SignalName(int sig) {
  const char* n = sigabbrev_np(sig);
  return n ? std::string("SIG") + n : "signal " + std::to_string(sig);
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  if (code_ == Code::kFailed) return message_;
  return std::string(CodeName(code_)) + ": " + message_;
}

Status Status::Annotate(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_, signal_);
}

int Status::ExitCode() const {
  switch (code_) {
    case Code::kOk: return 0;
    case Code::kInvalidInput:
    case Code::kNotFound: return 2;
    case Code::kPeer: return 3;
    case Code::kInterrupted: return 128 + signal_;
    default: return 1;
  }
}

}  // namespace anneal
