// ControlServer: `anneal server` — the job API (HTTP/JSON under /v1, docs/api/openapi.yaml), the job
// store (SQLite under --data-dir) and the scheduler that moves jobs through their statuses.
//
// Scheduling: jobs are placed strictly first come, first served: the oldest Pending job gets
// instances before any later one (a job that does not fit yet holds the queue). With the local
// backend the server obtains `instance_count` fresh agents per job and releases them when it ends;
// with the static backend it assigns agents that joined by themselves (`anneal agent --server URL`)
// and have a matching instance type and enough slots.
// A job's progress comes from its agents: heartbeats (liveness; the answer carries run / stop / exit),
// node reports (downloading, training, uploading, finished with an exit code), logs and metrics.
// Restarting the server loses nothing: jobs, instances, logs and metrics are in the store, agents
// keep running and re-send what was not acknowledged, and the scheduler picks every job up again
// (heartbeat deadlines restart from the server's start).
//
// Thread-safety: Start/Stop from one thread; handlers run on the HTTP server's threads, the
// scheduler on its own; shared state is the store (thread-safe) and a mutex-guarded map.
#pragma once

#include <memory>
#include <cstdint>
#include <string>
#include <vector>

#include "control/quota.h"
#include "backends/slurm_text.h"
#include "control/scheduler.h"
#include "core/status.h"

namespace anneal {

struct ServerOptions {
  std::string data_dir;            // the store (anneal.db), packages
  std::string work_root;           // the local and Slurm agents' working areas ("" = <data_dir>-work)
  std::string host = "127.0.0.1";  // listen address
  int port = 8470;                 // 0: any free port (see ControlServer::url and <data_dir>/server.json)
  std::string backend = "local";   // local | static | slurm
  int max_instances = 4;           // local backend: agents at once on this machine
  double heartbeat_s = 1;          // agents' heartbeat interval
  // local backend: its agents stop their ranks (which checkpoint) and exit once the server has been
  // unreachable this long (a server restarted sooner finds them still running).
  double local_orphan_timeout_s = 600;
  double heartbeat_timeout_s = 30; // an instance silent this long is lost
  double start_timeout_s = 120;    // instances must register within this after they are obtained
  // Scheduler period for timeouts; it also runs at once on every submit, registration, report and
  // stop. Each tick reads the store: on a small machine its CPU time slows the ranks' steps.
  double tick_s = 1.0;
  std::string agent_binary;        // local and slurm backends: "" = this executable
  // local and slurm backends: their agents run jobs unsandboxed (agent --no-sandbox, docs/security.md):
  // hosts without mount namespaces or root. `submit --local` by a non-root user sets it.
  bool no_sandbox = false;
  // Slurm backend (backends/slurm_backend.h): partition, account, time limit, the agents' work root,
  // the warning signal's grace; the rest is filled from the options above.
  SlurmOptions slurm;
  std::string slurm_instance_types_file;  // control/server_backend.h
  bool schedule = true;            // false: serve the API only (read-only tools)
  // Security (control/auth.h, docs/security.md).
  std::string tls_cert, tls_key;   // PEM files: serve https
  std::string tls_ca;              // the CA local agents trust ("" = tls_cert, a self-signed one)
  std::string join_token_file;     // "" = <data_dir>/join.token (created)
  std::string execution_roles_file;  // control/execution_roles.h; "" = no roles
  QuotaOptions quota;
  HealthPolicy health;
  // Webhooks (control/webhooks.h): every status change is POSTed to each URL, signed with the
  // secret in webhook_secret_file (HMAC-SHA256).
  std::vector<std::string> webhook_urls;
  std::string webhook_secret_file;
  // Limits (docs/security.md "Limits"): what one request, one client and one user may hold.
  int64_t max_request_bytes = int64_t{1} << 20;      // the body of every request but a package upload
  int64_t max_package_bytes = int64_t{256} << 20;    // one package upload (streamed to disk)
  int64_t package_quota_bytes = int64_t{2} << 30;    // one user's uploads not yet cleaned up
  double package_keep_s = 24 * 3600;                 // a package no unfinished job uses is deleted this long after its upload
  double header_timeout_s = 10;                      // a connection's request headers must arrive within this
  int max_connections_per_client = 32;               // open connections from one client address
  double user_token_ttl_s = 90 * 24 * 3600;          // default lifetime of a new user token (0: none)
  double joined_forget_s = 600;                      // a quiet idle joined agent is forgotten after this
};

class ControlServer {
 public:
  // Opens the store, binds the listener and starts serving and scheduling. A port in use, an
  // unwritable data dir: errors naming them (exit 2 / 1).
  static Result<std::unique_ptr<ControlServer>> Start(const ServerOptions& o);
  virtual ~ControlServer() = default;
  // "http://127.0.0.1:8470"
  virtual std::string url() const = 0;
  // Stops scheduling and serving (agents keep running; a restarted server picks them up).
  virtual void Stop() = 0;
  // Releases every instance and waits (up to timeout_s) for local agents to exit: for the embedded
  // server of `anneal submit --local`, which leaves nothing behind.
  virtual void Drain(double timeout_s) = 0;
};

}  // namespace anneal
