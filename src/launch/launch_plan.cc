#include "launch/launch_plan.h"

#include <algorithm>

namespace anneal {

StorePlan PlanStore(const LaunchOptions& o) {
  const bool multi = o.nnodes > 1;
  StorePlan p;
  p.serve = o.node_rank == 0;
  p.bind = !o.store_bind.empty() ? o.store_bind : multi ? o.master_addr : "127.0.0.1";
  p.port = o.store_port >= 0 ? o.store_port : multi ? o.master_port + 1 : 0;
  return p;
}

std::string StorePlan::Address(const LaunchOptions& o, int listening_port) const {
  // Node 0 reaches its own store where it listens, unless that is every interface.
  const std::string host = serve && bind != "0.0.0.0" ? bind : o.master_addr;
  return host + ":" + std::to_string(listening_port);
}

bool HostsGiven(const LaunchOptions& o) {
  return static_cast<int>(o.hosts.size()) == o.nnodes &&
         std::none_of(o.hosts.begin(), o.hosts.end(), [](const std::string& h) { return h.empty(); });
}

std::optional<std::string> KnownHosts(const LaunchOptions& o, const LocalPlan& local, int attempt) {
  if (local.leading || attempt != o.first_attempt || !HostsGiven(o)) return std::nullopt;
  std::string hosts;
  for (const std::string& h : o.hosts) hosts += (hosts.empty() ? "" : ",") + h;
  return hosts;
}

LocalPlan PlanLocal(const LaunchOptions& o) {
  LocalPlan p;
  p.leading = o.mode != LaunchMode::kAnneal;
  p.world = o.nnodes * o.nproc_per_node;
  p.serves_remote = o.mode == LaunchMode::kMpirun && !o.under_slurm;
  if (!p.leading) {
    for (int l = 0; l < o.nproc_per_node; ++l) {
      p.processes.push_back(LocalProcess{o.node_rank * o.nproc_per_node + l, l, false, true, false});
    }
  } else if (o.node_rank == 0) {
    // A leader that starts its ranks through Slurm stays outside the sandbox (launch-rank enters it).
    p.processes.push_back(LocalProcess{0, 0, true, !(o.mode == LaunchMode::kSrun || o.under_slurm), false});
  } else {
    p.awaits_leader = true;
  }
  return p;
}

RankContract AttemptContract(const LaunchOptions& o, int attempt, const std::string& store, const std::string& hosts,
                             const std::string& current_host) {
  RankContract c;
  c.world = o.nnodes * o.nproc_per_node;
  c.local_world = o.nproc_per_node;
  c.node_rank = o.node_rank;
  c.job = o.job;
  c.attempt = attempt;
  c.store = store;
  c.hosts = hosts;
  c.current_host = current_host;
  c.master_addr = o.master_addr;
  c.master_port = o.master_port;
  return c;
}

std::vector<std::string> SplitList(const std::string& s, char sep) {
  std::vector<std::string> out;
  for (size_t p = 0, q; p <= s.size(); p = q + 1) {
    q = s.find(sep, p);
    if (q == std::string::npos) q = s.size();
    out.push_back(s.substr(p, q - p));
  }
  return out;
}

std::map<std::string, std::string> ProcessEnvironmentFor(const LaunchOptions& o, const LocalProcess& p,
                                                         const RankContract& attempt,
                                                         std::map<std::string, std::string> env,
                                                         const HostFacts& host, const std::string& exec_key) {
  const bool leading = o.mode != LaunchMode::kAnneal;
  // The launcher's own Slurm task (an agent's srun step) is not this rank: drop what describes that
  // task, so that a script reading SLURM_PROCID (as PyTorch Lightning does) cannot take it for its
  // rank; the job's and node's (SLURM_JOB_ID, SLURMD_NODENAME, ...) stay visible. mpirun reads the
  // allocation's shape from SLURM_TASKS_PER_NODE.
  for (const char* k : kSlurmTaskVars) env.erase(k);
  if (!leading) env.erase("SLURM_TASKS_PER_NODE");
  RankContract c = attempt;
  c.rank = p.global;
  c.local_rank = p.local;
  for (const auto& [k, v] : c.ToEnvironment()) env[k] = v;
  for (const auto& [k, v] : o.extra_env) env[k] = v;
  if (o.mode == LaunchMode::kMpirun && o.under_slurm) env["SLURM_OVERLAP"] = "1";  // mpirun's srun of its daemons
  if (o.mode == LaunchMode::kMpirun && !o.under_slurm) env["ANNEAL_LAUNCH_KEY"] = exec_key;  // for launch-rsh
  if (!env.count("OMP_NUM_THREADS")) {
    const unsigned cores = std::max(1u, host.cores);
    env["OMP_NUM_THREADS"] = std::to_string(std::max(1u, cores / static_cast<unsigned>(o.nproc_per_node)));
  }
  if (!leading && host.has_gpus) {
    // One GPU per local rank (an existing CUDA_VISIBLE_DEVICES list is indexed, not replaced).
    std::vector<std::string> ids;
    if (env.count("CUDA_VISIBLE_DEVICES")) ids = SplitList(env["CUDA_VISIBLE_DEVICES"], ',');
    env["CUDA_VISIBLE_DEVICES"] = p.local < static_cast<int>(ids.size()) ? ids[p.local] : std::to_string(p.local);
  }
  return env;
}

std::vector<int> CpuShare(const LaunchOptions& o, const LocalProcess& p, const std::vector<int>& cpus) {
  if (o.mode != LaunchMode::kAnneal || p.daemon || o.cpu_bind != "auto") return {};
  const int share = static_cast<int>(cpus.size()) / o.nproc_per_node;
  if (share < 1) return {};
  return std::vector<int>(cpus.begin() + p.local * share, cpus.begin() + (p.local + 1) * share);
}

}  // namespace anneal
