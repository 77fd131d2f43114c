// Exit causes: why a job attempt ended, decided once here and applied everywhere (the agent for its
// ranks, the server for lost instances and timeouts). docs/exit-causes.md is the table for users.
//
//   cause            examples                                                 retried?
//   user_error       a rank exits non-zero by itself (1, 2 = bad input, 127 =  never: fails fast
//                    command not found), crashes (SIGSEGV, SIGABRT, SIGFPE,
//                    SIGBUS, SIGILL), the spec or the source cannot be used
//   out_of_memory    a rank killed by SIGKILL while its cgroup's oom_kill      never (the same job
//                    counter rose                                              would run out again)
//   infrastructure   exit code 3 (a collective timed out, a rank or the store   while retry.max_attempts
//                    was lost), a rank killed by a signal from outside          allow, on fresh instances
//                    (SIGKILL, SIGTERM, SIGHUP, ...), an agent or its
//                    heartbeat lost, instances that never registered, a hung
//                    job, a failed health check, a store that failed
//   stopped          a stop request                                            no
//   interrupted      the instance got SIGTERM from its cluster (Slurm's        always resumed, as a new
//                    pre-emption or time-limit warning, scancel --signal=TERM) attempt that does not count
//                    or `anneal stop --requeue`: the ranks checkpoint           against retry.max_attempts
//   max_runtime      stopping.max_runtime_s reached                            no
#pragma once

#include <string>

namespace anneal {

enum class ExitCause { kNone, kUserError, kOutOfMemory, kInfrastructure, kStopped, kMaxRuntime, kInterrupted };

const char* ExitCauseName(ExitCause c);  // "user_error", ...
ExitCause ParseExitCause(const std::string& name);  // unknown names: kInfrastructure
bool IsRetryable(ExitCause c);                       // infrastructure only

// A rank's end from its waitpid status. oom_killed: the instance saw an OOM kill meanwhile.
ExitCause ClassifyRankExit(int wait_status, bool oom_killed);

// The OOM kills counted so far for this process's cgroup (cgroup v2 memory.events oom_kill; the
// ranks are in the agent's cgroup), or -1 where that cannot be read.
long long CgroupOomKills();

}  // namespace anneal
