// A job's processes in a container image (the spec's `image:`, docs/security.md), through podman run
// as root (the agent is root; the job's uid comes from the same lease as the sandbox's): one container
// per process the launcher starts, named anneal-<plan name>-<LOCAL_RANK>, from the instance's local
// image store (`podman load` / `podman import` of a tar: nodes need no registry; nothing is pulled).
// The container gets what the sandbox gives (launch/sandbox.h): the job's uid and gid, no
// capabilities, NoNewPrivs; the job's folders bound read-write and its channels read-only, at their
// own paths; its GPU device nodes; the job's cgroup as its cgroup parent (so the job's limits and its
// stop's kill hold); the host's network; the process's environment (podman --env-host: never on a
// command line). Nothing else of the host is inside. The runtime is runc where the host's cgroups are
// v1 or hybrid (crun refuses them), podman's default on v2.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "launch/sandbox.h"

namespace anneal {

// podman and its global flags as anneal runs it: --cgroup-manager cgroupfs (job cgroups are plain
// folders), --runtime runc unless the host's cgroups are v2 only.
std::vector<std::string> PodmanGlobalArgs();

// The podman command line that runs command in plan's image (enter: `podman exec` in the running
// container of local rank 0 on this node, for `anneal exec`; env_file: the environment's file for
// podman exec, which has no --env-host). cwd is the working directory inside. Pure: unit-tested.
std::vector<std::string> PodmanArgv(const SandboxPlan& plan, const std::vector<std::string>& command, const std::string& cwd,
                                    const std::string& local_rank, bool enter, const std::string& env_file, bool tty);

// Runs command in the job's container, as the plan says: joins the job's cgroups, starts podman,
// passes SIGTERM/SIGINT/SIGHUP on, and ends this process as the container's process ended (its exit
// code, or the same signal when it was killed by one: the launcher tells an OOM kill or a stop by it).
// Returns only when podman cannot be started.
Status RunInContainer(const SandboxPlan& plan, const std::vector<std::string>& command, bool enter);

}  // namespace anneal
