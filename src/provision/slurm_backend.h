// `anneal server --backend slurm` (provision/slurm_backend.cc; the script and parsing: slurm_text.h).
#pragma once

#include <memory>

#include "provision/instance_provider.h"
#include "provision/command.h"
#include "provision/slurm_text.h"

namespace anneal {

// Checks the cluster before the server starts, each failure naming its fix (InvalidInput): sbatch is
// on PATH, a controller answers (sinfo), the partition exists (its node count is the capacity), and
// anneal runs on a node (one srun of `AGENT --version`; a cluster too busy to run it now is only a
// warning on standard error).
Result<std::unique_ptr<InstanceProvider>> MakeSlurmBackend(const SlurmOptions& o, CommandRunner run);

// The backend without the checks, on a partition of `nodes` nodes (unit tests, with a fake runner).
std::unique_ptr<InstanceProvider> MakeSlurmBackendWith(const SlurmOptions& o, int nodes, CommandRunner run);

// RunCommand with a minute's limit and without the server's secrets in the environment.
CommandRunner SlurmCommands();

}  // namespace anneal
