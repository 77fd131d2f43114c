#include "agent/attempt_end.h"

namespace anneal {
namespace {

// A rank failed on this node: how (its wait status; an OOM kill the cgroup counted).
AttemptEnd LocalFailure(const LaunchResult& r, const AttemptFacts& f, AttemptEnd e) {
  e.cause = ClassifyRankExit(r.failed_status, f.oom_counted);
  if (e.cause == ExitCause::kOutOfMemory) {
    e.summary += f.memory_mb > 0 ? "\nthe job's cgroup counted an OOM kill: the rank went over resources.memory_mb (" +
                                       std::to_string(f.memory_mb) + " MiB)"
                                 : "\nthe instance's cgroup counted an OOM kill: the rank ran out of memory";
  }
  return e;
}

// The ranks were interrupted (exit 143/130, or stopped by a signal or a request).
AttemptEnd Interrupted(const AttemptFacts& f, const std::function<ExitCause(std::string*)>& signal_cause,
                       AttemptEnd e) {
  if (f.signalled) {
    // The agent itself got SIGTERM: the ranks were sent SIGTERM to checkpoint. A warning (the
    // allocation goes on) is an interruption the server resumes; a lost allocation is not.
    std::string why;
    e.cause = signal_cause(&why);
    e.local = true;
    e.summary = why + "; the ranks were stopped to save a checkpoint\n" + e.summary;
  } else if (!f.stopped) {
    // A rank ended by a SIGTERM or SIGINT no one here sent (it saved first): not the job's failure;
    // retried from that checkpoint.
    e.cause = ExitCause::kInfrastructure;
    e.local = true;
    e.summary = "a rank was interrupted by a signal from outside anneal\n" + e.summary;
  } else {
    e.cause = ExitCause::kStopped;
  }
  return e;
}

}  // namespace

AttemptEnd EndOfError(const Status& st, bool preparing) {
  AttemptEnd e;
  e.exit_code = st.ExitCode();
  e.summary = st.message();
  e.local = true;
  const bool users = st.code() == Code::kInvalidInput || (preparing && st.code() == Code::kNotFound);
  e.cause = users ? ExitCause::kUserError : ExitCause::kInfrastructure;
  return e;
}

AttemptEnd EndBeforeStart(bool signalled, const std::function<ExitCause(std::string*)>& signal_cause) {
  AttemptEnd e;
  e.exit_code = 1;
  e.summary = "stopped before the ranks started";
  e.cause = ExitCause::kStopped;
  if (signalled) {
    e.cause = signal_cause(&e.summary);
    e.local = true;
  }
  return e;
}

AttemptEnd EndOfLaunch(const LaunchResult& r, const AttemptFacts& f,
                       const std::function<ExitCause(std::string*)>& signal_cause) {
  AttemptEnd e;
  e.exit_code = r.exit_code;
  e.summary = r.summary.empty() ? "ranks finished with exit code " + std::to_string(r.exit_code) : r.summary;
  e.failed_rank = r.failed_rank;
  e.local = r.failure_local;
  if (f.rule_fired) {  // a stopping rule ended the attempt: its action says whether that is retried
    e.exit_code = e.exit_code ? e.exit_code : 1;
    e.cause = f.rule_retry ? ExitCause::kInfrastructure : ExitCause::kUserError;
    e.local = true;
    e.failed_rank = -1;
    e.summary = f.rule_message + "\n" + e.summary;
  } else if (r.exit_code == 0 && f.signalled) {
    // Slurm's SIGTERM reaches the ranks too (scancel --signal, a time limit's warning): they may
    // checkpoint and exit 0 before this agent's own stop reaches them. Not a completed job.
    e.cause = signal_cause(&e.summary);
    e.exit_code = 1;
    e.local = true;
    e.summary += "; the ranks saved a checkpoint and exited";
  } else if (r.exit_code == 0) {
    e.cause = ExitCause::kNone;
  } else if (f.hung) {
    e.cause = ExitCause::kInfrastructure;
    e.local = true;
    e.summary = f.hang_message + "\n" + e.summary;
  } else if (r.failure_local) {
    return LocalFailure(r, f, e);
  } else if (r.interrupted) {
    return Interrupted(f, signal_cause, e);
  } else {
    e.cause = ExitCause::kInfrastructure;  // another node failed; the server takes that node's cause
  }
  return e;
}

}  // namespace anneal
