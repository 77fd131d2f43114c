#include "launch/attempt_state.h"

namespace anneal {

void AttemptState::Record(double now, const std::string& what, int code) {
  failed_at_ = now;
  out_.failure = what;
  out_.exit_code = code;
}

StopSignal AttemptState::Fail(double now, const std::string& what, int code) {
  if (failed()) return StopSignal::kNone;
  Record(now, what, code);
  return StopSignal::kTerm;
}

StopSignal AttemptState::RankFailed(double now, int rank, int status, const std::string& what, int code) {
  if (failed()) return StopSignal::kNone;
  if (!out_.interrupted) {
    out_.failed_rank = rank;
    out_.failed_status = status;
    out_.failure_local = true;
  }
  return Fail(now, what, code);
}

StopSignal AttemptState::Interrupt(double now, const std::string& what) {
  if (out_.interrupted) return StopSignal::kNone;
  out_.interrupted = true;
  if (!failed()) Record(now, what, 1);
  return StopSignal::kTerm;
}

StopSignal AttemptState::Kill(double now) {
  if (killed_) return StopSignal::kNone;
  if (!failed()) {
    Record(now, "killed: the job was declared hung", 3);
    out_.interrupted = true;
  }
  killed_ = true;
  return StopSignal::kKill;
}

StopSignal AttemptState::Tick(double now, bool ranks_done, bool processes_left) {
  if (failed()) {
    if (killed_ || now - failed_at_ <= grace_s_) return StopSignal::kNone;
    killed_ = true;
    return StopSignal::kKill;
  }
  if (awaiting_leader_ || !processes_left || !ranks_done) return StopSignal::kNone;
  // mpirun's daemons outliving the job here: the grace, then SIGTERM, then SIGKILL.
  if (daemons_left_at_ < 0) daemons_left_at_ = now;
  const double late = now - daemons_left_at_;
  if (late > 2 * grace_s_) return StopSignal::kKill;
  if (late > grace_s_ && !daemons_termed_) {
    daemons_termed_ = true;
    return StopSignal::kTerm;
  }
  return StopSignal::kNone;
}

bool AttemptState::PeerCheckDue(double now) {
  if (failed() || now - last_peer_check_ <= 0.5) return false;
  last_peer_check_ = now;
  return true;
}

}  // namespace anneal
