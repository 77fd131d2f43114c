// A job's sandbox on this instance (docs/security.md): its host uid, leased for the job's lifetime
// from a range no account uses (kJobUidBase..), its cgroup (agent/job_cgroup.h), its folders given
// to that uid, and the plan file (launch/sandbox.h) every process of the job enters.
//
// The uid is the job's, not the node's: it comes from a hash of the server's address and the job id,
// so every node of a job (on one host or several, sharing a checkpoint folder) runs it as the same
// uid. One lock file per uid in /run/anneal/uids holds that key, shared-locked by each agent running
// the job: another job hashing to a held uid (or to one some process still runs as) takes the next
// free one — and then its nodes on other hosts may hold another uid (1 in 100000 per running job).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "agent/job_cgroup.h"
#include "core/status.h"

namespace anneal {

constexpr uid_t kJobUidBase = 2000000000;  // job uids: kJobUidBase .. kJobUidBase + kJobUids - 1
constexpr int kJobUids = 100000;

struct JobSandboxSpec {
  std::string agent_dir;               // the agent's own folder (the plan, the root mount point)
  std::string name;                    // unique on this host: <instance>-<job>-<attempt>
  std::string uid_key;                 // the server's address and the job id: its uid's key
  std::string job_dir;                 // the job's folder: writable, owned by the job's uid
  std::vector<std::string> writable;   // more writable folders (a checkpoint.local_path outside job_dir)
  std::vector<std::string> readable;   // folders read in place (channels)
  std::vector<std::string> hide;       // the server's data folder, the agent's folders and token, ...
  std::vector<std::string> devices;    // the job's GPU device nodes
  int64_t memory_bytes = 0;
  double cpus = 0;
  bool sandboxed = true;               // false: only the cgroup (limits, the stop's kill); no uid, no mounts
  std::string image;                   // the spec's image: each process in a container of it (launch/container.h)
};

// The GPU device nodes of this host a job may open: /dev/nvidiactl, -uvm, -uvm-tools, -modeset and
// /dev/nvidiaN for each N in CUDA_VISIBLE_DEVICES (every N when it is not set or not numeric).
std::vector<std::string> GpuDeviceNodes();

// Checks, and makes when missing, a folder outside the job's that its uid will be given
// (JobSandbox::Own; field names the spec's field in an error): an absolute path without links, no
// folder above it a job's (a job could swap it for a link), and either new or an earlier job's —
// everything in it a job uid's, that uid not held by another running job (uid_key: this job's). Never
// a folder a person or the system owns: a spec naming /etc gets an error naming the field, not
// /etc's chown. Walks and makes everything without following links (launch/nofollow.h).
Status PrepareGivable(const std::string& path, const std::string& field, const std::string& uid_key);

class JobSandbox {
 public:
  static Result<std::unique_ptr<JobSandbox>> Make(const JobSandboxSpec& spec);
  ~JobSandbox();  // ends every process left in the cgroup, releases the uid

  bool sandboxed() const { return uid_ != 0; }
  uid_t uid() const { return uid_; }
  // What goes before each command the launcher starts: anneal sandbox-exec --plan FILE --.
  std::vector<std::string> Wrap(const std::string& self) const;
  // The same for `anneal exec`: in the node's running container when the job has an image.
  std::vector<std::string> ExecWrap(const std::string& self) const;
  const std::string& plan_file() const { return plan_file_; }
  JobCgroup* cgroup() { return cgroup_.get(); }
  // Gives path (recursively) to the job's uid: folders the agent filled after Make.
  Status Own(const std::string& path) const;

 private:
  JobSandbox() = default;
  uid_t uid_ = 0;
  int lease_fd_ = -1;  // the uid's lock file, flock'd while the job holds the uid
  std::string plan_file_;
  bool container_ = false;
  std::string name_;
  void RemoveContainers() const;
  std::unique_ptr<JobCgroup> cgroup_;
};

}  // namespace anneal
