// The launcher behind `anneal launch`: starts this node's ranks of a job under the rank contract
// (DESIGN.md), supervises them, and restarts the whole group when any rank fails.
//
// One launcher runs per node. Node 0's serves the rendezvous store on its own port (ANNEAL_STORE;
// MASTER_ADDR/MASTER_PORT stay free for the ranks' own use). The launchers meet in the store before
// every attempt (each publishes its address, which gives ANNEAL_HOSTS) — except the first when the
// caller knows every node's address already (LaunchOptions::hosts: the agent's, from the server) —
// and share the attempt's fate through it: the first failure anywhere is recorded under "<job>/launch/<attempt>/failed", every
// launcher stops its ranks (SIGTERM, then SIGKILL after the grace), and, while restarts remain, all
// start attempt+1 together; the ranks resume from the newest complete checkpoint by themselves.
// A rank exiting 2 (bad input) is never restarted: retrying cannot fix a config.
//
// Per rank: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_RANK, MASTER_ADDR,
// MASTER_PORT, TORCHELASTIC_RESTART_COUNT, OMP_NUM_THREADS (the node's cores split across its
// ranks, unless set; with --cpu-bind auto each rank is also pinned to its share of the CPUs),
// CUDA_VISIBLE_DEVICES (one GPU per rank when the node has GPUs), ANNEAL_JOB,
// ANNEAL_ATTEMPT, ANNEAL_STORE, ANNEAL_HOSTS, ANNEAL_CURRENT_HOST. Every line a rank prints is
// prefixed "[rank R] ". SIGINT/SIGTERM to the launcher are forwarded (as SIGTERM) and end the job.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "launch/leader_command.h"

namespace anneal {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int store_port = -1;       // -1: master_port + 1 with several nodes, a free port with one
  std::string store_bind;    // empty: master_addr with several nodes, 127.0.0.1 with one
  // Every node's address, by node (ANNEAL_HOSTS), when the caller met the others already (the agent,
  // through the server): the first attempt then starts without the launchers' meeting in the store.
  // Empty, or in mpirun/srun mode: the launchers meet before every attempt.
  std::vector<std::string> hosts;
  int max_restarts = 0;
  std::string job = "local";
  double grace_s = 15;       // after a failure, how long the other ranks get to exit by themselves
  double rendezvous_timeout_s = 300;
  // "auto": when the launcher's CPUs split evenly into at least one per local rank, pin local rank l
  // to the l-th share (as mpirun binds to cores); "none": leave placement to the kernel.
  std::string cpu_bind = "auto";
  std::vector<std::string> command;  // the rank's program and arguments

  // For a launcher embedded in another process (the agent, src/agent):
  // each line a rank prints goes to on_output instead of this process's stdout/stderr;
  std::function<void(int rank, bool is_stderr, const std::string& line)> on_output;
  // setting *stop from any thread ends the job as SIGTERM to the launcher does (the process's own
  // SIGTERM/SIGINT handlers are then left alone);
  const std::atomic<bool>* stop = nullptr;
  // added to every rank's environment (over the inherited one);
  std::map<std::string, std::string> extra_env;
  // the ranks' working directory ("" = the launcher's);
  std::string workdir;
  // several nodes on one machine (the local backend): 127.0.0.1 is then a valid --master-addr;
  bool allow_loopback_master = false;
  // called once the attempt's ranks are running;
  std::function<void(int attempt)> on_started;
  // setting *kill ends the job at once: SIGCONT then SIGKILL to every rank, no grace (a hung job,
  // whose ranks cannot save anything);
  const std::atomic<bool>* kill = nullptr;
  // the first attempt's number (ANNEAL_ATTEMPT, TORCHELASTIC_RESTART_COUNT): a job restarted by the
  // control plane counts on from its earlier attempts.
  int first_attempt = 0;
  // entrypoint.launcher (launch/leader_command.h): with kMpirun or kSrun, node 0 starts one leader
  // process (mpirun or srun) that starts all nproc_per_node * nnodes ranks; the other nodes start
  // nothing of their own (off Slurm they run mpirun's daemons: launch/remote_exec.h) and end with it.
  LaunchMode mode = LaunchMode::kAnneal;
  std::string node_name;   // the leader's name for this node ("" = "node-<node_rank>")
  bool under_slurm = false;  // the nodes are a Slurm allocation (mpirun then starts its daemons with srun)
  std::string exec_key;    // authenticates launch-rsh requests; "" = a random one (one node only)
  std::string self;        // the anneal binary (launch-rank, launch-rsh)
  // The job's sandbox (launch/sandbox.h; the agent's): `wrap` goes before every command this launcher
  // starts (its ranks, mpirun off Slurm, mpirun's daemons), except a leader that starts the ranks
  // through Slurm (srun, or mpirun under Slurm: Slurm refuses a step from another uid), whose ranks
  // enter sandbox_plan in launch-rank instead; the folders it makes for a rank go to owner_uid.
  std::vector<std::string> wrap;
  std::string sandbox_plan;
  int owner_uid = -1;
  // Every wait and deadline above (the rendezvous, the grace) on this clock (tests: a SimulatedClock).
  Clock* clock = &Clock::Real();
};

struct LaunchResult {
  int exit_code = 0;     // 0 success; the first failed rank's code (1, 2, 3), or 3 for a rank lost to a signal
  int attempts = 0;
  std::string summary;   // which rank failed first and how, per attempt
  // The last attempt's first failure: the rank, its wait status (waitpid's), and whether it happened
  // on this node (false: another node's failure stopped this one; failed_rank is then -1).
  int failed_rank = -1;
  int failed_status = 0;
  bool failure_local = false;
  bool interrupted = false;  // ended by a stop request or a signal
  int signal = 0;            // interrupted by this signal to the launcher itself (SIGINT, SIGTERM; 0: other)
  std::string last_words;    // interrupted: the first local rank's last line (anneal train: where it saved)
};

// Runs the job on this node. Errors in the options themselves are InvalidInput (exit 2).
Result<LaunchResult> RunLauncher(const LaunchOptions& o, const std::function<void(const std::string&)>& log);

}  // namespace anneal
