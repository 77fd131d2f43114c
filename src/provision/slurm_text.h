// The Slurm backend's text: the batch script it submits, sbatch's arguments, and what it reads back
// from squeue and scontrol (provision/slurm_backend.cc). Pure functions, unit-tested on captured output
// of Slurm 22.05 (tests/backends/slurm_text_test.cc).
//
// A job attempt's gang is one Slurm job ("allocation") of N nodes, one task per node. Its comment,
// "anneal:<tag>:<id0>,<id1>,...", names the server (tag) and the instance id on each node (by
// SLURM_NODEID), so a restarted server finds its gangs again from squeue alone.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "provision/instance_provider.h"

namespace anneal {

// sbatch options an operator sets per instance type (the server's --slurm-instance-types file); a
// job spec names only the type, never raw options.
struct SlurmTypeOptions {
  std::string partition, constraint, mem;  // mem: sbatch --mem (e.g. 16G); "" = Slurm's default
  int gpus_per_node = 0, cpus_per_task = 0;  // 0 = not passed
};

struct SlurmOptions {
  std::string partition, account, time_limit;  // "" = Slurm's defaults
  std::map<std::string, SlurmTypeOptions> types;
  std::string agent_binary;      // anneal on the nodes
  std::string work_root;         // the agents' working areas on the nodes: <work_root>/<instance id>
  std::string script_dir;        // batch scripts and the agents' output (readable by the server)
  std::vector<std::string> hide;  // passed to the agents as --hide (the server's data folder, the work root)
  bool no_sandbox = false;        // passed to the agents as --no-sandbox
  std::string ca_file;           // the server's CA for https ("" = none)
  std::string tag;               // tells this server's Slurm jobs from others'
  double heartbeat_s = 1;
  int signal_grace_s = 120;      // Slurm's SIGTERM this long before a time limit's kill
  double release_grace_s = 30;   // after every instance of a gang is released, scancel it this long later
  double poll_s = 1;             // squeue at most this often
};

// POSIX shell single-quoting: the word reads back as exactly `s`.
std::string ShellQuote(const std::string& s);

std::string SlurmJobName(const GangRequest& g);
std::string SlurmComment(const std::string& tag, const std::vector<std::string>& ids);
// sbatch's argv (ending with the script's path), for a gang all of one instance type.
std::vector<std::string> SbatchArgs(const SlurmOptions& o, const GangRequest& g, const std::string& script);
// The batch script: one `srun` step of an `anneal agent` per node.
std::string BatchScript(const SlurmOptions& o, const GangRequest& g);

struct SqueueLine {
  std::string slurm_id, state, reason;
  std::vector<std::string> ids;  // the instances, by node
};
// squeue -h -o '%i|%T|%r|%k': this server's jobs (comment "anneal:<tag>:..."), others skipped.
std::vector<SqueueLine> ParseSqueue(const std::string& text, const std::string& tag);
inline const char* kSqueueFormat = "%i|%T|%r|%k";

// One field of `scontrol -o show job ID` (e.g. JobState, Reason); "" when absent.
std::string ScontrolField(const std::string& text, const std::string& key);

// sinfo -h -o '%P|%D': the node count of `partition` ("" = the default one, marked '*'); -1 if absent.
int PartitionNodes(const std::string& sinfo_text, const std::string& partition);

}  // namespace anneal
