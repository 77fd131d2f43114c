// The Slurm backend: a job attempt's instances are one Slurm job of N nodes whose tasks are `anneal
// agent`s (provision/slurm_text.h). One squeue per poll for every gang of this server; a gang gone from
// squeue is looked up once with scontrol (accounting may be off) and its instances reported gone.
// A pending gang's instances are reported pending with Slurm's reason. When every instance of a gang
// is released, the agents exit on their next heartbeat; a gang still queued or running release_grace_s
// later is cancelled (scancel).
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "provision/command.h"
#include "provision/slurm_backend.h"
#include "core/clock.h"
#include "core/env.h"
#include "core/text.h"

namespace anneal {

namespace {

class SlurmBackend : public InstanceProvider {
 public:
  SlurmBackend(const SlurmOptions& o, int nodes, CommandRunner run) : o_(o), nodes_(nodes), run_(std::move(run)) {}

  std::string name() const override { return "slurm"; }
  bool obtains() const override { return true; }
  int capacity() const override { return nodes_; }
  bool queues() const override { return true; }
  std::string CapacityHint() const override {
    return "the Slurm partition " + (o_.partition.empty() ? std::string("(the default)") : o_.partition) + " has " +
           std::to_string(nodes_) + " node(s)";
  }

  Status Obtain(const GangRequest& g) override {
    if (g.instances.empty()) return Status::Ok();
    ANNEAL_RETURN_IF_ERROR(Env::Default().CreateDirs(o_.script_dir));
    // Each instance's one-time secret, in a file only this user reads, at the same path on the nodes
    // (script_dir is on the shared file system); its agent deletes it once read.
    for (const auto& i : g.instances) {
      const std::string path = o_.script_dir + "/" + i.id + ".secret";
      ANNEAL_RETURN_IF_ERROR(Env::Default().WriteFileAtomic(path, i.secret + "\n"));
      if (::chmod(path.c_str(), 0600) != 0) return IoError("cannot make " + path + " private (chmod 600)");
    }
    const std::string script = o_.script_dir + "/" + SlurmJobName(g) + ".sh";
    ANNEAL_RETURN_IF_ERROR(Env::Default().WriteFileAtomic(script, BatchScript(o_, g)));
    ::chmod(script.c_str(), 0700);
    ANNEAL_ASSIGN_OR_RETURN(CommandResult r, run_(SbatchArgs(o_, g, script)));
    const std::string id = r.out.substr(0, r.out.find_first_of(";\n"));
    if (r.exit_code != 0 || id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
      return PeerError("sbatch refused " + SlurmJobName(g) + " (exit " + std::to_string(r.exit_code) + "): " + TrimTrailing(r.err + r.out));
    }
    Gang gang{id, {}, {}, -1, "PENDING", "None"};
    for (const auto& i : g.instances) gang.ids.push_back(i.id);
    gangs_[id] = gang;
    return Status::Ok();
  }

  void Release(const std::string& id) override {
    for (auto& [sid, g] : gangs_) {
      if (std::find(g.ids.begin(), g.ids.end(), id) == g.ids.end()) continue;
      g.released.insert(id);
      if (g.released.size() == g.ids.size() && g.all_released_at < 0) g.all_released_at = MonotonicSeconds();
    }
  }

  ProvisionReport Poll() override {
    ProvisionReport report;
    if (MonotonicSeconds() - last_poll_ < o_.poll_s) return Pending(report);
    last_poll_ = MonotonicSeconds();
    auto q = run_({"squeue", "-h", "-o", kSqueueFormat});
    if (!q.ok() || q->exit_code != 0) return Pending(report);  // the controller may be busy: ask next tick
    std::set<std::string> seen;
    for (const SqueueLine& l : ParseSqueue(q->out, o_.tag)) {
      seen.insert(l.slurm_id);
      Gang& g = gangs_[l.slurm_id];  // a gang of an earlier server run is found again here
      if (g.slurm_id.empty()) g = Gang{l.slurm_id, l.ids, {}, -1, "", ""};
      g.state = l.state;
      g.reason = l.reason;
    }
    for (auto it = gangs_.begin(); it != gangs_.end();) {
      Gang& g = it->second;
      if (seen.count(g.slurm_id)) {
        CancelIfReleased(g);
        ++it;
        continue;
      }
      Ended(g);
      for (const auto& id : g.ids) report.gone.push_back(id);
      it = gangs_.erase(it);
    }
    return Pending(report);
  }

 private:
  struct Gang {
    std::string slurm_id;
    std::vector<std::string> ids;
    std::set<std::string> released;
    double all_released_at = -1;
    std::string state, reason;  // squeue's %T and %r
  };


  // Instances of gangs Slurm has not started yet, with its reason.
  ProvisionReport& Pending(ProvisionReport& r) {
    for (const auto& [sid, g] : gangs_) {
      if (g.state != "PENDING") continue;
      for (const auto& id : g.ids) {
        if (!g.released.count(id)) r.pending[id] = "Slurm job " + sid + " pending: " + g.reason;
      }
    }
    return r;
  }

