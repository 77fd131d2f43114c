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

}  // namespace anneal
