// The instance agent (`anneal agent`): registers with the server, heartbeats, and runs the job the
// server assigns to its instance (DESIGN.md src/agent). One job at a time:
//   1. Downloading: fetch the job's source package and unpack it as the ranks' working directory
//      (<work_dir>/jobs/<job>/code); prepare every channel (data/channel.h: file copies it under
//      the job's folder, shared passes the path, fastfile passes the URI); restore checkpoint.uri into
//      the local checkpoint folder; meet the job's other instances through the server (node 0 picks
//      the ports: MASTER_PORT for the ranks and the launcher's store).
//   2. Training: start procs_per_instance ranks with the launcher of `anneal launch` (launch/launcher.h,
//      the rank contract) plus ANNEAL_CHANNEL_<NAME>, ANNEAL_CHECKPOINT_DIR/URI, ANNEAL_MODEL_DIR,
//      ANNEAL_OUTPUT_DIR, ANNEAL_RESOURCE_CONFIG, ANNEAL_PROGRESS_DIR and the spec's environment;
//      "${VAR}" in the command and hyperparameters is replaced from that environment. Every rank line
//      and metric goes to the server through the Shipper (in order, nothing lost while it is away);
//      system metrics and per-rank step times every metrics interval; the checkpoint folder is
//      uploaded to checkpoint.uri on the same interval.
//   3. Uploading: a last checkpoint upload, then the output and model folders to
//      <output.uri>/<job>/output/ and .../model/.
//   4. Finished: the launcher's exit code and summary (which rank failed first) to the server.
// A stop (from the server, or SIGTERM to the agent) sends the ranks SIGTERM and, after the spec's
// grace period, SIGKILL; uploads still run, so a checkpoint saved on SIGTERM reaches the URI.
#pragma once

#include <string>
#include <vector>

#include "core/clock.h"
#include "core/status.h"

namespace anneal {

struct AgentOptions {
  std::string server_url;
  std::string instance_id;          // "" = the server names it (an agent joining by itself)
  std::string instance_type = "local";
  int slots = 1;
  std::string work_dir;             // jobs' working areas
  std::string address;              // advertised to peers; "" = this host's address toward the server
  double heartbeat_s = 1;
  double metrics_interval_s = 5;
  double orphan_timeout_s = 600;    // idle and the server unreachable this long: exit (code 3)
  bool remove_work_dir = false;     // delete work_dir when the agent exits (ephemeral instances)
  // What the agent registers with: the server's join token (an operator's agent) or its instance's
  // one-time secret (an instance a backend started): read from join_token_fd (a pipe the local
  // backend wrote, read to its end and closed), else this file (deleted after reading with
  // remove_join_token_file: the Slurm backend's per-instance secret file), else $ANNEAL_JOIN_TOKEN
  // (removed from the environment the ranks inherit). Registration answers an instance token used
  // for everything else.
  std::string join_token_file;
  int join_token_fd = -1;
  // A job's source package may unpack to at most this much and this many files (agent/package_unpack.h).
  int64_t max_unpacked_bytes = int64_t{4} << 30;
  int64_t max_unpacked_files = 200000;
  bool remove_join_token_file = false;
  bool keep_job_dirs = false;       // keep <work_dir>/jobs/<job> after the job (default: removed)
  // Each job's ranks run in its sandbox (launch/sandbox.h, agent/job_sandbox.h): their own uid, mount
  // namespace and cgroup. no_sandbox: run them as the agent's user (logged, reported to the server).
  bool no_sandbox = false;
  // Folders and files no job may reach besides the agent's own (work_dir, the join token file, its
  // HOME): the server's data folder (the backends pass it), other agents' folders.
  std::vector<std::string> hide;
  // Set by RunAgent at start: why this host cannot make sandboxes ("" = it can); jobs that need one
  // are then refused, naming this.
  std::string sandbox_unavailable;
  // Heartbeats, the orphan timeout, hang detection, the health checks' and meetings' deadlines.
  Clock* clock = &Clock::Real();
};

// Runs until the server says exit (Ok), SIGTERM/SIGINT (Ok, after stopping a running job), or the
// server stays unreachable (PeerError).
Status RunAgent(const AgentOptions& o);

}  // namespace anneal
