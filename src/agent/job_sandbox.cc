#include "agent/job_sandbox.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <set>
#include <sstream>

#include "core/env.h"
#include "provision/command.h"
#include "launch/container.h"
#include "launch/nofollow.h"
#include "launch/sandbox.h"

namespace anneal {

namespace {

const char* kLeaseDir = "/run/anneal/uids";

bool IsJobUid(uid_t u) { return u >= kJobUidBase && u < kJobUidBase + static_cast<uid_t>(kJobUids); }

// FNV-1a: the same job id gives the same uid on every host and build.
uint64_t StableHash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// The uids of the job range that some process of this host runs as now (/proc/PID/status): a uid
// whose lease was let go while its processes lived on (an agent SIGKILLed, a process the cgroup
// could not end) is not handed out again.
std::set<uid_t> JobUidsRunning() {
  std::set<uid_t> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string n = e.path().filename().string();
    if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos) continue;
    // The real uid from status (a non-dumpable process's /proc/PID is root's).
    std::ifstream status(e.path().string() + "/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("Uid:", 0) != 0) continue;
      std::stringstream ss(line.substr(4));
      for (unsigned long u; ss >> u;) {
        if (IsJobUid(static_cast<uid_t>(u))) out.insert(static_cast<uid_t>(u));
      }
      break;
    }
  }
  return out;
}

std::string LeaseFile(uid_t uid) { return std::string(kLeaseDir) + "/" + std::to_string(uid); }

// Who holds uid's lease now: its key, or "" when no agent holds it. Read under the folder's guard,
// shared: LeaseUid holds it exclusively while it writes a lease's key.
std::string LeaseHolder(uid_t uid) {
  Fd guard(::open((std::string(kLeaseDir) + "/.lock").c_str(), O_RDONLY | O_CLOEXEC));
  if (guard.get() >= 0) {
    while (::flock(guard.get(), LOCK_SH) != 0 && errno == EINTR) {
    }
  }
  const int h = ::open(LeaseFile(uid).c_str(), O_RDONLY | O_CLOEXEC);
  if (h < 0) return "";
  std::string key;
  if (::flock(h, LOCK_EX | LOCK_NB) != 0) {  // held
    char buf[512];
    const ssize_t n = ::pread(h, buf, sizeof(buf), 0);
    key.assign(buf, n > 0 ? static_cast<size_t>(n) : 0);
    if (key.empty()) key = "?";
  }
  ::close(h);
  return key;
}

