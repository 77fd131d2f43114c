#include "launch/sandbox.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/env.h"
#include "launch/container.h"
#include "launch/nofollow.h"

namespace anneal {

using nlohmann::json;

std::string SandboxPlanToJson(const SandboxPlan& p) {
  return json{{"isolate", p.isolate}, {"uid", p.uid},           {"gid", p.gid},           {"root", p.root},         {"denied_file", p.denied_file},
              {"hide", p.hide},         {"writable", p.writable}, {"readable", p.readable}, {"tmp_dir", p.tmp_dir}, {"shm_dir", p.shm_dir},
              {"devices", p.devices},   {"cgroups", p.cgroups},   {"image", p.image},       {"name", p.name}}
      .dump(2);
}

Result<SandboxPlan> SandboxPlanFromJson(const std::string& text) {
  try {
    const json j = json::parse(text);
    SandboxPlan p;
    p.isolate = j.at("isolate").get<bool>();
    p.uid = j.at("uid").get<uid_t>();
    p.gid = j.at("gid").get<gid_t>();
    p.root = j.at("root").get<std::string>();
    p.denied_file = j.at("denied_file").get<std::string>();
    p.hide = j.at("hide").get<std::vector<std::string>>();
    p.writable = j.at("writable").get<std::vector<std::string>>();
    p.readable = j.at("readable").get<std::vector<std::string>>();
    p.shm_dir = j.at("shm_dir").get<std::string>();
    p.tmp_dir = j.value("tmp_dir", std::string());
    p.devices = j.at("devices").get<std::vector<std::string>>();
    p.cgroups = j.at("cgroups").get<std::vector<std::string>>();
    p.image = j.value("image", std::string());
    p.name = j.value("name", std::string());
    if (p.isolate && (p.uid == 0 || p.gid == 0)) return InvalidInput("a sandbox plan needs a non-zero uid and gid");
    if (p.isolate && (p.root.empty() || p.root[0] != '/')) return InvalidInput("a sandbox plan needs an absolute root");
    return p;
  } catch (const std::exception& e) {
    return InvalidInput(std::string("a sandbox plan is not valid: ") + e.what());
  }
}

Result<SandboxPlan> ReadSandboxPlan(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return NotFound("sandbox plan " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
    return IoError("sandbox plan " + path + " is not a regular file owned by uid " + std::to_string(::geteuid()) +
                            " and writable by it alone: refused");
  }
  ANNEAL_ASSIGN_OR_RETURN(std::string text, Env::Default().ReadFile(path));
  return SandboxPlanFromJson(text);
}

namespace {

Status Errno(const std::string& what) { return IoError("sandbox: " + what + ": " + std::strerror(errno)); }

Status Mount(const char* src, const std::string& dst, const char* type, unsigned long flags, const char* data) {
  if (::mount(src, dst.c_str(), type, flags, data) != 0) {
    return Errno(std::string("mount ") + (src ? src : "(none)") + " on " + dst);
  }
  return Status::Ok();
}

// Sets mount attributes on the mount at path (and, recursive, every mount below it).
Status SetAttr(const std::string& path, uint64_t set, bool recursive) {
  struct mount_attr a {};
  a.attr_set = set;
  if (::mount_setattr(AT_FDCWD, path.c_str(), recursive ? AT_RECURSIVE : 0, &a, sizeof(a)) != 0) {
    return Errno("mount_setattr " + path);
  }
  return Status::Ok();
}

// mkdir -p of root+path; components that exist (on the read-only host tree) are left as they are.
Status MakeDirsUnder(const std::string& root, const std::string& path) {
  std::string at = root;
  for (size_t p = 1; p <= path.size(); ++p) {
    if (p == path.size() || path[p] == '/') {
      at = root + path.substr(0, p);
      if (::mkdir(at.c_str(), 0711) != 0 && errno != EEXIST) return Errno("mkdir " + at);
    }
  }
  return Status::Ok();
}

// An empty regular file at root+path (a bind target for a device node).
Status MakeFileUnder(const std::string& root, const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash > 0) ANNEAL_RETURN_IF_ERROR(MakeDirsUnder(root, path.substr(0, slash)));
  const int fd = ::open((root + path).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("create " + root + path);
  ::close(fd);
  return Status::Ok();
}

bool IsDir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool Exists(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}


// Hidden paths: a folder gets an empty root-owned tmpfs of mode 0711 (not listable, and only what is
// bound back inside is reachable); a file gets the plan's empty mode-0 file bound over it.
Status Hide(const SandboxPlan& p, std::vector<std::string>* tmpfs) {
  std::vector<std::string> hide = p.hide;
  std::sort(hide.begin(), hide.end());
  for (const std::string& h : hide) {
    const std::string at = p.root + h;
    if (!Exists(at)) continue;  // not in this tree (under the private /tmp, say)
    if (IsDir(at)) {
      ANNEAL_RETURN_IF_ERROR(Mount("tmpfs", at, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0711,size=1m"));
      tmpfs->push_back(at);
    } else {
      ANNEAL_RETURN_IF_ERROR(Mount(p.denied_file.c_str(), at, nullptr, MS_BIND, nullptr));
    }
  }
  return Status::Ok();
}

// The job's folders (and files: a channel of one file) at their own paths, shorter paths first so nested ones land inside.
Status BindFolders(const SandboxPlan& p) {
  std::vector<std::pair<std::string, bool>> binds;
  for (const std::string& w : p.writable) binds.emplace_back(w, true);
  for (const std::string& r : p.readable) binds.emplace_back(r, false);
  std::sort(binds.begin(), binds.end(), [](const auto& a, const auto& b) { return a.first.size() < b.first.size(); });
  for (const auto& [path, rw] : binds) {
    if (!Exists(path)) return InvalidInput("sandbox: the job's folder " + path + " does not exist");
    // Through an fd opened without following links: a job that swapped a folder of its own for a link
    // since the agent checked it does not get the link's target bound (launch/nofollow.h).
    ANNEAL_ASSIGN_OR_RETURN(Fd fd, OpenNoFollow(path, false));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return Errno("stat " + path);
    const std::string at = p.root + path;
    ANNEAL_RETURN_IF_ERROR(S_ISDIR(st.st_mode) ? MakeDirsUnder(p.root, path) : Exists(at) ? Status::Ok() : MakeFileUnder(p.root, path));
    ANNEAL_RETURN_IF_ERROR(Mount(ProcFdPath(fd.get()).c_str(), at, nullptr, MS_BIND | MS_REC, nullptr));
    ANNEAL_RETURN_IF_ERROR(SetAttr(at, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (rw ? 0 : MOUNT_ATTR_RDONLY), true));
  }
  return Status::Ok();
}

Status MakeDev(const SandboxPlan& p) {
  const std::string dev = p.root + "/dev";
  ANNEAL_RETURN_IF_ERROR(Mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k"));
  std::vector<std::string> nodes = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"};
  nodes.insert(nodes.end(), p.devices.begin(), p.devices.end());
  for (const std::string& n : nodes) {
    if (!Exists(n)) continue;
    ANNEAL_RETURN_IF_ERROR(MakeFileUnder(p.root, n));
    ANNEAL_RETURN_IF_ERROR(Mount(n.c_str(), p.root + n, nullptr, MS_BIND, nullptr));
  }
  ANNEAL_RETURN_IF_ERROR(MakeDirsUnder(p.root, "/dev/pts"));
  ANNEAL_RETURN_IF_ERROR(Mount("devpts", dev + "/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"));
  if (::symlink("pts/ptmx", (dev + "/ptmx").c_str()) != 0) return Errno("symlink /dev/ptmx");
  const char* links[][2] = {{"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"}, {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"}};
  for (const auto& l : links) {
    if (::symlink(l[0], (dev + "/" + l[1]).c_str()) != 0) return Errno(std::string("symlink /dev/") + l[1]);
  }
  ANNEAL_RETURN_IF_ERROR(MakeDirsUnder(p.root, "/dev/shm"));
  if (!p.shm_dir.empty()) {  // in the job's folder, so through an fd (launch/nofollow.h)
    ANNEAL_ASSIGN_OR_RETURN(Fd shm, OpenNoFollow(p.shm_dir, false));
    ANNEAL_RETURN_IF_ERROR(Mount(ProcFdPath(shm.get()).c_str(), dev + "/shm", nullptr, MS_BIND, nullptr));
  }
  return Mount(nullptr, dev, nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k");
}

Status DropToJob(const SandboxPlan& p) {
  int death = 0;  // a uid change clears the parent-death signal the launcher set: set it again
  (void)::prctl(PR_GET_PDEATHSIG, &death, 0, 0, 0);
  if (::setgroups(0, nullptr) != 0) return Errno("setgroups");
  if (::setresgid(p.gid, p.gid, p.gid) != 0) return Errno("setresgid " + std::to_string(p.gid));
  if (::setresuid(p.uid, p.uid, p.uid) != 0) return Errno("setresuid " + std::to_string(p.uid));
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return Errno("PR_SET_NO_NEW_PRIVS");
  if (death) (void)::prctl(PR_SET_PDEATHSIG, death, 0, 0, 0);
  if (::geteuid() != p.uid || ::getuid() != p.uid) return IoError("sandbox: the uid did not change");
  return Status::Ok();
}

}  // namespace

Status JoinCgroups(const SandboxPlan& p) {
  const std::string pid = std::to_string(::getpid());
  for (const std::string& cg : p.cgroups) {
    std::ofstream f(cg + "/cgroup.procs");
    f << pid << std::flush;
    if (!f) return IoError("sandbox: cannot join cgroup " + cg);
  }
  return Status::Ok();
}

Status EnterSandbox(const SandboxPlan& p) {
  if (::geteuid() != 0 && (p.isolate || !p.cgroups.empty())) return IoError("sandbox: entering a job's sandbox needs root (the agent's user)");
  char cwd[PATH_MAX];
  if (!::getcwd(cwd, sizeof(cwd))) return Errno("getcwd");
  ANNEAL_RETURN_IF_ERROR(JoinCgroups(p));
  if (!p.isolate) return Status::Ok();
  if (::unshare(CLONE_NEWNS) != 0) return Errno("unshare(CLONE_NEWNS)");
  ANNEAL_RETURN_IF_ERROR(Mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr));
  const std::string& r = p.root;
  ANNEAL_RETURN_IF_ERROR(Mount("/", r, nullptr, MS_BIND | MS_REC, nullptr));
  ANNEAL_RETURN_IF_ERROR(SetAttr(r, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, true));
  // A /tmp of its own (each process tree's: the ranks share the job's TMPDIR and /dev/shm folders).
  ANNEAL_RETURN_IF_ERROR(Mount("tmpfs", r + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777"));
  std::vector<std::string> tmpfs;
  ANNEAL_RETURN_IF_ERROR(Hide(p, &tmpfs));
  ANNEAL_RETURN_IF_ERROR(BindFolders(p));
  for (const std::string& t : tmpfs) {
    ANNEAL_RETURN_IF_ERROR(Mount(nullptr, t, nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0711,size=1m"));
  }
  ANNEAL_RETURN_IF_ERROR(MakeDev(p));
  if (::mount("proc", (r + "/proc").c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=invisible") != 0) {
    ANNEAL_RETURN_IF_ERROR(Mount("proc", r + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2"));
  }
  if (::chdir(r.c_str()) != 0) return Errno("chdir " + r);
  if (::syscall(SYS_pivot_root, ".", ".") != 0) return Errno("pivot_root");
  if (::umount2(".", MNT_DETACH) != 0) return Errno("umount the old root");
  if (::chdir(cwd) != 0) return Errno(std::string("chdir ") + cwd + " (not one of the job's folders)");
  return DropToJob(p);
}

Status ExecInSandbox(const std::string& plan_file, const std::vector<std::string>& command, bool enter) {
  if (command.empty()) return InvalidInput("sandbox-exec needs the program after --");
  ANNEAL_ASSIGN_OR_RETURN(SandboxPlan plan, ReadSandboxPlan(plan_file));
  if (!plan.image.empty()) return RunInContainer(plan, command, enter);
  ANNEAL_RETURN_IF_ERROR(EnterSandbox(plan));
  std::vector<std::string> copy = command;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  return IoError("sandbox-exec: cannot run '" + command[0] + "': " + std::strerror(errno));
}

std::string SandboxUnavailableReason() {
  if (::geteuid() != 0) {
    return "the agent runs as uid " + std::to_string(::geteuid()) +
           ", and a job's sandbox (its own uid and mount namespace) needs root: start the agent as root, or with "
           "--no-sandbox to run jobs unsandboxed as this user (docs/security.md)";
  }
  // A child tries the namespace and the uid change (a container may forbid either).
  const pid_t pid = ::fork();
  if (pid < 0) return std::string("fork: ") + std::strerror(errno);
  if (pid == 0) {
    if (::unshare(CLONE_NEWNS) != 0) ::_exit(10);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ::_exit(11);
    if (::setresuid(65534, 65534, 65534) != 0) ::_exit(12);
    ::_exit(0);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 0) return "";
  const char* what = code == 10 ? "create a mount namespace (unshare: user/mount namespaces are off or forbidden)"
                     : code == 11 ? "make its mounts private"
                     : code == 12 ? "change uid (CAP_SETUID is missing)"
                                  : "start a probe";
  return std::string("this host does not let the agent ") + what +
         ": run the agent as root on a host with mount namespaces, or with --no-sandbox to run jobs unsandboxed "
         "(docs/security.md)";
}

}  // namespace anneal
