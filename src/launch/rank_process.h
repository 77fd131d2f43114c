// One local process of an attempt (a rank, the leader, or an mpirun daemon started for launch-rsh):
// starting it in its own process group with its environment, working directory and CPU share, and
// reading what it prints, line by line. What a waitpid status means to the launcher is here too.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "launch/launch_plan.h"

namespace anneal {

struct RankProcess {
  LocalProcess role;
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1;
  std::string out_buf, err_buf;
  bool running = false;
  int status = 0;           // waitpid status once exited
  int64_t remote_seq = -1;  // a command run for launch-rsh (an mpirun daemon), not a rank
  std::string tmp_dir;      // mpirun mode: this process's own TMPDIR, removed when the attempt ends
  std::string last_line;    // the last line it printed (either stream)
};

struct SpawnSpec {
  std::vector<std::string> argv;  // a bare program name is looked up in env's PATH
  std::vector<std::string> wrap;  // put before argv (the job's sandbox: LaunchOptions::wrap)
  std::map<std::string, std::string> env;
  std::string workdir;            // "" = the launcher's
  std::vector<int> cpus;          // pinned to these ("" = not pinned)
};

// Starts r's process: its own process group (signals reach its children), SIGKILL when the launcher
// dies, stdout and stderr to pipes read by PumpOutput. A working directory it cannot enter or a
// program it cannot run ends it with 127 and a line on its stderr.
Status SpawnProcess(RankProcess* r, SpawnSpec spec);

// Reads what the processes printed (waiting up to 100 ms; with no pipe left open, sleeps 50 ms on
// `clock`) and calls emit for each whole line; a pipe's end flushes its last partial line.
void PumpOutput(const std::vector<RankProcess*>& ps, Clock& clock,
                const std::function<void(RankProcess&, bool is_stderr, const std::string& line)>& emit);

// "exit code 3", "killed by SIGKILL".
std::string DescribeStatus(int status);
// Anything but exit code 0.
bool StatusFailed(int status);
// Exit 130 or 143 (128 + SIGINT or SIGTERM): stopped by that signal after saving what it could
// (anneal train checkpoints first) — an interruption, never a failure of the rank's own.
bool InterruptedExit(int status);
// The launcher's exit code for a failed process: its own, or 3 for one lost to a signal.
int ExitCodeOf(int status);

}  // namespace anneal
