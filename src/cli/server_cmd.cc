// anneal server / anneal agent: the control plane's two daemons (control/server.h, agent/agent.h).
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "agent/agent.h"
#include "cli/commands.h"
#include "control/server.h"
#include "core/clock.h"
#include "core/env.h"
#include "launch/sandbox.h"

namespace anneal::cli {

namespace {

std::atomic<int> g_server_signal{0};
extern "C" void OnServerSignal(int sig) { g_server_signal.store(sig); }

Status SplitListen(const std::string& listen, ServerOptions* o) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return InvalidInput("--listen '" + listen + "' must be HOST:PORT, e.g. 127.0.0.1:8470");
  o->host = listen.substr(0, colon);
  try {
    o->port = std::stoi(listen.substr(colon + 1));
  } catch (...) {
    return InvalidInput("--listen '" + listen + "': the port is not a number");
  }
  if (o->port < 0 || o->port > 65535) return InvalidInput("--listen '" + listen + "': the port must be 0..65535");
  return Status::Ok();
}

Status RunServer(ServerOptions o, const std::string& listen) {
  ANNEAL_RETURN_IF_ERROR(SplitListen(listen, &o));
  ANNEAL_ASSIGN_OR_RETURN(auto server, ControlServer::Start(o));
  std::fprintf(stderr, "anneal server: listening on %s (data in %s, backend %s)\n", server->url().c_str(),
               o.data_dir.c_str(), o.backend.c_str());
  // Where a user starts: the admin's token (written at the first start only) and the dashboard.
  std::error_code ec;
  const std::string token = std::filesystem::absolute(JoinPath(o.data_dir, "admin.token"), ec).lexically_normal().string();
  if (Env::Default().Exists(token)) {
    std::fprintf(stderr, "anneal server: the admin token is in %s (for the CLI: export ANNEAL_TOKEN_FILE=%s)\n",
                 token.c_str(), token.c_str());
  } else {
    std::fprintf(stderr,
                 "anneal server: no admin token file at %s (it is written at the first start only): an admin makes "
                 "a new token with anneal tokens create\n",
                 token.c_str());
  }
  std::fprintf(stderr, "anneal server: the dashboard is at %s/ui/ (sign in with a token)\n", server->url().c_str());
  if (o.backend != "static" && !o.no_sandbox) {
    // Its agents run as this user: they can make jobs' sandboxes as root only.
    const std::string why = SandboxUnavailableReason();
    if (!why.empty()) {
      std::fprintf(stderr,
                   "anneal server: warning: its agents will refuse every sandboxed job: %s. Start the server as root, "
                   "or with --no-sandbox to run jobs as this user (docs/security.md)\n",
                   why.c_str());
    }
  }
  std::fflush(stderr);
  struct sigaction sa {};
  sa.sa_handler = OnServerSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  while (!g_server_signal.load()) Clock::Real().SleepFor(0.1);
  std::fprintf(stderr, "anneal server: stopping (agents keep running; a restarted server picks them up)\n");
  server->Stop();
  return Status::Ok();
}

// Where instances come from: the backend, Slurm's settings, the agents' timing (docs/slurm.md).
void AddBackendOptions(CLI::App* c, ServerOptions* o) {
  c->add_option("--backend", o->backend,
                "local: start agents on this machine per job; static: use agents that join; slurm: one Slurm job of "
                "instance_count nodes per job attempt (docs/slurm.md)")
      ->capture_default_str();
  // Slurm (docs/slurm.md): the cluster's own settings; job specs name an instance type, never sbatch options.
  c->add_option("--slurm-partition", o->slurm.partition, "slurm backend: the partition (default: the cluster's default)");
  c->add_option("--slurm-account", o->slurm.account, "slurm backend: the account jobs are charged to");
  c->add_option("--slurm-time-limit", o->slurm.time_limit, "slurm backend: sbatch --time for every allocation (e.g. 1-00:00:00)");
  c->add_option("--slurm-instance-types", o->slurm_instance_types_file,
                "slurm backend: YAML of sbatch options per instance type (partition, gpus_per_node, cpus_per_task, mem, constraint)");
  c->add_option("--agent-binary,--slurm-agent-binary", o->agent_binary,
                "local and slurm backends: the program each instance's agent runs as, called with `agent` and its "
                "options (default: this executable; slurm: its path on the nodes, checked by one srun at start)");
  c->add_option("--work-root", o->work_root,
                "local and slurm backends: the agents' working areas, their jobs' folders (default: DATA_DIR-work, "
                "beside the data folder, never in it)");
  c->add_flag("--no-sandbox", o->no_sandbox,
              "local and slurm backends: the agents run jobs without their sandbox (agent --no-sandbox: for hosts "
              "without mount namespaces or a root agent; every node report says so, docs/security.md)");
  c->add_option("--slurm-work-root", o->slurm.work_root,
                "slurm backend: the agents' working areas on the nodes (default: --work-root)");
  c->add_option("--slurm-signal-grace-s", o->slurm.signal_grace_s,
                "slurm backend: Slurm's SIGTERM this long before a time limit ends an allocation (ranks checkpoint)")
      ->capture_default_str();
  c->add_option("--max-instances", o->max_instances, "local backend: agents running at once")->capture_default_str();
  c->add_option("--heartbeat-s", o->heartbeat_s, "Agents' heartbeat interval")->capture_default_str();
  c->add_option("--local-orphan-timeout-s", o->local_orphan_timeout_s,
                "--backend local: an agent whose server has been unreachable this long stops its job's ranks (they "
                "checkpoint) and exits")
      ->capture_default_str();
  c->add_option("--heartbeat-timeout-s", o->heartbeat_timeout_s, "An instance silent this long is lost")
      ->capture_default_str();
  c->add_option("--start-timeout-s", o->start_timeout_s, "Instances must register within this after being obtained")
      ->capture_default_str();
}

// TLS, the join token and execution roles (docs/security.md).
void AddSecurityOptions(CLI::App* c, ServerOptions* o) {
  c->add_option("--tls-cert", o->tls_cert, "PEM certificate: serve https (with --tls-key)");
  c->add_option("--tls-key", o->tls_key, "PEM private key of --tls-cert");
  c->add_option("--tls-ca", o->tls_ca, "PEM CA the local backend's agents trust (default: --tls-cert, self-signed)");
  c->add_option("--join-token-file", o->join_token_file, "The agents' join token (default: DATA_DIR/join.token, created)");
  c->add_option("--execution-roles", o->execution_roles_file,
                "YAML file of execution roles: the storage prefixes (and credentials) each job role may use");
}

// Quotas (docs/quotas.md) and pre-start health checks (docs/health-checks.md).
void AddQuotaOptions(CLI::App* c, ServerOptions* o, std::vector<std::string>* types) {
  // Quotas (docs/quotas.md); 0 = no limit.
  c->add_option("--quota-instances-per-job", o->quota.max_instances_per_job, "Most instances one job may ask for");
  c->add_option("--quota-running-instances", o->quota.max_running_instances, "Most instances across all running jobs");
  c->add_option("--quota-user-instances", o->quota.user_max_instances,
                "Default most instances across one user's running jobs (anneal users set NAME --max-instances)");
  c->add_option("--quota-instance-type", *types, "TYPE=N: most running instances of that type (repeatable)");
  // Pre-start health checks (docs/health-checks.md).
  c->add_flag("!--no-health-checks", o->health.enabled, "Skip the pre-start health checks");
  c->add_option("--health-min-free-memory-gb", o->health.min_free_memory_gb, "Memory an instance must have free")
      ->capture_default_str();
  c->add_option("--health-min-free-disk-gb", o->health.min_free_disk_gb, "Disk its work dir must have free")
      ->capture_default_str();
  c->add_option("--health-collective-mb", o->health.collective_mb, "Allreduce size across a job's instances (0: none)")
      ->capture_default_str();
  c->add_option("--health-check-command", o->health.command,
                "An operator's own check, run by /bin/sh on every instance before each job (non-zero: unhealthy)");
  c->add_option("--health-max-replacements", o->health.max_replacements, "Rounds of replacing unhealthy instances")
      ->capture_default_str();
}

// Webhooks (docs/events.md), and what one request, client or user may take (docs/security.md "Limits").
void AddEventAndLimitOptions(CLI::App* c, ServerOptions* o) {
  // Events (docs/events.md).
  c->add_option("--webhook", o->webhook_urls, "POST every job status change to this URL (repeatable)");
  c->add_option("--webhook-secret-file", o->webhook_secret_file, "Sign webhooks with HMAC-SHA256 of this file's secret");
  // Limits (docs/security.md "Limits").
  c->add_option("--max-request-bytes", o->max_request_bytes, "Largest body of any request but a package upload (413 above)")
      ->capture_default_str()->check(CLI::Range(int64_t{1024}, int64_t{1} << 30));
  c->add_option("--max-package-bytes", o->max_package_bytes, "Largest package upload (413 above)")
      ->capture_default_str()->check(CLI::Range(int64_t{1024}, int64_t{64} << 30));
  c->add_option("--package-quota-bytes", o->package_quota_bytes, "One user's uploaded packages, until cleaned up (413 above)")
      ->capture_default_str()->check(CLI::Range(int64_t{1024}, int64_t{1} << 50));
  c->add_option("--package-keep-s", o->package_keep_s, "Delete a package no unfinished job uses this long after its upload")
      ->capture_default_str()->check(CLI::Range(0.0, 1e9));
  c->add_option("--header-timeout-s", o->header_timeout_s, "A connection's request headers must arrive within this")
      ->capture_default_str()->check(CLI::Range(0.1, 3600.0));
  c->add_option("--max-connections-per-client", o->max_connections_per_client, "Open connections one client address may hold")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  c->add_option("--user-token-ttl-s", o->user_token_ttl_s, "Default lifetime of a new user token (0: never expires)")
      ->capture_default_str()->check(CLI::Range(0.0, 1e10));
  c->add_option("--joined-forget-s", o->joined_forget_s, "Forget an idle joined agent quiet this long")
      ->capture_default_str()->check(CLI::Range(1.0, 1e9));
}

}  // namespace

