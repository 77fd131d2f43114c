// Running a cluster engine's command-line tools (sbatch, squeue, scancel, ...): argv straight to
// execvp (no shell, so no quoting of user text), standard input from /dev/null, standard output and
// error captured, a time limit after which the command is killed. Thread-safe (no shared state).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace anneal {

struct CommandResult {
  int exit_code = -1;  // the command's exit status; 128 + N when killed by signal N
  std::string out, err;
  bool timed_out = false;
};

struct CommandOptions {
  double timeout_s = 30;
  std::map<std::string, std::string> set_env;  // added to (or replacing in) this process's environment
  std::vector<std::string> unset_env;           // removed from it (secrets the command must not see)
};

// Fails (PeerError) only when the command cannot be started (not found: the message names it);
// a command that ran and failed is an ok Result with its exit code.
Result<CommandResult> RunCommand(const std::vector<std::string>& argv, const CommandOptions& o = {});

// What a backend calls to run a tool: RunCommand in production, a recording fake in unit tests.
using CommandRunner = std::function<Result<CommandResult>(const std::vector<std::string>& argv)>;

}  // namespace anneal
