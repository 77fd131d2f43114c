// A job's sandbox (docs/security.md): what a process of the job may see and be, written by the agent
// as a plan file (0600, root's, in the agent's own folder) and entered by `anneal sandbox-exec --plan
// FILE -- COMMAND` (every process the launcher starts for a job) or by `anneal launch-rank` (ranks
// that srun or mpirun start through Slurm, outside the launcher). Entering, as root:
//   1. join the job's cgroups (memory, cpu: agent/job_cgroup.h), so a limit holds and a stop finds
//      every process, double-forked ones included;
//   2. a mount namespace of its own holding the host's tree read-only, nosuid; the hidden paths (the
//      server's data folder, the agent's folders and token, the other jobs') covered by an empty
//      root-owned tmpfs of mode 0711 (not listable; only the job's own folders inside it, bound back,
//      are reachable); the job's writable folders bound read-write at their own paths, its readable
//      ones (channels read in place) read-only; /tmp and /dev/shm the job's own folders; a /dev holding
//      only null, zero, full, random, urandom, tty, pts and the job's GPU device nodes; a /proc that
//      shows only the job uid's processes (hidepid=invisible);
//   3. no supplementary groups, gid and uid the job's (neither 0 nor the agent's), NoNewPrivs.
// The network is the host's (docs/security.md says what that leaves open).
#pragma once

#include <string>
#include <sys/types.h>
#include <vector>

#include "core/status.h"

namespace anneal {

struct SandboxPlan {
  bool isolate = true;                // false: only join the cgroups (a job run unsandboxed keeps its limits)
  uid_t uid = 0;
  gid_t gid = 0;
  std::string root;                   // an empty folder the new root is assembled on (root's, 0700)
  std::string denied_file;            // an empty file of mode 0 bound over each hidden file
  std::vector<std::string> hide;      // folders and files made unreachable
  std::vector<std::string> writable;  // bound read-write at their own paths
  std::vector<std::string> readable;  // bound read-only at their own paths
  std::string tmp_dir;                // bound at /tmp
  std::string shm_dir;                // bound at /dev/shm
  std::vector<std::string> devices;   // host device nodes bound into /dev besides the standard ones
  std::vector<std::string> cgroups;   // cgroup folders this process joins (their cgroup.procs)
  // With an image: each process runs in a container of it instead (launch/container.h), named
  // anneal-<name>-<LOCAL_RANK>, with the same uid, folders, devices and cgroups (as its parent).
  std::string image;
  std::string name;
};

std::string SandboxPlanToJson(const SandboxPlan& p);
Result<SandboxPlan> SandboxPlanFromJson(const std::string& text);

// Reads a plan file, refusing one that is not a regular file owned by this process's user and
// writable by it alone (a plan is trusted by root: a job must not be able to write one).
Result<SandboxPlan> ReadSandboxPlan(const std::string& path);

// Moves the calling process into the plan's cgroups (their cgroup.procs).
Status JoinCgroups(const SandboxPlan& p);

// Enters the plan in the calling process (single-threaded, as root), keeping its working directory
// (which must be reachable inside). On return the process is the job's user; it then execs.
Status EnterSandbox(const SandboxPlan& p);

// `anneal sandbox-exec --plan FILE [--enter] -- COMMAND`: reads the plan, enters it, execs COMMAND
// (looked up in PATH inside). A plan with an image runs COMMAND in a new container of it, or with
// enter (`anneal exec`) in the node's running one (launch/container.h). Returns only on failure.
Status ExecInSandbox(const std::string& plan_file, const std::vector<std::string>& command, bool enter = false);

// Whether this host lets the calling process make sandboxes: root with CAP_SYS_ADMIN and CAP_SETUID
// whose child can create a mount namespace. "" when it can, else why not and the fix.
std::string SandboxUnavailableReason();

}  // namespace anneal
