#include "launch/leader_command.h"

#include "comm/rank_contract.h"

#include <cctype>
#include <cstdlib>
#include <cstring>

#include <nlohmann/json.hpp>


namespace anneal {

using nlohmann::json;

Result<LaunchMode> ParseLaunchMode(const std::string& name) {
  if (name == "anneal") return LaunchMode::kAnneal;
  if (name == "mpirun") return LaunchMode::kMpirun;
  if (name == "srun") return LaunchMode::kSrun;
  return InvalidInput("launcher '" + name + "' is not one of anneal, mpirun, srun");
}

const char* LaunchModeName(LaunchMode m) {
  switch (m) {
    case LaunchMode::kMpirun: return "mpirun";
    case LaunchMode::kSrun: return "srun";
    default: return "anneal";
  }
}

std::string LaunchKey(const std::string& job, int attempt, const std::string& k) {
  return job + "/launch/" + std::to_string(attempt) + "/" + k;
}

std::string NodeInfoToJson(const NodeInfo& n) { return json{{"name", n.name}, {"setup_file", n.setup_file}}.dump(); }

Result<NodeInfo> NodeInfoFromJson(const std::string& text) {
  try {
    const json j = json::parse(text);
    return NodeInfo{j.at("name").get<std::string>(), j.at("setup_file").get<std::string>()};
  } catch (const std::exception& e) {
    return InvalidInput(std::string("a node's launch information is not valid: ") + e.what());
  }
}

std::string RankSetupToJson(const RankSetup& s) {
  return json{{"workdir", s.workdir}, {"env", s.env}, {"sandbox_plan", s.sandbox_plan}}.dump();
}

Result<RankSetup> RankSetupFromJson(const std::string& text) {
  try {
    const json j = json::parse(text);
    return RankSetup{j.at("workdir").get<std::string>(), j.at("env").get<std::map<std::string, std::string>>(),
                     j.value("sandbox_plan", std::string())};
  } catch (const std::exception& e) {
    return InvalidInput(std::string("a node's rank setup file is not valid: ") + e.what());
  }
}

namespace {

std::vector<std::string> MpirunArgv(const LeaderPlan& p) {
  const int world = static_cast<int>(p.node_names.size()) * p.procs_per_node;
  std::string hosts;
  for (const std::string& n : p.node_names) hosts += (hosts.empty() ? "" : ",") + n + ":" + std::to_string(p.procs_per_node);
  std::vector<std::string> a = {"mpirun", "-np", std::to_string(world), "--host", hosts, "--map-by",
                                "ppr:" + std::to_string(p.procs_per_node) + ":node", "--oversubscribe", "--tag-output",
                                // the daemons stay children of their launchers (the rsh agent, srun) until the job ends
                                "--leave-session-attached"};
  if (p.as_root) a.push_back("--allow-run-as-root");
  if (!p.under_slurm) {
    // Remote daemons through the job's own launchers (launch-rsh), never through sshd; every daemon
    // from mpirun itself, so that each goes through the launcher of its node.
    a.insert(a.end(), {"--mca", "plm", "rsh", "--mca", "plm_rsh_agent", p.self + " launch-rsh", "--mca",
                       "plm_rsh_no_tree_spawn", "1"});
  } else {
    // srun starts each node's daemon as root: launch-daemon puts it in the node's job sandbox first,
    // where node 0's working directory is not to be seen: the daemons start the ranks in /, and
    // launch-rank enters each node's own.
    a.insert(a.end(), {"--mca", "orte_launch_agent", p.self + " launch-daemon", "--wdir", "/"});
  }
  for (const std::string& v : p.forward_env) a.insert(a.end(), {"-x", v});
  return a;
}

std::vector<std::string> SrunArgv(const LeaderPlan& p) {
  // --overlap: the agents' own step holds the allocation's CPUs; --kill-on-bad-exit: one failed rank
  // ends the step, as one failed rank ends an anneal launch.
  return {"srun", "--overlap", "--nodes=" + std::to_string(p.node_names.size()),
          "--ntasks-per-node=" + std::to_string(p.procs_per_node), "--distribution=block", "--kill-on-bad-exit=1",
          "--label", "--export=ALL"};
}

}  // namespace

std::vector<std::string> LeaderArgv(const LeaderPlan& p) {
  std::vector<std::string> a = p.mode == LaunchMode::kSrun ? SrunArgv(p) : MpirunArgv(p);
  a.insert(a.end(), {p.self, "launch-rank", "--procs-per-node", std::to_string(p.procs_per_node), "--"});
  a.insert(a.end(), p.command.begin(), p.command.end());
  return a;
}

namespace {

// Digits at s[*at..]; false when there are none.
bool ReadInt(const std::string& s, size_t* at, int* v) {
  const size_t from = *at;
  while (*at < s.size() && std::isdigit(static_cast<unsigned char>(s[*at]))) ++*at;
  if (*at == from || *at - from > 9) return false;
  *v = std::atoi(s.substr(from, *at - from).c_str());
  return true;
}

}  // namespace

bool SplitRankTag(LaunchMode mode, const std::string& line, int* rank, bool* is_stderr, std::string* rest) {
  size_t at = 0;
  int r = 0;
  if (mode == LaunchMode::kMpirun) {
    // [JOBID,RANK]<stdout>:text
    if (line.empty() || line[0] != '[') return false;
    at = 1;
    int job = 0;
    if (!ReadInt(line, &at, &job) || at >= line.size() || line[at] != ',') return false;
    ++at;
    if (!ReadInt(line, &at, &r) || line.compare(at, 1, "]") != 0) return false;
    ++at;
    bool err;
    if (line.compare(at, 9, "<stdout>:") == 0) {
      err = false;
    } else if (line.compare(at, 9, "<stderr>:") == 0) {
      err = true;
    } else {
      return false;
    }
    *rank = r;
    *is_stderr = err;
    *rest = line.substr(at + 9);
    return true;
  }
  if (mode == LaunchMode::kSrun) {
    // "R: text", R left-padded with spaces to the width of the largest task id.
    while (at < line.size() && line[at] == ' ') ++at;
    if (!ReadInt(line, &at, &r) || line.compare(at, 2, ": ") != 0) return false;
    *rank = r;
    *rest = line.substr(at + 2);
    return true;  // *is_stderr: srun keeps the streams apart itself
  }
  return false;
}

int LeaderFailedRank(LaunchMode mode, const std::string& line, int* weight) {
  int r = -1;
  size_t at;
  if (weight) {
    *weight = line.find("Exited with exit code") != std::string::npos ? 2 : line.find(": Killed") != std::string::npos ? 0 : 1;
  }
  if (mode == LaunchMode::kMpirun && (at = line.find("Process name: [[")) != std::string::npos) {
    at = line.find("],", at);
    if (at == std::string::npos) return -1;
    at += 2;
    if (!ReadInt(line, &at, &r) || line.compare(at, 1, "]") != 0) return -1;
    return r;
  }
  if (mode == LaunchMode::kSrun && line.rfind("srun: error: ", 0) == 0 && (at = line.find(": task ")) != std::string::npos) {
    at += 7;
    if (!ReadInt(line, &at, &r) || line.compare(at, 1, ":") != 0) return -1;
    return r;
  }
  return -1;
}

namespace {

// The value of the first of `names` that env has.
const std::string* First(const std::map<std::string, std::string>& env, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    auto it = env.find(n);
    if (it != env.end() && !it->second.empty()) return &it->second;
  }
  return nullptr;
}

Result<int> Count(const std::string* v, const char* what) {
  char* end = nullptr;
  const long n = v ? std::strtol(v->c_str(), &end, 10) : -1;
  if (!v || *end != '\0' || n < 0) {
    return InvalidInput(std::string("launch-rank: ") + what + " is " + (v ? "'" + *v + "'" : "not set") +
                        ": run it only as a rank of mpirun or srun (entrypoint.launcher)");
  }
  return static_cast<int>(n);
}

}  // namespace

Result<std::map<std::string, std::string>> RankContractFromLeader(const std::map<std::string, std::string>& env,
                                                                  int procs_per_node) {
  if (procs_per_node < 1) return InvalidInput("launch-rank: --procs-per-node must be at least 1");
  ANNEAL_ASSIGN_OR_RETURN(int rank, Count(First(env, {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"}), "the rank (OMPI_COMM_WORLD_RANK or SLURM_PROCID)"));
  ANNEAL_ASSIGN_OR_RETURN(int world, Count(First(env, {"OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "SLURM_NPROCS"}), "the world size (OMPI_COMM_WORLD_SIZE or SLURM_NTASKS)"));
  if (rank >= world) {
    return InvalidInput("launch-rank: rank " + std::to_string(rank) + " is not below the world size " + std::to_string(world));
  }
  // The attempt's part as the leader forwarded it; the rank's from the leader's own variables.
  ANNEAL_ASSIGN_OR_RETURN(RankContract c, RankContract::FromEnvironment(env));
  c.rank = rank;
  c.world = world;
  c.local_rank = rank % procs_per_node;
  c.local_world = procs_per_node;
  c.node_rank = rank / procs_per_node;
  return c.ToEnvironment();
}

}  // namespace anneal
