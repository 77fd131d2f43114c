#include "agent/job_sandbox.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <set>
#include <sstream>

#include "core/env.h"
#include "launch/sandbox.h"

namespace anneal {

namespace {

const char* kLeaseDir = "/run/anneal/uids";

// A uid no other job of this host holds: its lock file's flock, held until the fd closes.
Result<uid_t> LeaseUid(const std::string& name, int* fd) {
  for (const char* d : {"/run/anneal", kLeaseDir}) {
    if (::mkdir(d, 0700) != 0 && errno != EEXIST) return IoError(std::string("mkdir ") + d + ": " + std::strerror(errno));
  }
  const size_t start = std::hash<std::string>()(name) % kJobUids;
  for (int i = 0; i < kJobUids; ++i) {
    const uid_t uid = kJobUidBase + static_cast<uid_t>((start + i) % kJobUids);
    const std::string f = std::string(kLeaseDir) + "/" + std::to_string(uid);
    const int h = ::open(f.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    if (h < 0) return IoError("cannot open " + f + ": " + std::strerror(errno));
    if (::flock(h, LOCK_EX | LOCK_NB) == 0) {
      *fd = h;
      return uid;
    }
    ::close(h);
  }
  return IoError("all " + std::to_string(kJobUids) + " job uids of this host are in use");
}

}  // namespace

std::vector<std::string> GpuDeviceNodes() {
  std::set<std::string> visible;
  bool numeric = false;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"); v && *v) {
    numeric = true;
    std::stringstream ss(v);
    for (std::string t; std::getline(ss, t, ',');) {
      if (t.empty() || t.find_first_not_of("0123456789") != std::string::npos) numeric = false;
      visible.insert(t);
    }
  }
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("nvidia", 0) != 0 || e.is_directory(ec)) continue;
    const std::string n = name.substr(6);
    const bool indexed = !n.empty() && n.find_first_not_of("0123456789") == std::string::npos;
    if (indexed && numeric && !visible.count(n)) continue;
    out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<std::unique_ptr<JobSandbox>> JobSandbox::Make(const JobSandboxSpec& s) {
  std::unique_ptr<JobSandbox> b(new JobSandbox());
  auto cg = JobCgroup::Create(s.name, s.memory_bytes, s.cpus);
  if (cg.ok()) {
    b->cgroup_ = std::move(*cg);
  } else if (s.sandboxed || s.memory_bytes > 0 || s.cpus > 0) {
    return cg.status().Annotate("the job's limits and its processes' cleanup need a cgroup");
  }
  if (!s.sandboxed && !b->cgroup_) return b;
  if (s.sandboxed) {
    ANNEAL_ASSIGN_OR_RETURN(b->uid_, LeaseUid(s.name, &b->lease_fd_));
  }
  Env& env = Env::Default();
  const std::string dir = JoinPath(s.agent_dir, "sandbox");
  const std::string root = JoinPath(dir, "root"), denied = JoinPath(dir, "denied");
  ANNEAL_RETURN_IF_ERROR(env.CreateDirs(root));
  ::chmod(dir.c_str(), 0700);
  if (!env.Exists(denied)) ANNEAL_RETURN_IF_ERROR(env.WriteFileAtomic(denied, ""));
  ::chmod(denied.c_str(), 0);
  SandboxPlan p;
  p.isolate = s.sandboxed;
  p.uid = b->uid_;
  p.gid = b->uid_;
  p.root = root;
  p.denied_file = denied;
  p.hide = s.hide;
  p.hide.push_back(kLeaseDir);
  p.writable = s.writable;
  p.writable.insert(p.writable.begin(), s.job_dir);
  p.readable = s.readable;
  p.shm_dir = JoinPath(s.job_dir, "shm");
  p.devices = s.devices;
  if (b->cgroup_) p.cgroups = b->cgroup_->dirs();
  for (const char* sub : {"shm", "tmp", "home"}) ANNEAL_RETURN_IF_ERROR(env.CreateDirs(JoinPath(s.job_dir, sub)));
  b->plan_file_ = JoinPath(dir, s.name + ".plan.json");
  if (!s.sandboxed) p = SandboxPlan{false, 0, 0, root, denied, {}, {}, {}, "", {}, p.cgroups};
  ANNEAL_RETURN_IF_ERROR(env.WriteFileAtomic(b->plan_file_, SandboxPlanToJson(p)));
  ::chmod(b->plan_file_.c_str(), 0600);
  for (const std::string& w : p.writable) ANNEAL_RETURN_IF_ERROR(b->Own(w));
  return b;
}

std::vector<std::string> JobSandbox::Wrap(const std::string& self) const {
  if (plan_file_.empty()) return {};
  return {self, "sandbox-exec", "--plan", plan_file_, "--"};
}

Status JobSandbox::Own(const std::string& path) const {
  if (!sandboxed()) return Status::Ok();
  auto own = [&](const std::string& p) -> Status {
    if (::lchown(p.c_str(), uid_, uid_) != 0) return IoError("chown " + p + " to the job's uid: " + std::strerror(errno));
    return Status::Ok();
  };
  ANNEAL_RETURN_IF_ERROR(own(path));
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(path, ec); !ec && it != std::filesystem::recursive_directory_iterator();
       it.increment(ec)) {
    ANNEAL_RETURN_IF_ERROR(own(it->path().string()));
  }
  if (ec) return IoError("walking " + path + ": " + ec.message());
  return Status::Ok();
}

JobSandbox::~JobSandbox() {
  cgroup_.reset();  // every process of the job is gone before its uid can be handed out again
  if (!plan_file_.empty()) ::unlink(plan_file_.c_str());
  if (lease_fd_ >= 0) ::close(lease_fd_);
}

}  // namespace anneal
