// The agent process's signals and log lines (agent/agent.cc's RunAgent installs the handlers; the
// job and health runners read the signal): SIGTERM and SIGINT are recorded, never acted on inside
// the handler, and SignalCause says what a SIGTERM means for the job (an interruption to resume, or
// an allocation lost).
#pragma once

#include <string>

#include "protocol/exit_cause.h"

namespace anneal {

// Records SIGTERM and SIGINT for AgentSignal(); ignores SIGPIPE.
void InstallAgentSignalHandlers();
// The last SIGTERM or SIGINT this process got (0: none).
int AgentSignal();

// "[time] anneal agent: m" on stderr.
void AgentSay(const std::string& m);

// Why this agent got SIGTERM. Under Slurm (SLURM_JOB_ID set) its allocation's state tells: still
// RUNNING (a time limit's --signal warning, scancel --signal), PREEMPTED or TIMEOUT (or COMPLETING for
// one of those two reasons) — an interruption, resumed from the ranks' checkpoint; NODE_FAIL, CANCELLED
// or any other end (COMPLETING after a node failure) — the allocation was lost, an infrastructure
// failure. Elsewhere (a local agent, a pod) SIGTERM is an interruption.
ExitCause SignalCause(std::string* why);

}  // namespace anneal
