// AttemptState: what the launcher decides while one attempt runs, as data. It is told what happened
// (a rank failed, a rank or the launcher was interrupted, the job was declared hung, another node
// failed, the leader finished) and when, and answers which signal this node's processes get now:
// SIGTERM to all at the first failure or interruption, SIGKILL after the grace, SIGKILL at once for a
// hung job; and, once every rank has ended but mpirun's daemons have not, SIGTERM after one grace and
// SIGKILL after two. The first failure is the attempt's; later ones change nothing.
//
// Pure: no I/O, no clock (every call carries `now`, monotonic seconds), so its timeouts are tested
// with simulated time (tests/launch/attempt_state_test.cc). Not thread-safe: one launcher's loop.
#pragma once

#include <string>

namespace anneal {

enum class StopSignal { kNone, kTerm, kKill };

struct AttemptOutcome {
  int exit_code = 0;
  bool interrupted = false;
  int failed_rank = -1, failed_status = 0;
  bool failure_local = false;
  std::string failure;     // "rank 1 (node 0, pid 123) failed first: killed by SIGKILL after 3.2 s"
  std::string last_words;  // interrupted: the first rank's last line ("... checkpoint ... saved ...")
};

class AttemptState {
 public:
  // grace_s: how long the processes get between SIGTERM and SIGKILL. awaiting_leader: this node runs
  // only mpirun's daemons or nothing (mpirun/srun mode, not node 0) and waits for the leader's end.
  AttemptState(double grace_s, bool awaiting_leader) : grace_s_(grace_s), awaiting_leader_(awaiting_leader) {}

  // A failure (the first one counts): the attempt ends with `code`; the others get SIGTERM.
  StopSignal Fail(double now, const std::string& what, int code);
  // This node's rank failed with waitpid status `status` (it is the attempt's failed rank unless the
  // attempt was already interrupted).
  StopSignal RankFailed(double now, int rank, int status, const std::string& what, int code);
  // A stop request, a signal to the launcher, or a rank that exited 130/143 (a signal from outside
  // reached it first): the others are stopped the same way, to save what they can. `what` is the
  // attempt's failure text when nothing failed before.
  StopSignal Interrupt(double now, const std::string& what);
  // The job was declared hung: SIGKILL at once (SIGCONT first: a frozen process must run to die).
  StopSignal Kill(double now);
  // The leader (node 0) ended well: this node stops waiting for it.
  void LeaderDone() { awaiting_leader_ = false; }
  // What time alone decides: SIGKILL after the grace; mpirun's daemons outliving the ranks
  // (ranks_done: every rank has ended; processes_left: something still runs).
  StopSignal Tick(double now, bool ranks_done, bool processes_left);
  // Whether another node's failure is due to be looked up (every half second while nothing failed).
  bool PeerCheckDue(double now);

  bool failed() const { return failed_at_ >= 0; }
  bool awaiting_leader() const { return awaiting_leader_ && !failed(); }
  bool interrupted() const { return out_.interrupted; }
  AttemptOutcome& outcome() { return out_; }

 private:
  void Record(double now, const std::string& what, int code);

  double grace_s_;
  bool awaiting_leader_;
  AttemptOutcome out_;
  double failed_at_ = -1, last_peer_check_ = -1e300, daemons_left_at_ = -1;
  bool killed_ = false, daemons_termed_ = false;
};

}  // namespace anneal
