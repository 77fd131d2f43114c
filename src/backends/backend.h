// Backend: how the control plane obtains and releases instances (DESIGN.md src/backends). An instance
// is an `anneal agent` with slots and an address; once started it registers with the server under the
// id it was given and from then on is reached only through the API (heartbeats), never by PID or a
// shared path — so Slurm and Kubernetes backends implement the same three calls.
//
// Thread-safety: called from the server's scheduler thread only.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace anneal {

struct InstanceRequest {
  std::string id;             // the id the agent registers with
  std::string instance_type;  // the job's resources.instance_type
  int slots = 1;              // the job's procs_per_instance
  std::string server_url;     // where the agent registers
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Most instances this backend runs at once (for the "can never fit" check at submit); -1: unknown.
  virtual int capacity() const = 0;
  // Starts obtaining the instance; it is usable once its agent registers. Failure: PeerError.
  virtual Status Launch(const InstanceRequest& r) = 0;
  // The instance is no longer needed: the server has told its agent to exit; the backend makes sure
  // it is gone (after a grace period) and frees what it held.
  virtual void Release(const std::string& id) = 0;
  // Housekeeping on the scheduler's tick (reaping exited agents); returns ids whose agent is gone.
  virtual std::vector<std::string> Poll() = 0;
};

struct LocalBackendOptions {
  std::string agent_binary;   // the anneal executable ("" = this process's own, /proc/self/exe)
  std::string work_root;      // agents' working areas go under it: <work_root>/<instance id>
  int max_instances = 4;
  double heartbeat_s = 1;     // passed to the agents
  double release_grace_s = 30;  // after Release, SIGKILL an agent still running this long
  std::map<std::string, std::string> env;  // added to the agents' environment (ANNEAL_JOIN_TOKEN, ...)
};

// Agents as processes on this machine (an ephemeral cluster of one host).
std::unique_ptr<Backend> MakeLocalBackend(const LocalBackendOptions& o);

}  // namespace anneal
