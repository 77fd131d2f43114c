#include "comm/rank_contract.h"

#include <cstdlib>
#include <cstring>

extern char** environ;

namespace anneal {

namespace {

// The value of name in env, or nullptr when unset or empty.
const char* Get(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  return it != env.end() && !it->second.empty() ? it->second.c_str() : nullptr;
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

struct Scheme {
  const char *name, *rank, *world, *local_rank, *local_world, *node;
};
constexpr Scheme kSchemes[] = {
    {"anneal launch / torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
     nullptr},
    {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr, "SLURM_NODEID"},
};

// The rank from the first scheme env sets (none: rank 0 of 1).
Status ReadRank(const std::map<std::string, std::string>& env, RankContract* c) {
  for (const Scheme& s : kSchemes) {
    if (!Get(env, s.rank) || !Get(env, s.world)) continue;
    c->launcher = s.name;
    ANNEAL_RETURN_IF_ERROR(ParseInt(s.rank, Get(env, s.rank), 0, &c->rank));
    ANNEAL_RETURN_IF_ERROR(ParseInt(s.world, Get(env, s.world), 1, &c->world));
    if (Get(env, s.local_rank)) ANNEAL_RETURN_IF_ERROR(ParseInt(s.local_rank, Get(env, s.local_rank), 0, &c->local_rank));
    c->local_world = c->world;
    if (s.local_world && Get(env, s.local_world)) {
      ANNEAL_RETURN_IF_ERROR(ParseInt(s.local_world, Get(env, s.local_world), 1, &c->local_world));
    }
    if (s.node && Get(env, s.node)) ANNEAL_RETURN_IF_ERROR(ParseInt(s.node, Get(env, s.node), 0, &c->node_rank));
    if (c->rank >= c->world) {
      return InvalidInput(std::string(s.rank) + "=" + std::to_string(c->rank) + " is not below " + s.world + "=" +
                          std::to_string(c->world) + ": fix the launcher's environment");
    }
    return Status::Ok();
  }
  return Status::Ok();
}

void Text(const std::map<std::string, std::string>& env, const char* name, std::string* out) {
  if (const char* v = Get(env, name)) *out = v;
}

void PutText(std::map<std::string, std::string>* env, const char* name, const std::string& v) {
  if (!v.empty()) (*env)[name] = v;
}

}  // namespace

std::map<std::string, std::string> RankContract::NodeEnvironment() const {
  std::map<std::string, std::string> env;
  env["WORLD_SIZE"] = std::to_string(world);
  env["LOCAL_WORLD_SIZE"] = std::to_string(local_world);
  env["GROUP_RANK"] = std::to_string(node_rank);
  env["ANNEAL_ATTEMPT"] = std::to_string(attempt);
  env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(attempt);
  PutText(&env, "ANNEAL_JOB", job);
  PutText(&env, "ANNEAL_STORE", store);
  PutText(&env, "ANNEAL_HOSTS", hosts);
  PutText(&env, "ANNEAL_CURRENT_HOST", current_host);
  PutText(&env, "MASTER_ADDR", master_addr);
  if (master_port > 0) env["MASTER_PORT"] = std::to_string(master_port);
  for (auto& [k, v] : JobOptionsEnvironment()) env[k] = std::move(v);
  return env;
}

std::map<std::string, std::string> RankContract::JobOptionsEnvironment() const {
  std::map<std::string, std::string> env;
  PutText(&env, "ANNEAL_PROGRESS_DIR", progress_dir);
  PutText(&env, "ANNEAL_OUTPUT_DIR", output_dir);
  PutText(&env, "ANNEAL_BIND_ADDR", bind_addr);
  if (!shared_memory) env.insert_or_assign("ANNEAL_SHM", std::string(1, '0'));
  return env;
}

std::map<std::string, std::string> RankContract::ToEnvironment() const {
  std::map<std::string, std::string> env = NodeEnvironment();
  env["RANK"] = std::to_string(rank);
  env["LOCAL_RANK"] = std::to_string(local_rank);
  env["ROLE_RANK"] = std::to_string(rank);
  return env;
}

Result<RankContract> RankContract::FromEnvironment(const std::map<std::string, std::string>& env) {
  RankContract c;
  ANNEAL_RETURN_IF_ERROR(ReadRank(env, &c));
  if (const char* a = Get(env, "ANNEAL_ATTEMPT")) ANNEAL_RETURN_IF_ERROR(ParseInt("ANNEAL_ATTEMPT", a, 0, &c.attempt));
  if (const char* p = Get(env, "MASTER_PORT")) ANNEAL_RETURN_IF_ERROR(ParseInt("MASTER_PORT", p, 0, &c.master_port));
  Text(env, "ANNEAL_JOB", &c.job);
  Text(env, "ANNEAL_STORE", &c.store);
  Text(env, "ANNEAL_HOSTS", &c.hosts);
  Text(env, "ANNEAL_CURRENT_HOST", &c.current_host);
  Text(env, "MASTER_ADDR", &c.master_addr);
  Text(env, "ANNEAL_PROGRESS_DIR", &c.progress_dir);
  Text(env, "ANNEAL_OUTPUT_DIR", &c.output_dir);
  Text(env, "ANNEAL_BIND_ADDR", &c.bind_addr);
  if (const char* s = Get(env, "ANNEAL_SHM")) c.shared_memory = std::string(s) != "0";
  return c;
}

Result<RankContract> RankContract::FromEnvironment() { return FromEnvironment(ProcessEnvironment()); }

std::map<std::string, std::string> ProcessEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq) env[std::string(*e, eq - *e)] = eq + 1;
  }
  return env;
}

}  // namespace anneal
