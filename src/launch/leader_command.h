// Jobs whose program is started by another launcher: entrypoint.launcher mpirun or srun (docs/job-spec.md).
//
// With `anneal` (the default) every node's launcher starts its own ranks (launch/launcher.h). With
// `mpirun` or `srun`, node 0's launcher alone starts one process, the "leader" (mpirun or srun), which
// starts every rank on every node; the other nodes' launchers start nothing and share the leader's
// fate through the store. Each node's launcher writes what its ranks need (RankSetup: the agent's
// prepared working directory and variables, secrets included) to a 0600 file on its node and publishes
// the file's path, never its content, under "<job>/launch/<attempt>/node/<n>"; every rank runs through
// `anneal launch-rank` (launch/rank_shim.h), which reads its node's file and sets the rank contract
// (RANK, WORLD_SIZE, LOCAL_RANK, ... from OMPI_COMM_WORLD_* or SLURM_*) before it execs the program.
//
// Placement: ranks are consecutive per node (mpirun --map-by ppr:P:node in node order; srun's block
// distribution), so a rank's node is RANK / procs_per_node.
//
// These functions are pure (tests/launch/leader_command_test.cc).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace anneal {

enum class LaunchMode { kAnneal, kMpirun, kSrun };

// What describes one Slurm task (an agent's srun step, an mpirun daemon's), not a rank of the job: a
// rank never sees these, so that a script reading SLURM_PROCID (as PyTorch Lightning does) cannot
// take them for its rank. The job's and node's (SLURM_JOB_ID, SLURMD_NODENAME, ...) stay visible.
inline constexpr const char* kSlurmTaskVars[] = {"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_NPROCS",
                                                 "SLURM_GTIDS", "SLURM_TASK_PID", "SLURM_STEP_NUM_TASKS",
                                                 "SLURM_STEP_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE"};

// "anneal" | "mpirun" | "srun"; anything else is InvalidInput naming the three.
Result<LaunchMode> ParseLaunchMode(const std::string& name);
const char* LaunchModeName(LaunchMode m);

// The store key of a launch attempt's value k (the launchers' and launch-rank's common names).
std::string LaunchKey(const std::string& job, int attempt, const std::string& k);

// What node n's launcher publishes in the store.
struct NodeInfo {
  std::string name;        // how the leader names the node: the Slurm node under Slurm, else "node-<n>"
  std::string setup_file;  // the RankSetup file on that node
};
std::string NodeInfoToJson(const NodeInfo& n);
Result<NodeInfo> NodeInfoFromJson(const std::string& text);

// What the ranks placed on a node need from its launcher (kept in a 0600 file there).
struct RankSetup {
  std::string workdir;                     // the ranks' working directory
  std::map<std::string, std::string> env;  // the agent's variables for the ranks
  // The job's sandbox plan (launch/sandbox.h) a rank started outside the launcher (by srun, or by
  // mpirun's daemons under Slurm) enters before the program; "" = none.
  std::string sandbox_plan;
};
std::string RankSetupToJson(const RankSetup& s);
Result<RankSetup> RankSetupFromJson(const std::string& text);

struct LeaderPlan {
  LaunchMode mode = LaunchMode::kMpirun;
  std::vector<std::string> node_names;  // in node order
  int procs_per_node = 1;
  std::string self;                     // this anneal binary (runs launch-rank and launch-rsh)
  std::vector<std::string> command;     // the user's program and arguments
  std::vector<std::string> forward_env; // variable names mpirun passes to remote ranks (-x)
  bool under_slurm = false;             // mpirun then starts its daemons with srun; off Slurm, with launch-rsh
  bool as_root = false;                 // mpirun --allow-run-as-root
};
// The leader's argv.
std::vector<std::string> LeaderArgv(const LeaderPlan& p);

// A line the leader printed, attributed to a rank: mpirun --tag-output's "[1,R]<stdout>:" or
// "<stderr>:" and srun --label's "R: " (left-padded). Returns false for lines without a tag (the
// leader's own), leaving the outputs untouched.
bool SplitRankTag(LaunchMode mode, const std::string& line, int* rank, bool* is_stderr, std::string* rest);

// The rank the leader names as the first to fail, from one of its own lines: Open MPI's
// "  Process name: [[J,1],R]" (after "mpirun detected that one or more processes exited ...") or
// srun's "srun: error: NODE: task R: Exited with exit code N". -1 for any other line. *weight (when
// given) ranks such lines: srun also reports the tasks it killed because of the first ("task R:
// Killed", 0), possibly first; an exit code (2) beats a signal (1), which beats a kill (0).
int LeaderFailedRank(LaunchMode mode, const std::string& line, int* weight = nullptr);

// The rank contract for a process started by mpirun or srun, from its environment: RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK (= RANK / LOCAL_WORLD_SIZE), ROLE_RANK.
// InvalidInput when neither OMPI_COMM_WORLD_RANK nor SLURM_PROCID is set.
Result<std::map<std::string, std::string>> RankContractFromLeader(const std::map<std::string, std::string>& env,
                                                                  int procs_per_node);

}  // namespace anneal
