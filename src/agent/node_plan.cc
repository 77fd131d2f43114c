#include "agent/node_plan.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>

#include "comm/rank_contract.h"
#include "core/env.h"

namespace anneal {
namespace {

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The spec's environment and secrets, the role's credentials (also kept for the job's own storage
// calls, never put in the agent's environment, which other jobs' threads share).
void PlanEnvironment(const Assignment& a, NodePlan* p) {
  const JobSpec& spec = a.spec;
  for (const auto& [k, v] : spec.environment) p->env[k] = v;
  for (const auto& [k, v] : spec.secrets) {
    p->env[k] = v;
    p->secret_values.push_back(v);
  }
  for (const auto& [k, v] : a.credentials) {
    p->env[k] = v;
    p->storage[k] = v;
    if (k == "AWS_SECRET_ACCESS_KEY") p->secret_values.push_back(v);
  }
}

void PlanChannels(const JobSpec& spec, NodePlan* p) {
  for (const ChannelSpec& c : spec.channels) {
    const std::string var = "ANNEAL_CHANNEL_" + Upper(c.name);
    p->env[var + "_MODE"] = c.mode;
    p->env[var + "_URI"] = c.uri;
    if (c.mode == "fastfile") {  // read in place by the loader (data.mode=fastfile)
      p->env[var] = c.uri;
      p->in_place.push_back(c.uri);
      continue;
    }
    p->channels.push_back({c.name, c.mode, c.uri, JoinPath(JoinPath(p->jobdir, "channels"), c.name), var});
  }
}

// The checkpoint folder, and the folders outside the job's that its ranks write (given to the job's
// uid when it is sandboxed, so first checked).
void PlanCheckpoint(const JobSpec& spec, NodePlan* p) {
  p->ckpt_local = spec.checkpoint_local_path.empty() ? JoinPath(p->jobdir, "checkpoints") : spec.checkpoint_local_path;
  p->ckpt_in_job = IsUnder(p->ckpt_local, p->jobdir);
  if (!p->ckpt_in_job) p->writable.push_back({p->ckpt_local, "checkpoint.local_path"});
  if (!spec.checkpoint_sync) {  // the ranks write it themselves: a folder here (file:// or a path)
    const std::string& u = spec.checkpoint_uri;
    const std::string dir = u.rfind("file://", 0) == 0 ? u.substr(7) : u.rfind('/', 0) == 0 ? u : "";
    if (!dir.empty() && !IsUnder(dir, p->jobdir)) p->writable.push_back({dir, "checkpoint.uri"});
  }
  p->env["ANNEAL_CHECKPOINT_DIR"] = p->ckpt_local;
  if (!spec.checkpoint_uri.empty()) p->env["ANNEAL_CHECKPOINT_URI"] = spec.checkpoint_uri;
  if (!spec.checkpoint_uri.empty() && spec.checkpoint_sync) p->ckpt_sync_uri = spec.checkpoint_uri;
}

void PlanFolders(const Assignment& a, const NodeFacts& f, NodePlan* p) {
  p->output_dir = JoinPath(p->jobdir, "output");
  p->model_dir = JoinPath(p->jobdir, "model");
  p->progress_dir = JoinPath(p->jobdir, "progress-" + std::to_string(a.attempt));
  p->output_uri = a.spec.output_uri;
  RankContract options;  // the contract's job options: its one writer
  options.output_dir = p->output_dir;
  options.progress_dir = p->progress_dir;
  for (auto& [k, v] : options.JobOptionsEnvironment()) p->env[k] = std::move(v);
  p->env["ANNEAL_MODEL_DIR"] = p->model_dir;
  p->env["ANNEAL_INSTANCE_ID"] = f.instance_id;
  p->env["PATH"] = std::filesystem::path(f.self).parent_path().string() + ":" + (f.path.empty() ? "/usr/bin:/bin" : f.path);
}

nlohmann::json ResourceConfig(const Assignment& a, const NodeFacts& f) {
  nlohmann::json rc = {{"job", a.job},
                       {"attempt", a.attempt},
                       {"current_host", "node-" + std::to_string(a.node)},
                       {"current_address", f.address},
                       {"hosts", nlohmann::json::array()},
                       {"addresses", a.addresses},
                       {"procs_per_instance", a.spec.procs_per_instance},
                       {"instance_type", a.spec.instance_type}};
  for (size_t n = 0; n < a.addresses.size(); ++n) rc["hosts"].push_back("node-" + std::to_string(n));
  return rc;
}

Result<LaunchOptions> PlanLaunch(const Assignment& a, const NodeFacts& f) {
  const int nnodes = static_cast<int>(a.addresses.size());
  LaunchOptions lo;
  lo.nproc_per_node = a.spec.procs_per_instance;
  lo.nnodes = nnodes;
  lo.node_rank = a.node;
  lo.master_addr = f.address;  // one node; several: the meeting's
  lo.master_port = 0;
  lo.store_port = -1;
  lo.store_bind = nnodes > 1 ? f.address : "127.0.0.1";
  lo.max_restarts = 0;  // retries are the server's decision (retry.max_attempts)
  lo.job = a.job;
  lo.grace_s = a.spec.grace_period_s;
  lo.first_attempt = a.attempt;
  lo.allow_loopback_master = true;
  ANNEAL_ASSIGN_OR_RETURN(lo.mode, ParseLaunchMode(a.spec.launcher));
  lo.under_slurm = !f.slurm_job.empty();
  if (lo.under_slurm && !f.slurm_node.empty()) lo.node_name = f.slurm_node;  // mpirun and srun name the nodes so
  lo.self = f.self;
  return lo;
}

}  // namespace

Result<NodePlan> PlanNode(const Assignment& a, const NodeFacts& f) {
  NodePlan p;
  p.jobdir = JoinPath(JoinPath(f.work_dir, "jobs"), a.job);
  p.code_dir = JoinPath(p.jobdir, "code");
  if (!a.spec.source.empty()) {
    p.source_sha = a.spec.source.substr(a.spec.source.find(':') + 1);
    p.package_path = JoinPath(p.jobdir, "source.tar.gz");
  }
  PlanEnvironment(a, &p);
  PlanChannels(a.spec, &p);
  PlanCheckpoint(a.spec, &p);
  PlanFolders(a, f, &p);
  p.resource_config_path = JoinPath(p.jobdir, "resourceconfig.json");
  p.resource_config = ResourceConfig(a, f);
  p.env["ANNEAL_RESOURCE_CONFIG"] = p.resource_config_path;
  p.meet = a.addresses.size() > 1;
  ANNEAL_ASSIGN_OR_RETURN(p.launch, PlanLaunch(a, f));
  return p;
}

std::string ExpandVars(const std::string& s, const std::map<std::string, std::string>& env) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 2, "${") == 0) {
      const size_t end = s.find('}', i + 2);
      if (end != std::string::npos) {
        const std::string name = s.substr(i + 2, end - i - 2);
        auto it = env.find(name);
        if (it != env.end()) {
          out += it->second;
          i = end + 1;
          continue;
        }
        if (const char* e = std::getenv(name.c_str())) {
          out += e;
          i = end + 1;
          continue;
        }
      }
    }
    out += s[i++];
  }
  return out;
}

bool IsUnder(const std::string& path, const std::string& folder) {
  return path == folder ||
         (path.size() > folder.size() && path.compare(0, folder.size(), folder) == 0 && path[folder.size()] == '/');
}

}  // namespace anneal
