#include "agent/agent_signal.h"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "provision/command.h"
#include "provision/slurm_text.h"
#include "protocol/wire.h"
#include "core/clock.h"

namespace anneal {
namespace {

std::atomic<int> g_agent_signal{0};
extern "C" void OnAgentSignal(int sig) { g_agent_signal.store(sig); }

}  // namespace

void InstallAgentSignalHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnAgentSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

int AgentSignal() { return g_agent_signal.load(); }

void AgentSay(const std::string& m) {
  std::fprintf(stderr, "[%s] anneal agent: %s\n", FormatTime(WallSeconds()).c_str(), m.c_str());
  std::fflush(stderr);
}

ExitCause SignalCause(std::string* why) {
  const char* job = std::getenv("SLURM_JOB_ID");
  if (!job || !*job) {
    *why = "interrupted: the instance got SIGTERM";
    return ExitCause::kInterrupted;
  }
  CommandOptions co;
  co.timeout_s = 10;
  auto r = RunCommand({"scontrol", "-o", "show", "job", job}, co);
  const std::string state = r.ok() && r->exit_code == 0 ? ScontrolField(r->out, "JobState") : "";
  const std::string reason = r.ok() ? ScontrolField(r->out, "Reason") : "";
  // COMPLETING: the allocation is ending; its reason says whether a time limit or pre-emption ended it.
  const bool warned_end = state == "COMPLETING" && (reason.find("TimeLimit") != std::string::npos ||
                                                    reason.find("Preempt") != std::string::npos);
  if (state.empty() || state == "RUNNING" || state == "PREEMPTED" || state == "TIMEOUT" || warned_end) {
    *why = "interrupted: the instance got SIGTERM from Slurm (allocation " + std::string(job) + " " +
           (state.empty() ? "state unknown" : state) + ": pre-emption or a time limit)";
    return ExitCause::kInterrupted;
  }
  *why = "Slurm ended allocation " + std::string(job) + ": " + state + " (" + reason + ")";
  return ExitCause::kInfrastructure;
}

}  // namespace anneal
