// How mpirun starts its daemons on the job's nodes when there is no Slurm: through the job's own
// launchers, never through sshd. mpirun runs `anneal launch-rsh HOST COMMAND...` as its rsh agent
// (plm_rsh_agent, launch/leader_command.h); launch-rsh asks HOST's launcher, through the rendezvous
// store, to run the command line under /bin/sh (as sshd would), and exits with its exit code.
//
// Store keys, under LaunchKey(job, attempt, "rsh/<host>/"): "count" (requests so far), "<seq>" (a
// request: JSON {"command", "mac"}) and "<seq>/exit" (its exit code, set by the launcher). The mac is
// HMAC-SHA256 over host, seq and command under the attempt's key, which the agents share through the
// server (never the store), so a process that reaches the store cannot make a launcher run anything.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "comm/store.h"
#include "core/status.h"

namespace anneal {

// The mac of request `seq` for `host` (hex).
std::string RemoteExecMac(const std::string& key, const std::string& host, int64_t seq, const std::string& command);

// launch-rsh: submits the request and waits (polling) for its exit code, as long as the store answers.
Result<int> RemoteExec(Store* store, const std::string& prefix_of_host, const std::string& host,
                       const std::string& key, const std::string& command);

// A launcher's side: the requests for its own host, in order.
class RemoteExecQueue {
 public:
  RemoteExecQueue(Store* store, std::string prefix_of_host, std::string host, std::string key)
      : store_(store), prefix_(std::move(prefix_of_host)), host_(std::move(host)), key_(std::move(key)) {}
  struct Request {
    int64_t seq = 0;
    std::string command;
  };
  // The next request, if one is there. A request whose mac does not match is answered with exit 255
  // and skipped (an InvalidInput status names it).
  Result<std::optional<Request>> Poll();
  Status Finish(int64_t seq, int exit_code);

 private:
  Store* store_;
  std::string prefix_, host_, key_;
  int64_t next_ = 1;
};

}  // namespace anneal
