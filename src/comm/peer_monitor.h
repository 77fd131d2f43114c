// PeerMonitor: what every Communicator backend shares for failing loudly — the rank's heartbeat in
// the rendezvous store, the table of the group's addresses, and the diagnosis that turns a failed or
// timed-out operation into an error naming the lost ranks.
//
// Heartbeat: every heartbeat_interval, +1 on "<group>/hb/<global rank>"; a killed or frozen rank's
// counter stops. Diagnose() reads the peers' counters twice, 2.5 intervals apart, and names those
// that did not move; when the store itself is unreachable (the network to node 0 is cut) it names
// the ranks on other hosts, and any rank whose address the transport's error contains.
// Thread-safety: Diagnose may run on any thread; the heartbeat runs on its own.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "comm/communicator.h"
#include "comm/store.h"

namespace anneal {

class PeerMonitor {
 public:
  // addrs: each member's address, by group rank (ReadAddresses).
  PeerMonitor(Store* store, CommOptions o, std::vector<std::string> addrs);
  ~PeerMonitor();  // stops the heartbeat
  // "<what> in group 'dp' (ranks 0,1) failed on rank 0 after 5 s: lost rank 1 (...). Transport: <e>"
  std::string Diagnose(const std::string& what, const std::string& transport_error, double seconds);

 private:
  void Heartbeat();
  Store* store_;
  CommOptions o_;
  std::vector<std::string> addrs_;
  int me_ = 0;  // group rank
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

// Fills members (all ranks when empty) and checks that global_rank is one of them (InvalidInput).
Result<CommOptions> ResolveMembers(const CommOptions& o);
int GroupRankOf(const CommOptions& o);
// The address peers reach this rank at: ANNEAL_BIND_ADDR if set; else the interface that routes to
// the TCP store's host (or, with a shared-folder store, to MASTER_ADDR or this host's name).
std::string DefaultBindAddress(const Store& store, const std::string& master_addr);
// "<group>/addr/<global rank>" = addr, then every member's, by group rank ("" where absent).
Status PublishAddress(Store* store, const CommOptions& o, const std::string& addr);
std::vector<std::string> ReadAddresses(Store* store, const CommOptions& o);
// "0,1,2"
std::string JoinInts(const std::vector<int>& v);

}  // namespace anneal
