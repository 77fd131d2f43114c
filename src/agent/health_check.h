// Pre-start health checks of an instance (docs/health-checks.md): what the agent verifies on its
// instance before a job's ranks start there, so a job is not placed on a broken machine.
//
// Every check is a small function returning one JSON object:
//   {"name": "cpu"|"memory"|"disk"|"gpu"|"command", "ok": bool, "detail": "human text", ...numbers...}
// plus "skipped": "why" when there was nothing to check (ok is then true). The checks:
//   cpu      CPUs this process may run on (sched_getaffinity) >= slots; a ~50 ms one-thread FMA probe
//            reports "gflops" (not a threshold: a measurement for the operator).
//   memory   MemAvailable (/proc/meminfo), or the cgroup's room if lower (limit - working set, where
//            the working set is usage minus inactive file pages, as the kubelet counts it; cgroup v2
//            memory.max/current, v1 memory.limit_in_bytes/usage_in_bytes, this cgroup and its
//            ancestors) >= min_free_memory_gb.
//   disk     free space of work_dir (statvfs, f_bavail) >= min_free_disk_gb, and a 4 MiB file written,
//            fsynced, read back, compared and deleted in work_dir (reports "write_mbps").
//   gpu      with nvidia-smi on the PATH: `nvidia-smi --query-gpu=name,memory.total,memory.used
//            --format=csv,noheader` must succeed (reports "gpus"); without it: skipped.
//   command  the operator's own check (like Slurm's HealthCheckProgram): `/bin/sh -c command` with
//            command_env added to the environment, bounded by command_timeout_s; a non-zero exit,
//            a signal or the timeout is unhealthy, and the detail carries the exit code and the last
//            lines of its output. Empty command: skipped.
// The collective check (an allreduce across the job's instances) needs the server's rendezvous and
// the launcher, and lives with the agent (agent.cc), which appends it to this list.
//
// Thread-safety: the functions share no state; run them from any thread. Failure is a check with
// ok=false, never a thrown exception or an error Status: every check always yields its object.
#pragma once

#include <atomic>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace anneal {

struct HealthCheckOptions {
  int slots = 1;                    // the instance's slots: the CPUs it promises
  double min_free_memory_gb = 0;
  double min_free_disk_gb = 0;
  std::string work_dir = ".";       // where jobs run: the disk checked
  std::string command;              // "" = no custom check
  std::map<std::string, std::string> command_env;  // added for the command (ANNEAL_INSTANCE_ID, ...)
  double command_timeout_s = 60;
  double cpu_probe_s = 0.05;
  // Set from another thread: a running command is killed and its check fails as "abandoned".
  const std::atomic<bool>* stop = nullptr;
};

// The checks in order cpu, memory, disk, gpu, command: a JSON array of check objects.
nlohmann::json RunLocalHealthChecks(const HealthCheckOptions& o);

nlohmann::json CheckCpu(const HealthCheckOptions& o);
nlohmann::json CheckMemory(const HealthCheckOptions& o);
nlohmann::json CheckDisk(const HealthCheckOptions& o);
nlohmann::json CheckGpu(const HealthCheckOptions& o);
nlohmann::json CheckCommand(const HealthCheckOptions& o);

// Whether every check in the array has ok=true.
bool AllChecksOk(const nlohmann::json& checks);
// "disk: 3.2 GB free in /w, below min_free_disk_gb 100; command: exit code 3 (...)": the failed
// checks' details, or "all checks passed".
std::string DescribeFailedChecks(const nlohmann::json& checks);

}  // namespace anneal
