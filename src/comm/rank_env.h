// RankEnv: who this process is in its job, read from the environment (DESIGN.md, the rank contract).
// Recognised, first match wins:
//   anneal launch / torchrun: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK
//   mpirun (Open MPI):        OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
//   srun (Slurm):             SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID
//   none of them:             a one-process job (rank 0 of 1)
// plus ANNEAL_STORE (the rendezvous store: host:port or file:///dir), ANNEAL_ATTEMPT (0 when unset),
// ANNEAL_JOB, ANNEAL_PROGRESS_DIR (where the agent reads each rank's step times), ANNEAL_OUTPUT_DIR
// (the job's output folder, uploaded to its output.uri: where step traces go), ANNEAL_BIND_ADDR
// (this rank's address for its peers), MASTER_ADDR (where a shared-folder store's job lives) and
// ANNEAL_SHM=0 (no shared-memory reductions between the ranks of one host). Read once, here: the
// rest of the runtime takes these values, never the environment. Inconsistent values (RANK >=
// WORLD_SIZE, non-numbers) are InvalidInput (exit 2).
#pragma once

#include <string>

#include "comm/communicator.h"
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
  std::string progress_dir;  // ANNEAL_PROGRESS_DIR ("" = none)
  std::string output_dir;    // ANNEAL_OUTPUT_DIR ("" = none)
  std::string bind_addr;     // ANNEAL_BIND_ADDR ("" = the interface routing to the store)
  std::string master_addr;   // MASTER_ADDR
  bool shared_memory = true;  // ANNEAL_SHM != 0

  // A communicator's options for this rank (group, members and timeout are the caller's).
  CommOptions Comm() const {
    CommOptions o;
    o.global_rank = rank;
    o.world_size = world;
    o.bind_addr = bind_addr;
    o.master_addr = master_addr;
    o.shared_memory = shared_memory;
    return o;
  }

  static Result<RankEnv> FromEnvironment();
  // The store key prefix that isolates this attempt: "<job>/attempt/<n>/".
  std::string StorePrefix() const { return (job.empty() ? "job" : job) + "/attempt/" + std::to_string(attempt) + "/"; }
};

}  // namespace anneal