// The job's uid, and the fd of its lock file (shared-locked while this agent runs the job). key is
// the server's address and the job id (two servers' job ids may be equal). The decision is made
// under one exclusive lock of the folder, so two agents never both see a uid free.
Result<uid_t> LeaseUid(const std::string& key, int* fd) {
  for (const char* d : {"/run/anneal", kLeaseDir}) {
    if (::mkdir(d, 0700) != 0 && errno != EEXIST) return IoError(std::string("mkdir ") + d + ": " + std::strerror(errno));
  }
  const std::string guard_file = std::string(kLeaseDir) + "/.lock";
  const int guard = ::open(guard_file.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (guard < 0) return IoError("cannot open " + guard_file + ": " + std::strerror(errno));
  int rc;
  while ((rc = ::flock(guard, LOCK_EX)) != 0 && errno == EINTR) {
  }
  if (rc != 0) {
    const std::string why = std::strerror(errno);
    ::close(guard);
    return IoError("cannot lock " + guard_file + ": " + why);
  }
  const std::set<uid_t> running = JobUidsRunning();
  Result<uid_t> out = IoError("all " + std::to_string(kJobUids) + " job uids of this host are in use");
  const uint64_t start = StableHash(key) % kJobUids;
  for (int i = 0; i < kJobUids; ++i) {
    const uid_t uid = kJobUidBase + static_cast<uid_t>((start + i) % kJobUids);
    const std::string f = LeaseFile(uid);
    const int h = ::open(f.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    if (h < 0) {
      out = IoError("cannot open " + f + ": " + std::strerror(errno));
      break;
    }
    bool mine = false;
    if (::flock(h, LOCK_EX | LOCK_NB) == 0) {  // free, unless its processes outlived their lease
      mine = !running.count(uid) && ::ftruncate(h, 0) == 0 &&
             ::pwrite(h, key.data(), key.size(), 0) == static_cast<ssize_t>(key.size());
    } else {  // held: by this job's other nodes here?
      std::string holder(key.size() + 1, '\0');
      const ssize_t n = ::pread(h, holder.data(), holder.size(), 0);
      mine = n == static_cast<ssize_t>(key.size()) && holder.compare(0, key.size(), key) == 0;
    }
    if (mine && ::flock(h, LOCK_SH) == 0) {
      *fd = h;
      out = uid;
      break;
    }
    ::close(h);
  }
  ::close(guard);
  return out;
}

}  // namespace

namespace {

const char* kGivenMarker = ".anneal-given";  // root's, holding the uid key of the job that made the folder

// The uid key in folder's root-owned marker, or "" (none, or not root's).
std::string GivenMarkerKey(int dir_fd) {
  Fd m(::openat(dir_fd, kGivenMarker, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (m.get() < 0 || ::fstat(m.get(), &st) != 0 || st.st_uid != 0 || !S_ISREG(st.st_mode)) return "";
  char buf[512];
  const ssize_t n = ::pread(m.get(), buf, sizeof(buf), 0);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// Makes path's last folder in parent_fd whole or not at all: under a temporary name with the marker,
// then renamed into place, so another node of the job never sees it root's and unmarked. false (no
// error) when another process made it first.
Result<bool> MakeMarked(int parent_fd, const std::string& name, const std::string& key) {
  const std::string tmp = ".anneal-new-" + std::to_string(::getpid()) + "-" + name;
  if (::mkdirat(parent_fd, tmp.c_str(), 0755) != 0) return IoError("mkdir " + tmp + ": " + std::strerror(errno));
  Fd dir(::openat(parent_fd, tmp.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  Fd m(dir.get() < 0 ? -1 : ::openat(dir.get(), kGivenMarker, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644));
  const bool written = m.get() >= 0 && ::write(m.get(), key.data(), key.size()) == static_cast<ssize_t>(key.size());
  if (written && ::renameat(parent_fd, tmp.c_str(), parent_fd, name.c_str()) == 0) return true;
  const int err = errno;
  if (dir.get() >= 0) ::unlinkat(dir.get(), kGivenMarker, 0);
  ::unlinkat(parent_fd, tmp.c_str(), AT_REMOVEDIR);
  if (written && (err == EEXIST || err == ENOTEMPTY)) return false;
  return IoError("making " + name + ": " + std::strerror(err));
}

}  // namespace

Status PrepareGivable(const std::string& path, const std::string& field, const std::string& key) {
  auto refuse = [&](const std::string& why) {
    return InvalidInput(field + ": " + path + " " + why +
                        ": a sandboxed job is given only a folder it creates or an earlier job's, under folders no "
                        "job owns; name a new folder, or leave the checkpoint to the agent (checkpoint.sync: true)");
  };
  auto named = [&](const Status& st) { return st.code() == Code::kInvalidInput ? refuse(st.message()) : st; };
  const std::string norm = std::filesystem::path(path).lexically_normal().string();
  if (path.empty() || path[0] != '/' || path == "/" || (norm != path && norm + "/" != path)) {
    return refuse("is not an absolute, normalised path of a folder below /");
  }
  // No folder above it may be a job's: a job could move it and put a link in its place.
  const ParentCheck parents = [&](const std::string& p, const struct stat& st) {
    return IsJobUid(st.st_uid) ? refuse("lies in " + p + ", which belongs to job uid " + std::to_string(st.st_uid)) : Status::Ok();
  };
  const std::filesystem::path fp = std::filesystem::path(norm).lexically_normal();
  const std::string name = fp.filename().string(), parent = fp.parent_path().string();
  auto pfd = OpenNoFollow(parent, /*create=*/true, parents);
  if (!pfd.ok()) return named(pfd.status());
  ANNEAL_RETURN_IF_ERROR(named(parents(parent, [&] {
    struct stat st {};
    ::fstat(pfd->get(), &st);
    return st;
  }())));
  struct stat st {};
  if (::fstatat(pfd->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno != ENOENT) return IoError(field + ": " + path + ": " + std::strerror(errno));
    ANNEAL_ASSIGN_OR_RETURN(bool made, MakeMarked(pfd->get(), name, key));
    if (made) return Status::Ok();  // else another node of this job (or someone) made it: checked below
  }
  auto fd = OpenNoFollow(path, false, parents);
  if (!fd.ok()) return named(fd.status());
  if (::fstat(fd->get(), &st) != 0) return IoError(field + ": stat " + path + ": " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) return refuse("is not a folder");
  // Made a moment ago by this job's agent on another node, not yet given to the job's uid.
  if (st.st_uid == 0 && GivenMarkerKey(fd->get()) == key) return Status::Ok();
  if (!IsJobUid(st.st_uid)) {
    // A checkpoint folder from before the sandbox (a root's make run): its owner may hand it over.
    return refuse("belongs to uid " + std::to_string(st.st_uid) + ", a person's or the system's (to resume from it, give it to "
                  "the jobs' uid range: chown -R " + std::to_string(kJobUidBase) + ":" + std::to_string(kJobUidBase) + " " + path + ")");
  }
  const std::string holder = LeaseHolder(st.st_uid);
  if (!holder.empty() && holder != key) return refuse("belongs to a job that is running now (uid " + std::to_string(st.st_uid) + ")");
  // No links either: root restores the checkpoint into it and uploads from it (agent/dir_sync.h).
  return WalkNoFollow(fd->get(), [&](int, const std::string&, const std::string& rel, const struct stat& e) {
    if (S_ISLNK(e.st_mode)) return refuse("holds " + rel + ", a symbolic link (root would write and read through it)");
    return IsJobUid(e.st_uid) ? Status::Ok() : refuse("holds " + rel + ", which belongs to uid " + std::to_string(e.st_uid));
  });
}

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
    ANNEAL_ASSIGN_OR_RETURN(b->uid_, LeaseUid(s.uid_key.empty() ? s.name : s.uid_key, &b->lease_fd_));
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
  p.tmp_dir = JoinPath(s.job_dir, "tmp");
  p.devices = s.devices;
  p.image = s.sandboxed ? s.image : "";
  p.name = s.name;
  b->container_ = !p.image.empty();
  if (b->cgroup_) b->cgroup_->CountLimitReached(b->container_);
  b->name_ = s.name;
  if (b->cgroup_) p.cgroups = b->cgroup_->dirs();
  for (const char* sub : {"shm", "tmp", "home"}) ANNEAL_RETURN_IF_ERROR(env.CreateDirs(JoinPath(s.job_dir, sub)));
  b->plan_file_ = JoinPath(dir, s.name + ".plan.json");
  if (!s.sandboxed) {  // only the cgroups (the positional form once put them in `devices`: no limits held)
    SandboxPlan only_cgroups;
    only_cgroups.isolate = false;
    only_cgroups.root = root;
    only_cgroups.denied_file = denied;
    only_cgroups.cgroups = p.cgroups;
    p = only_cgroups;
  }
  ANNEAL_RETURN_IF_ERROR(env.WriteFileAtomic(b->plan_file_, SandboxPlanToJson(p)));
  ::chmod(b->plan_file_.c_str(), 0600);
  for (const std::string& w : p.writable) ANNEAL_RETURN_IF_ERROR(b->Own(w));
  // The job's folder is its uid's alone (the work root is hidden from other jobs too).
  if (s.sandboxed && ::chmod(s.job_dir.c_str(), 0700) != 0) return IoError("chmod " + s.job_dir + ": " + std::strerror(errno));
  return b;
}

std::vector<std::string> JobSandbox::Wrap(const std::string& self) const {
  if (plan_file_.empty()) return {};
  return {self, "sandbox-exec", "--plan", plan_file_, "--"};
}

// The job's containers that a killed podman left behind (their processes ended with the cgroup).
void JobSandbox::RemoveContainers() const {
  std::vector<std::string> ps = PodmanGlobalArgs();
  ps.insert(ps.end(), {"ps", "-a", "-q", "--filter", "name=^anneal-" + name_ + "-[0-9]+$"});  // names: [a-z0-9-]
  auto r = RunCommand(ps);
  if (!r.ok() || r->exit_code != 0) return;
  std::vector<std::string> rm = PodmanGlobalArgs();
  rm.insert(rm.end(), {"rm", "-f", "--ignore"});
  std::stringstream ids(r->out);
  for (std::string id; ids >> id;) rm.push_back(id);
  if (rm.back() != "--ignore") (void)RunCommand(rm);
}

std::vector<std::string> JobSandbox::ExecWrap(const std::string& self) const {
  if (!container_) return Wrap(self);
  return {self, "sandbox-exec", "--plan", plan_file_, "--enter", "--"};
}

Status JobSandbox::Own(const std::string& path) const {
  if (!sandboxed()) return Status::Ok();
  ANNEAL_ASSIGN_OR_RETURN(Fd fd, OpenNoFollow(path, false));
  return ChownTreeNoFollow(fd.get(), uid_, uid_).Annotate("giving " + path + " to the job's uid");
}

JobSandbox::~JobSandbox() {
  cgroup_.reset();  // every process of the job is gone before its uid can be handed out again
  if (container_) RemoveContainers();
  if (!plan_file_.empty()) ::unlink(plan_file_.c_str());
  if (lease_fd_ >= 0) ::close(lease_fd_);
}

}  // namespace anneal
