#include "launch/rank_shim.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>

#include "comm/rank_contract.h"
#include "comm/store.h"
#include "core/env.h"
#include "launch/leader_command.h"
#include "launch/nofollow.h"
#include "launch/sandbox.h"


namespace anneal {

namespace {

// execvp of command (found in PATH); returns only on failure, naming who (launch-rank, launch-daemon).
Status Exec(std::vector<std::string> command, const std::string& who) {
  std::vector<char*> argv;
  for (auto& a : command) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  return IoError(who + ": cannot run '" + command[0] + "': " + std::strerror(errno));
}

// This node's RankSetup, through the store the attempt's part of the rank contract names.
Result<RankSetup> NodeSetup(const std::map<std::string, std::string>& env, const std::string& node) {
  ANNEAL_ASSIGN_OR_RETURN(const RankContract attempt, RankContract::FromEnvironment(env));
  if (attempt.store.empty() || attempt.job.empty()) {
    return InvalidInput("launch-rank: ANNEAL_STORE and ANNEAL_JOB are not set: it runs only as a rank of a job "
                        "whose entrypoint.launcher is mpirun or srun");
  }
  ANNEAL_ASSIGN_OR_RETURN(auto store, OpenStore(attempt.store, std::chrono::seconds(60)));
  const std::string key = LaunchKey(attempt.job, attempt.attempt, "node/" + node);
  ANNEAL_ASSIGN_OR_RETURN(std::string text, store->Get(key, std::chrono::seconds(60)));
  ANNEAL_ASSIGN_OR_RETURN(NodeInfo info, NodeInfoFromJson(text));
  // Root trusts only a setup file root wrote (in the agent's folder, 0600): a job's process may reach
  // the store and name a file of its own.
  // Checked and read through one fd, opened without following links: the file sits in the job's own
  // folder, where a rank could swap it between a check and a read.
  struct stat st {};
  auto file = ReadNoFollow(info.setup_file, &st);
  if (file.ok() && ::geteuid() == 0 && (st.st_uid != 0 || (st.st_mode & 022) != 0)) {
    return InvalidInput("launch-rank: node " + node + "'s rank setup " + info.setup_file +
                        " is not root's own file (mode 0600 or 0640): refused");
  }
  if (!file.ok()) {
    return PeerError("launch-rank: node " + node + "'s rank setup " + info.setup_file + " is not on this machine (" +
                     file.status().message() + "): the ranks were not placed " + "on the nodes in the job's order");
  }
  return RankSetupFromJson(*file);
}

}  // namespace

Status ExecRank(int procs_per_node, const std::vector<std::string>& command) {
  if (command.empty()) return InvalidInput("launch-rank needs the program after --");
  const auto env = ProcessEnvironment();
  ANNEAL_ASSIGN_OR_RETURN(auto contract, RankContractFromLeader(env, procs_per_node));
  ANNEAL_ASSIGN_OR_RETURN(RankSetup setup, NodeSetup(env, contract["GROUP_RANK"]));
  // Under mpirun on Slurm, SLURM_PROCID and the like are the mpirun daemon's task's, not this rank's.
  if (env.count("OMPI_COMM_WORLD_RANK")) {
    for (const char* k : kSlurmTaskVars) ::unsetenv(k);
  }
  for (const auto& [k, v] : setup.env) ::setenv(k.c_str(), v.c_str(), 1);
  for (const auto& [k, v] : contract) ::setenv(k.c_str(), v.c_str(), 1);
  if (!setup.workdir.empty() && ::chdir(setup.workdir.c_str()) != 0) {
    return IoError("launch-rank: cannot enter the working directory " + setup.workdir + ": " + std::strerror(errno));
  }
  // Started as root by srun (or by mpirun's daemons under Slurm): the job's sandbox first. A rank
  // already inside one (started by a sandboxed mpirun) is not root.
  if (!setup.sandbox_plan.empty() && ::geteuid() == 0) {
    ANNEAL_ASSIGN_OR_RETURN(SandboxPlan plan, ReadSandboxPlan(setup.sandbox_plan));
    ANNEAL_RETURN_IF_ERROR(EnterSandbox(plan));
  }
  return Exec(command, "launch-rank");
}

Status ExecDaemon(const std::vector<std::string>& orted_args) {
  const auto env = ProcessEnvironment();
  if (::geteuid() == 0 && env.count("ANNEAL_STORE") && env.count("SLURM_NODEID")) {
    ANNEAL_ASSIGN_OR_RETURN(RankSetup setup, NodeSetup(env, env.at("SLURM_NODEID")));
    if (!setup.sandbox_plan.empty()) {
      if (setup.env.count("TMPDIR")) ::setenv("TMPDIR", setup.env.at("TMPDIR").c_str(), 1);
      if (!setup.workdir.empty() && ::chdir(setup.workdir.c_str()) != 0) {
        return IoError("launch-daemon: cannot enter " + setup.workdir + ": " + std::strerror(errno));
      }
      ANNEAL_ASSIGN_OR_RETURN(SandboxPlan plan, ReadSandboxPlan(setup.sandbox_plan));
      ANNEAL_RETURN_IF_ERROR(EnterSandbox(plan));
    }
  }
  std::vector<std::string> command = {"orted"};
  command.insert(command.end(), orted_args.begin(), orted_args.end());
  return Exec(command, "launch-daemon");
}

}  // namespace anneal