void AddServerCommand(CLI::App& app, RunFn* run) {
  auto o = std::make_shared<ServerOptions>();
  auto listen = std::make_shared<std::string>("127.0.0.1:8470");
  CLI::App* c = app.add_subcommand(
      "server",
      "Run the job API server (HTTP/JSON, docs/api/openapi.yaml) with its SQLite job store and scheduler.\n"
      "Example: anneal server --data-dir /var/lib/anneal --listen 127.0.0.1:8470");
  c->add_option("--data-dir", o->data_dir, "Where the job store (anneal.db), packages and local agents live")->required();
  c->add_option("--listen", *listen, "HOST:PORT to serve on (port 0: any free one, written to DATA_DIR/server.json)")
      ->capture_default_str();
  AddBackendOptions(c, o.get());
  AddSecurityOptions(c, o.get());
  auto types = std::make_shared<std::vector<std::string>>();
  AddQuotaOptions(c, o.get(), types.get());
  AddEventAndLimitOptions(c, o.get());
  c->callback([run, o, listen, types] {
    *run = [o, listen, types]() -> Status {
      for (const auto& t : *types) ANNEAL_RETURN_IF_ERROR(ParseTypeQuota(t, &o->quota.instance_type_max));
      return RunServer(*o, *listen);
    };
  });
}

