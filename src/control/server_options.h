// ServerOptions: everything `anneal server` is started with (its flags: cli/server_cmd.cc), read by
// the server and the parts it hands them to (server_backend.h, server_context.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "provision/slurm_text.h"
#include "control/quota.h"
#include "control/scheduler.h"

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
  // Slurm backend (provision/slurm_backend.h): partition, account, time limit, the agents' work root,
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

}  // namespace anneal
