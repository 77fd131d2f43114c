// How a job's instances meet before their ranks start (issue 35: one place, used by the job runner
// and the health runner): through the server's rendezvous endpoint, node 0 publishing its address
// and the ports it chose.
#pragma once

#include <atomic>
#include <string>

#include "core/clock.h"
#include "core/status.h"

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

// What a meeting is filed under at the server (/v1/jobs/<job>/rendezvous/<value>): an attempt's start
// meets under the attempt's number; a pre-start health-check round of an attempt under a number no
// attempt reaches (kHealthBase + attempt * 1000 + round; rounds below 1000).
struct MeetingKey {
  static constexpr long long kHealthBase = 1000000;
  long long value = 0;
  static MeetingKey Start(int attempt) { return {attempt}; }
  static MeetingKey HealthRound(int attempt, int round) { return {kHealthBase + attempt * 1000LL + round}; }
};

// Meets the job's other instances through the server's rendezvous endpoint under `key`: node 0 picks two
// free ports and PUTs them with its address (the server keeps the first value and answers with it),
// the others GET until the value is there, up to timeout_s (PeerError) or until *stop (Cancelled).
Result<Meeting> MeetThroughServer(const std::string& server_url, const std::string& job, MeetingKey key, int node,
                                  const std::string& address, double timeout_s, const std::atomic<bool>& stop,
                                  Clock& clock);

}  // namespace anneal
