#include "comm/rank_env.h"

#include <cstdlib>

namespace anneal {

namespace {

const char* Get(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

Status ParseInt(const char* name, const char* text, int lo, int* out) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (!end || *end || v < lo || v > (1 << 24)) {
    return InvalidInput(std::string("environment variable ") + name + "='" + text + "' is not a valid number (at least " +
                        std::to_string(lo) + "): fix the launcher's environment");
  }
  *out = static_cast<int>(v);
  return Status::Ok();
}

}  // namespace

Result<RankEnv> RankEnv::FromEnvironment() {
  RankEnv e;
  struct Scheme {
    const char *name, *rank, *world, *local_rank, *local_world, *node;
  };
  static const Scheme kSchemes[] = {
      {"anneal launch / torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"},
      {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
       "OMPI_COMM_WORLD_LOCAL_SIZE", nullptr},
      {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr, "SLURM_NODEID"},
  };
  e.launcher = "none";
  for (const Scheme& s : kSchemes) {
    if (!Get(s.rank) || !Get(s.world)) continue;
    e.launcher = s.name;
    ANNEAL_RETURN_IF_ERROR(ParseInt(s.rank, Get(s.rank), 0, &e.rank));
    ANNEAL_RETURN_IF_ERROR(ParseInt(s.world, Get(s.world), 1, &e.world));
    if (Get(s.local_rank)) ANNEAL_RETURN_IF_ERROR(ParseInt(s.local_rank, Get(s.local_rank), 0, &e.local_rank));
    e.local_world = e.world;
    if (s.local_world && Get(s.local_world)) {
      ANNEAL_RETURN_IF_ERROR(ParseInt(s.local_world, Get(s.local_world), 1, &e.local_world));
    }
    if (s.node && Get(s.node)) ANNEAL_RETURN_IF_ERROR(ParseInt(s.node, Get(s.node), 0, &e.node_rank));
    if (e.rank >= e.world) {
      return InvalidInput(std::string(s.rank) + "=" + std::to_string(e.rank) + " is not below " + s.world + "=" +
                          std::to_string(e.world) + ": fix the launcher's environment");
    }
    break;
  }
  if (Get("ANNEAL_ATTEMPT")) ANNEAL_RETURN_IF_ERROR(ParseInt("ANNEAL_ATTEMPT", Get("ANNEAL_ATTEMPT"), 0, &e.attempt));
  if (Get("ANNEAL_STORE")) e.store = Get("ANNEAL_STORE");
  if (Get("ANNEAL_JOB")) e.job = Get("ANNEAL_JOB");
  if (Get("ANNEAL_PROGRESS_DIR")) e.progress_dir = Get("ANNEAL_PROGRESS_DIR");
  if (Get("ANNEAL_OUTPUT_DIR")) e.output_dir = Get("ANNEAL_OUTPUT_DIR");
  if (Get("ANNEAL_BIND_ADDR")) e.bind_addr = Get("ANNEAL_BIND_ADDR");
  if (Get("MASTER_ADDR")) e.master_addr = Get("MASTER_ADDR");
  if (Get("ANNEAL_SHM")) e.shared_memory = std::string(Get("ANNEAL_SHM")) != "0";
  return e;
}

}  // namespace anneal
