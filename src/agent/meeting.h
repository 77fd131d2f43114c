// How a job's instances meet before their ranks start (issue 35: one place, used by the job runner
// and the health runner): through the server's rendezvous endpoint, node 0 publishing its address
// and the ports it chose.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "core/clock.h"
#include "core/status.h"
#include "protocol/wire.h"

namespace anneal {

// A port free on this host right now (the ranks bind it a moment later).
Result<int> FreePort();

// The ports node 0 chose for a job's meeting, held bound by this agent (SO_REUSEADDR, never
// listening) from their choice on. The start reuses the ports of the attempt's health round, chosen
// seconds before: held, neither another process's plain bind (without SO_REUSEADDR) nor a port the
// kernel hands out takes them meanwhile, while the job's own listeners (the launcher's store, rank
// 0's, PyTorch's TCPStore: SO_REUSEADDR) still bind them. A hold ends when the agent takes ports for
// another meeting (another round, attempt or job), when its job's run here ends or its health round
// failed, and MASTER_PORT's as the job's ranks are started (the ranks' own to bind, with or without
// SO_REUSEADDR); the launcher's store port stays held for the run.
// Thread-safety: every method from any thread.
class PortHolds {
 public:
  static PortHolds& Process();  // this agent process's

  // A free port, held for `meeting` (MeetingKey::Path) of `job` from now on; the holds of every
  // other meeting end.
  Result<int> Take(const std::string& job, const std::string& meeting);
  void Release(const std::string& meeting, int port);  // one port's hold
  void ReleaseJob(const std::string& job);              // every hold of the job's meetings
  bool Holds(const std::string& meeting, int port) const;
  int Count(const std::string& meeting) const;  // how many ports are held for meeting

 private:
  struct Held {
    std::string job;
    std::map<int, int> sockets;  // port -> the socket bound to it
  };
  // Under mu_: ends the holds of every meeting drop(meeting, held) names.
  void EraseIf(const std::function<bool(const std::string&, const Held&)>& drop);

  mutable std::mutex mu_;
  std::map<std::string, Held> held_;  // by meeting
};

// Where the launchers of a multi-instance launch meet: node 0's address and the two ports it chose
// (MASTER_PORT for the ranks, the launcher's store), and the key the launchers' launch-rsh requests
// carry (mpirun off Slurm: launch/remote_exec.h), shared through the server, never the store.
struct Meeting {
  std::string master_addr;
  int master_port = 0;
  int store_port = -1;
  std::string exec_key;
};

// Meets the job's other instances through the server's rendezvous endpoint under `key` (protocol/wire.h:
// one meeting per attempt and health round, which the round's collective and the attempt's start
// share): node 0 takes two ports (PortHolds) and PUTs them with its address (the server keeps the
// first value and answers with it: at the start, the round's, whose ports stay held while the two
// just taken are let go), the others GET until the value is there, up to timeout_s (PeerError) or
// until *stop (Cancelled).
Result<Meeting> MeetThroughServer(const std::string& server_url, const std::string& job, MeetingKey key, int node,
                                  const std::string& address, double timeout_s, const std::atomic<bool>& stop,
                                  Clock& clock);

}  // namespace anneal
