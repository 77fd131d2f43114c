// `anneal launch-rank`: what every rank of an mpirun or srun job runs first (launch/leader_command.h).
// It finds its node (GROUP_RANK = RANK / procs_per_node), reads that node's RankSetup file (path from
// the store key LaunchKey(ANNEAL_JOB, ANNEAL_ATTEMPT, "node/<n>") in ANNEAL_STORE), puts its variables
// and the rank contract into the environment, enters its working directory and execs the program.
// Returns only on failure: InvalidInput when it is not a rank of mpirun or srun, PeerError when the
// store or the setup does not answer, IoError when the program cannot run.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace anneal {

Status ExecRank(int procs_per_node, const std::vector<std::string>& command);

// `anneal launch-daemon ORTED_ARGS...`: Open MPI's daemon on a Slurm node of an mpirun job (mpirun's
// orte_launch_agent; srun starts it as root). It finds its node (SLURM_NODEID, the agents' node
// order), reads that node's RankSetup like launch-rank, enters the node's job sandbox with the
// node's TMPDIR (where the daemon makes its session folder), and execs `orted ORTED_ARGS...`: the
// daemon and the ranks it starts run as the job's uid in its sandbox, so the ranks reach the
// daemon's session folder (a root daemon's is root's alone). Not root, or no sandbox: just execs orted.
Status ExecDaemon(const std::vector<std::string>& orted_args);

}  // namespace anneal
