// What one node's launcher does, as data (launch/launcher.h carries it out): where the rendezvous
// store is served and reached, which local processes an attempt starts (its ranks; in mpirun/srun
// mode the leader on node 0 and nothing on the other nodes), and each process's environment and CPU
// share. Pure functions of the options and the host's facts, tested as data
// (tests/launch/launch_plan_test.cc).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "comm/rank_contract.h"
#include "launch/launcher.h"

namespace anneal {

// The rendezvous store: node 0 serves it on bind:port (port 0: a free one), every node reaches it.
struct StorePlan {
  bool serve = false;
  std::string bind;
  int port = 0;
  // host:port the nodes use, given the port node 0's store listens on.
  std::string Address(const LaunchOptions& o, int listening_port) const;
};
StorePlan PlanStore(const LaunchOptions& o);

// One process this node starts in an attempt.
struct LocalProcess {
  int global = 0, local = 0;  // its rank and local rank (the leader: 0, 0)
  bool leader = false;        // mpirun or srun, starting every rank of the job
  bool wrap = true;           // inside the job's sandbox (LaunchOptions::wrap)
  bool daemon = false;        // an mpirun daemon started for launch-rsh, not a rank
};

struct LocalPlan {
  std::vector<LocalProcess> processes;  // in local-rank order
  bool leading = false;          // mpirun/srun mode
  bool awaits_leader = false;    // a node other than node 0 in mpirun/srun mode: ends with the leader
  bool serves_remote = false;    // runs mpirun's daemons for launch-rsh (mpirun off Slurm)
  int world = 1;
};
LocalPlan PlanLocal(const LaunchOptions& o);

// Whether the caller gave every node's address (LaunchOptions::hosts: one per node, none empty).
bool HostsGiven(const LaunchOptions& o);

// The nodes' addresses for an attempt when they are known without the launchers' meeting in the
// store ("a,b", in node order): the caller's (LaunchOptions::hosts, one per node) for the first
// attempt in the launcher's own mode. nullopt: the launchers meet first — on a restart (every
// launcher must have left the failed attempt), and in mpirun/srun mode (the leader needs every
// node's launch-rank setup, published before the meeting).
std::optional<std::string> KnownHosts(const LaunchOptions& o, const LocalPlan& local, int attempt);

// What a process's environment depends on besides the options.
struct HostFacts {
  bool has_gpus = false;      // /dev/nvidia0 exists
  unsigned cores = 1;         // std::thread::hardware_concurrency
  std::vector<int> cpus;      // the launcher's CPU affinity, ascending
};

// The attempt's part of the rank contract (the same for every process of it).
RankContract AttemptContract(const LaunchOptions& o, int attempt, const std::string& store, const std::string& hosts,
                             const std::string& current_host);

// Process p's environment: the inherited one without the launcher's own Slurm task, the rank
// contract, the options' extra variables over it, OMP_NUM_THREADS unless set, one GPU per rank, and
// in mpirun mode what mpirun's daemons need (SLURM_OVERLAP; ANNEAL_LAUNCH_KEY for launch-rsh).
std::map<std::string, std::string> ProcessEnvironmentFor(const LaunchOptions& o, const LocalProcess& p,
                                                         const RankContract& attempt,
                                                         std::map<std::string, std::string> inherited,
                                                         const HostFacts& host, const std::string& exec_key);

// "a,b,,c" split on sep: {"a", "b", "", "c"} (CUDA_VISIBLE_DEVICES, PATH).
std::vector<std::string> SplitList(const std::string& s, char sep);

// The CPUs local rank `local` is pinned to (--cpu-bind auto, when the launcher's CPUs split evenly
// into at least one per local rank); empty: no pinning (the leader, a daemon, --cpu-bind none).
std::vector<int> CpuShare(const LaunchOptions& o, const LocalProcess& p, const std::vector<int>& cpus);

}  // namespace anneal
