#include "protocol/exit_cause.h"

#include <sys/wait.h>

#include <csignal>
#include <fstream>
#include <sstream>
#include <vector>

namespace anneal {

const char* ExitCauseName(ExitCause c) {
  switch (c) {
    case ExitCause::kNone: return "none";
    case ExitCause::kUserError: return "user_error";
    case ExitCause::kOutOfMemory: return "out_of_memory";
    case ExitCause::kInfrastructure: return "infrastructure";
    case ExitCause::kStopped: return "stopped";
    case ExitCause::kMaxRuntime: return "max_runtime";
    case ExitCause::kInterrupted: return "interrupted";
  }
  return "infrastructure";
}

ExitCause ParseExitCause(const std::string& name) {
  for (ExitCause c : {ExitCause::kNone, ExitCause::kUserError, ExitCause::kOutOfMemory, ExitCause::kInfrastructure,
                      ExitCause::kStopped, ExitCause::kMaxRuntime, ExitCause::kInterrupted}) {
    if (name == ExitCauseName(c)) return c;
  }
  return ExitCause::kInfrastructure;
}

bool IsRetryable(ExitCause c) { return c == ExitCause::kInfrastructure; }

ExitCause ClassifyRankExit(int wait_status, bool oom_killed) {
  if (WIFEXITED(wait_status)) {
    const int code = WEXITSTATUS(wait_status);
    if (code == 0) return ExitCause::kNone;
    if (code == 3) return ExitCause::kInfrastructure;  // DESIGN.md: a peer or the cluster failed
    return ExitCause::kUserError;
  }
  if (WIFSIGNALED(wait_status)) {
    switch (WTERMSIG(wait_status)) {
      case SIGSEGV:
      case SIGABRT:
      case SIGFPE:
      case SIGBUS:
      case SIGILL:
      case SIGSYS:
      case SIGTRAP:
        return ExitCause::kUserError;  // the program crashed by itself
      case SIGKILL:
        return oom_killed ? ExitCause::kOutOfMemory : ExitCause::kInfrastructure;
      default:
        return ExitCause::kInfrastructure;  // sent from outside
    }
  }
  return ExitCause::kInfrastructure;
}

long long CgroupOomKills() {
  // cgroup v2 ("0::/path": memory.events) or v1 ("N:memory:/path": memory.oom_control); both have a
  // line "oom_kill <count>".
  std::ifstream cg("/proc/self/cgroup");
  std::string line, v1, v2;
  while (std::getline(cg, line)) {
    if (line.rfind("0::", 0) == 0) v2 = line.substr(3);
    const size_t m = line.find(":memory:");
    if (m != std::string::npos) v1 = line.substr(m + 8);
  }
  std::vector<std::string> files;
  if (!v1.empty()) files.push_back("/sys/fs/cgroup/memory" + v1 + "/memory.oom_control");
  if (!v2.empty()) {
    files.push_back("/sys/fs/cgroup" + v2 + "/memory.events");
    files.push_back("/sys/fs/cgroup/unified" + v2 + "/memory.events");
  }
  for (const std::string& f : files) {
    std::ifstream ev(f);
    std::string key;
    long long v = 0;
    while (ev >> key >> v) {
      if (key == "oom_kill") return v;
    }
  }
  return -1;
}

}  // namespace anneal
