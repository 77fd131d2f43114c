// InstanceProvider: how the control plane obtains and releases instances (DESIGN.md's src/backends). An instance
// is an `anneal agent` with slots and an address; once started it registers with the server under the
// id it was given and from then on is reached only through the API (heartbeats), never by PID or a
// shared path — so Slurm and Kubernetes backends implement the same calls.
//
// Two kinds, told by obtains():
//   - a backend that obtains instances (local processes; a cluster engine): the scheduler asks it for
//     a job's N instances as one gang request (Obtain: all or nothing, since separate single-instance
//     requests deadlock on a busy cluster), the backend may report them pending with its reason
//     (Poll: shown as the job's pending_reason; pending time does not count against the start
//     timeout), and releases them when the job no longer needs them;
//   - agents that joined by themselves (StaticBackend): the scheduler assigns idle joined instances
//     of the job's type and slots; nothing is obtained, and a released instance returns to the pool.
// Poll also reports instances whose agent is gone (exited, or lost to the engine).
//
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
  // The one-time secret the agent registers with (control/auth.h "register"), issued by the
  // scheduler with the request: the backend hands it to that agent alone, never in its environment
  // or on its command line. The join token is never given to a requested instance.
  std::string secret;
};

// One job attempt's new instances, obtained together.
struct GangRequest {
  std::string job;
  int attempt = 0;
  std::vector<InstanceRequest> instances;
};

// What changed since the last Poll.
struct ProvisionReport {
  std::vector<std::string> gone;                // instances whose agent exited or was lost
  std::map<std::string, std::string> pending;   // instance -> why it is not running yet (engine's words)
  // gone instance -> its agent's work folder, when this machine can read it (the local backend): the
  // server delivers what the agent's spool still holds (protocol/spool.h), then removes the folder.
  std::map<std::string, std::string> gone_dirs;
};

class InstanceProvider {
 public:
  virtual ~InstanceProvider() = default;
  virtual std::string name() const = 0;
  // true: obtains a fresh gang of instances per job; false: jobs run on agents that joined.
  virtual bool obtains() const = 0;
  // Most instances this backend runs at once (for the "can never fit" check at submit); -1: unknown.
  virtual int capacity() const = 0;
  // true: the engine keeps its own queue (a cluster shared with others): a gang is requested as soon
  // as anneal's quotas allow, and waits there with the engine's reason; capacity() then only refuses a
  // job that can never fit. false: anneal holds the job until capacity() has room.
  virtual bool queues() const { return false; }
  // What bounds capacity(), for the message refusing a job that can never fit (with the fix, if any).
  virtual std::string CapacityHint() const {
    return "the " + name() + " backend runs at most " + std::to_string(capacity()) + " at once";
  }
  // Starts obtaining every instance of the request, or none of them (Failure: PeerError, and nothing
  // is left running). Each is usable once its agent registers. Only when obtains().
  virtual Status Obtain(const GangRequest& g) = 0;
  // The instance is no longer needed: the server has told its agent to exit; the backend makes sure
  // it is gone (after a grace period) and frees what it held (joined agents: nothing to free).
  virtual void Release(const std::string& id) = 0;
  // Housekeeping on the scheduler's tick (reaping exited agents, reading the engine's queue).
  virtual ProvisionReport Poll() = 0;
};

// The name joined agents' instance records carry (InstanceRecord::backend), and StaticBackend's.
inline constexpr const char* kJoinedBackend = "static";

// Agents that join by themselves (`anneal agent --server URL`): nothing to obtain or free.
std::unique_ptr<InstanceProvider> MakeStaticBackend();

struct LocalBackendOptions {
  std::string agent_binary;   // the anneal executable ("" = this process's own, /proc/self/exe)
  std::string work_root;      // agents' working areas go under it: <work_root>/<instance id>
  int max_instances = 4;
  double heartbeat_s = 1;     // passed to the agents
  double orphan_timeout_s = 600;  // passed to the agents: the server unreachable this long, they stop
  double release_grace_s = 30;  // after Release, SIGKILL an agent still running this long
  std::map<std::string, std::string> env;  // added to the agents' environment (ANNEAL_CA_CERT); never a secret
  std::vector<std::string> hide;  // passed to the agents as --hide: what no job may reach (the server's data folder)
  bool no_sandbox = false;        // passed to the agents as --no-sandbox
};

// Agents as processes on this machine (an ephemeral cluster of one host).
std::unique_ptr<InstanceProvider> MakeLocalBackend(const LocalBackendOptions& o);

}  // namespace anneal
