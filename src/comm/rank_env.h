// RankEnv: who this process is in its job, read from the environment (DESIGN.md, the rank contract).
// Recognised, first match wins:
//   anneal launch / torchrun: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK
//   mpirun (Open MPI):        OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
//   srun (Slurm):             SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID
//   none of them:             a one-process job (rank 0 of 1)
// plus ANNEAL_STORE (the rendezvous store: host:port or file:///dir), ANNEAL_ATTEMPT (0 when unset)
// and ANNEAL_JOB. Inconsistent values (RANK >= WORLD_SIZE, non-numbers) are InvalidInput (exit 2).
#pragma once

#include <string>

#include "core/status.h"

namespace anneal {

struct RankEnv {
  int rank = 0, world = 1;
  int local_rank = 0, local_world = 1;
  int node_rank = 0;
  int attempt = 0;
  std::string store;     // ANNEAL_STORE
  std::string job;       // ANNEAL_JOB
  std::string launcher;  // "anneal launch / torchrun", "mpirun", "srun" or "none"

  static Result<RankEnv> FromEnvironment();
  // The store key prefix that isolates this attempt: "<job>/attempt/<n>/".
  std::string StorePrefix() const { return (job.empty() ? "job" : job) + "/attempt/" + std::to_string(attempt) + "/"; }
};

}  // namespace anneal
