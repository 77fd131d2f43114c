// A job's cgroups on one instance: its memory and CPU limits (resources.memory_mb, resources.cpus),
// the count of OOM kills inside it, and every one of its processes — double-forked ones included,
// which a process group loses — found and ended when the job stops. cgroup v2 where the unified
// hierarchy holds the memory controller (one folder, memory.max, cpu.max, cgroup.kill); cgroup v1
// otherwise (these machines: memory/ and cpu/ hierarchies, root may create groups under both).
// Groups are named <root>/anneal/<name>; the sandbox (launch/sandbox.h) joins each new process.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace anneal {

class JobCgroup {
 public:
  // Creates the groups and sets the limits (0 = none). Unavailable (not root, no hierarchy): an error
  // naming why.
  static Result<std::unique_ptr<JobCgroup>> Create(const std::string& name, int64_t memory_bytes, double cpus);
  ~JobCgroup();  // KillAll, then removes the groups

  // The folders a process joins (their cgroup.procs).
  const std::vector<std::string>& dirs() const { return dirs_; }
  // OOM kills inside the group so far (memory.oom_control or memory.events "oom_kill"); -1 unknown.
  long long OomKills() const;
  // The processes inside now.
  std::vector<int> Pids() const;
  // SIGKILLs every process inside until none is left (new forks included); how many it killed.
  int KillAll();

 private:
  JobCgroup() = default;
  std::vector<std::string> dirs_;
  std::string memory_dir_;  // where the OOM count is read
  bool v2_ = false;
};

}  // namespace anneal
