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
  // OOM events inside the group so far; -1 unknown. cgroup v2: memory.events "oom_kill" (counted up
  // the hierarchy, so a container's group below this one counts here). v1: memory.oom_control
  // "oom_kill" counts only kills in this group itself — a container's own group below it keeps its
  // count and loses it when the container ends — so with a memory limit, one more once the group's
  // peak usage (memory.max_usage_in_bytes, memory.memsw.max_usage_in_bytes) reached it: a rank killed
  // by SIGKILL after that ran out of memory.
  long long OomKills() const;
  // Whether the peak usage reaching the limit counts (v1): only where a container's group keeps the
  // kill count (an image: job) — elsewhere page cache alone can reach the limit with no kill.
  void CountLimitReached(bool on) { count_limit_reached_ = on; }
  // The processes inside now.
  std::vector<int> Pids() const;
  // SIGKILLs every process inside until none is left (new forks included); how many it killed.
  int KillAll();

 private:
  JobCgroup() = default;
  std::vector<std::string> dirs_;
  std::string memory_dir_;  // where the OOM count is read
  bool v2_ = false;
  bool memory_limited_ = false;
  bool count_limit_reached_ = false;
};

}  // namespace anneal
