// How a job's instances meet before their ranks start (issue 35: one place, used by the job runner
// and the health runner): through the server's rendezvous endpoint, node 0 publishing its address
// and the ports it chose.
#pragma once

#include <atomic>
#include <string>

#include "core/clock.h"
#include "core/status.h"
#include "protocol/wire.h"

namespace anneal {

// A port free on this host right now (the ranks bind it a moment later).
Result<int> FreePort();

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
// share): node 0 picks two free ports and PUTs them with its address (the server keeps the first
// value and answers with it: at the start, the round's), the others GET until the value is there, up
// to timeout_s (PeerError) or until *stop (Cancelled).
Result<Meeting> MeetThroughServer(const std::string& server_url, const std::string& job, MeetingKey key, int node,
                                  const std::string& address, double timeout_s, const std::atomic<bool>& stop,
                                  Clock& clock);

}  // namespace anneal