void AddAgentCommand(CLI::App& app, RunFn* run) {
  auto o = std::make_shared<AgentOptions>();
  CLI::App* c = app.add_subcommand(
      "agent",
      "Run an instance agent: join a server, run the ranks of the jobs it assigns, ship their logs and metrics.\n"
      "Example: anneal agent --server http://10.0.0.1:8470 --slots 2 --work-dir /scratch/anneal");
  c->add_option("--server", o->server_url, "The server's URL")->required();
  c->add_option("--instance-id", o->instance_id, "Join under this id (given by a backend; default: the server names it)");
  c->add_option("--instance-type", o->instance_type, "Matched against a job's resources.instance_type")
      ->capture_default_str();
  c->add_option("--slots", o->slots, "Ranks this instance runs (a job's procs_per_instance must fit)")->capture_default_str();
  c->add_option("--work-dir", o->work_dir, "Where jobs are unpacked and run")->required();
  c->add_option("--address", o->address, "Address other instances reach this one at (default: toward the server)");
  c->add_option("--heartbeat-s", o->heartbeat_s, "Heartbeat interval")->capture_default_str();
  c->add_option("--metrics-interval-s", o->metrics_interval_s, "System metrics and checkpoint upload interval")
      ->capture_default_str();
  c->add_option("--orphan-timeout-s", o->orphan_timeout_s, "Exit after the server is unreachable this long while idle")
      ->capture_default_str();
  c->add_flag("--remove-work-dir", o->remove_work_dir, "Delete --work-dir on exit (ephemeral instances)");
  c->add_flag("--keep-job-dirs", o->keep_job_dirs, "Keep each job's folder under --work-dir after it ends (debugging)");
  c->add_flag("--no-sandbox", o->no_sandbox,
              "Run jobs' ranks as this agent's user, without their sandbox (own uid, mounts, cgroup: docs/security.md); "
              "logged and shown in each job's describe");
  c->add_option("--hide", o->hide,
                "A folder or file no job may reach (repeatable; the agent's work dir, join token and HOME always are): "
                "the server's data folder on its machine");
  c->add_option("--join-token-file", o->join_token_file,
                "The server's join token (default: $ANNEAL_JOIN_TOKEN); the server wrote it to its DATA_DIR/join.token");
  c->add_option("--max-unpacked-bytes", o->max_unpacked_bytes, "Most bytes a job's source package may unpack to")
      ->capture_default_str()->check(CLI::Range(int64_t{1024}, int64_t{1} << 50));
  c->add_option("--max-unpacked-files", o->max_unpacked_files, "Most files a job's source package may hold")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  c->add_flag("--remove-join-token-file", o->remove_join_token_file,
              "Delete --join-token-file once read (a backend's one-time secret file for this instance)");
  c->add_option("--join-token-fd", o->join_token_fd,
                "Read the join token or this instance's one-time secret from this file descriptor (a pipe), then close it")
      ->check(CLI::Range(0, 1 << 20));
  c->callback([run, o] { *run = [o] { return RunAgent(*o); }; });
}

}  // namespace anneal::cli