  void CancelIfReleased(Gang& g) {
    if (g.all_released_at < 0 || MonotonicSeconds() - g.all_released_at < o_.release_grace_s) return;
    (void)run_({"scancel", g.slurm_id});
    g.all_released_at = MonotonicSeconds();  // asked again a grace period later if it is still there
  }

  // A gang gone from squeue: why, for the server's log (its instances are reported gone either way).
  void Ended(const Gang& g) {
    auto r = run_({"scontrol", "-o", "show", "job", g.slurm_id});
    const std::string state = r.ok() ? ScontrolField(r->out, "JobState") : "";
    if (g.released.size() == g.ids.size() && (state == "COMPLETED" || state == "CANCELLED")) return;
    std::fprintf(stderr, "anneal server: Slurm job %s ended%s%s\n", g.slurm_id.c_str(), state.empty() ? "" : " ",
                 state.empty() ? "" : (state + " (" + ScontrolField(r->out, "Reason") + ")").c_str());
  }

  SlurmOptions o_;
  int nodes_;
  CommandRunner run_;
  std::map<std::string, Gang> gangs_;  // by Slurm job id
  double last_poll_ = -1e9;
};

Result<CommandResult> Run(const std::vector<std::string>& argv) {
  CommandOptions co;
  co.timeout_s = 60;
  co.unset_env = {"ANNEAL_JOIN_TOKEN", "ANNEAL_TOKEN", "ANNEAL_TOKEN_FILE"};  // sbatch --export=ALL stores the rest
  return RunCommand(argv, co);
}

}  // namespace

std::unique_ptr<InstanceProvider> MakeSlurmBackendWith(const SlurmOptions& o, int nodes, CommandRunner run) {
  return std::make_unique<SlurmBackend>(o, nodes, std::move(run));
}

CommandRunner SlurmCommands() { return Run; }

}  // namespace anneal

namespace anneal {

namespace {

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }
std::string LastLine(std::string s) {
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s.substr(s.rfind('\n') == std::string::npos ? 0 : s.rfind('\n') + 1);
}

Status CheckAgentRuns(const SlurmOptions& o, CommandRunner& run) {
  std::vector<std::string> a = {"srun", "--nodes=1", "--ntasks=1", "--immediate=30", "--job-name=anneal-check"};
  if (!o.partition.empty()) a.push_back("--partition=" + o.partition);
  if (!o.account.empty()) a.push_back("--account=" + o.account);
  a.insert(a.end(), {o.agent_binary, "--version"});
  ANNEAL_ASSIGN_OR_RETURN(CommandResult r, run(a));
  if (r.exit_code == 0) return Status::Ok();
  const std::string why = r.err + r.out;
  if (why.find("Requested nodes are busy") != std::string::npos) {  // --immediate ran out: every node in use
    std::fprintf(stderr, "anneal server: warning: could not check anneal on a node now (%s)\n", LastLine(why).c_str());
    return Status::Ok();
  }
  return InvalidInput("--backend slurm: " + o.agent_binary + " does not run on the cluster's nodes (srun exit " +
                      std::to_string(r.exit_code) + ": " + LastLine(why) +
                      "): install anneal at the same path on every node, or name it with --slurm-agent-binary");
}

}  // namespace

Result<std::unique_ptr<InstanceProvider>> MakeSlurmBackend(const SlurmOptions& o, CommandRunner run) {
  auto v = run({"sbatch", "--version"});
  if (!v.ok()) {
    return InvalidInput("--backend slurm: sbatch is not on the server's PATH: install Slurm's client commands "
                        "(Debian: slurm-client) or start the server with them on PATH");
  }
  ANNEAL_ASSIGN_OR_RETURN(CommandResult s, run({"sinfo", "-h", "-o", "%P|%D"}));
  if (s.exit_code != 0) {
    return InvalidInput("--backend slurm: no Slurm controller answered (sinfo: " + FirstLine(s.err + s.out) +
                        "): start slurmctld, or point SLURM_CONF at the cluster's slurm.conf");
  }
  const int nodes = PartitionNodes(s.out, o.partition);
  if (nodes < 0) {
    return InvalidInput("--backend slurm: " +
                        (o.partition.empty() ? std::string("the cluster has no default partition: name one with --slurm-partition")
                                             : "no partition '" + o.partition + "' (sinfo lists: " + FirstLine(s.out) +
                                                   "): fix --slurm-partition"));
  }
  for (const auto& [type, t] : o.types) {
    if (!t.partition.empty() && PartitionNodes(s.out, t.partition) < 0) {
      return InvalidInput("--slurm-instance-types: instance type " + type + " names partition '" + t.partition +
                          "', which the cluster does not have");
    }
  }
  ANNEAL_RETURN_IF_ERROR(CheckAgentRuns(o, run));
  return MakeSlurmBackendWith(o, nodes, std::move(run));
}

}  // namespace anneal
