// RankContract: who a process is in its job, and what its attempt shares — the rank contract
// (DESIGN.md; the variables are listed once, in docs/job-spec.md). Its one writer is ToEnvironment()
// (the launcher's ranks, launch-rank's from mpirun's or srun's own variables, `anneal exec`'s node
// variables) and its one reader FromEnvironment(); the rest of the runtime takes these values, never
// the environment.
//
// The rank is read from the first scheme that is set:
//   anneal launch / torchrun: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK
//   mpirun (Open MPI):        OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
//   srun (Slurm):             SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID
//   none of them:             a one-process job (rank 0 of 1)
// and written in the first. The attempt: ANNEAL_JOB, ANNEAL_ATTEMPT (0 when unset; torchrun's
// TORCHELASTIC_RESTART_COUNT is written beside it), ANNEAL_STORE (the rendezvous store: host:port or
// file:///dir), ANNEAL_HOSTS (every node's address, in node order), ANNEAL_CURRENT_HOST (this node's),
// MASTER_ADDR and MASTER_PORT (free for the ranks' own use; a shared-folder store's job lives at
// MASTER_ADDR). The job's options: ANNEAL_PROGRESS_DIR (where the agent reads each rank's step times),
// ANNEAL_OUTPUT_DIR (the job's output folder, where step traces go), ANNEAL_BIND_ADDR (this rank's
// address for its peers), ANNEAL_SHM=0 (no shared-memory reductions between one host's ranks).
// Inconsistent values (RANK >= WORLD_SIZE, non-numbers) are InvalidInput (exit 2).
#pragma once

#include <map>
#include <string>

#include "comm/communicator.h"
#include "core/status.h"

namespace anneal {

struct RankContract {
  // The rank.
  int rank = 0, world = 1;
  int local_rank = 0, local_world = 1;
  int node_rank = 0;
  // The attempt.
  std::string job;           // ANNEAL_JOB
  int attempt = 0;           // ANNEAL_ATTEMPT
  std::string store;         // ANNEAL_STORE
  std::string hosts;         // ANNEAL_HOSTS ("a,b": node order)
  std::string current_host;  // ANNEAL_CURRENT_HOST
  std::string master_addr;   // MASTER_ADDR
  int master_port = 0;       // MASTER_PORT (0: not set)
  // The job's options.
  std::string progress_dir;  // ANNEAL_PROGRESS_DIR ("" = none)
  std::string output_dir;    // ANNEAL_OUTPUT_DIR ("" = none)
  std::string bind_addr;     // ANNEAL_BIND_ADDR ("" = the interface routing to the store)
  bool shared_memory = true;  // ANNEAL_SHM != 0
  // Read only: the scheme the rank came from ("anneal launch / torchrun", "mpirun", "srun" or "none").
  std::string launcher = "none";

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

  // Every variable of the contract this value sets, in anneal launch's scheme: the rank's always
  // (with torchrun's ROLE_RANK), the attempt's number always, text only when not empty, MASTER_PORT
  // when set, ANNEAL_SHM only as 0.
  std::map<std::string, std::string> ToEnvironment() const;
  // The same without the variables of one rank (RANK, LOCAL_RANK, ROLE_RANK): what every process of
  // a node shares (an `anneal exec` into the job).
  std::map<std::string, std::string> NodeEnvironment() const;
  // The job's options alone (ANNEAL_PROGRESS_DIR, ANNEAL_OUTPUT_DIR, ANNEAL_BIND_ADDR, ANNEAL_SHM), as
  // the agent hands them to its launcher for every rank it starts.
  std::map<std::string, std::string> JobOptionsEnvironment() const;

  static Result<RankContract> FromEnvironment(const std::map<std::string, std::string>& env);
  static Result<RankContract> FromEnvironment();  // this process's

  // The store key prefix that isolates this attempt: "<job>/attempt/<n>/".
  std::string StorePrefix() const { return (job.empty() ? "job" : job) + "/attempt/" + std::to_string(attempt) + "/"; }
};

// This process's environment as a map (the launcher's ranks start from it; launch-rank reads it).
std::map<std::string, std::string> ProcessEnvironment();

}  // namespace anneal
