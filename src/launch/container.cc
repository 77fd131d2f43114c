#include "launch/container.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "comm/rank_contract.h"

extern char** environ;

namespace anneal {

namespace {

// The caller's own limit as podman's --ulimit, at most cap (0: none). Without it podman asks for its
// defaults (nofile 1048576), which runc cannot set where root lacks CAP_SYS_RESOURCE (as here).
std::string Limit(int resource, const char* name, rlim_t cap) {
  struct rlimit r {};
  if (::getrlimit(resource, &r) != 0) return "";
  auto v = [cap](rlim_t x) {
    if (cap > 0 && (x == RLIM_INFINITY || x > cap)) x = cap;
    return x == RLIM_INFINITY ? std::string("-1") : std::to_string(x);
  };
  return std::string(name) + "=" + v(r.rlim_cur) + ":" + v(r.rlim_max);
}

// conmon runs the runtime with RLIMIT_NPROC at the kernel's pid_max (seen here: 32768, below the
// shell's 96367), and runc may not raise it: the container's nproc is kept under that.
rlim_t PidMax() {
  FILE* f = std::fopen("/proc/sys/kernel/pid_max", "r");
  unsigned long long v = 0;
  if (f) {
    if (std::fscanf(f, "%llu", &v) != 1) v = 0;
    std::fclose(f);
  }
  return static_cast<rlim_t>(v);
}

// The job's cgroup as podman's --cgroup-parent: the path below the hierarchy's mount ("/anneal/<name>").
std::string CgroupParent(const SandboxPlan& p) {
  if (p.cgroups.empty()) return "";
  const size_t at = p.cgroups.front().find("/anneal/");
  return at == std::string::npos ? "" : p.cgroups.front().substr(at);
}

bool CgroupV2() { return ::access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0; }

volatile sig_atomic_t g_child = 0;
void Forward(int sig) {
  if (g_child > 0) ::kill(g_child, sig);
}

// The environment as podman exec's --env-file (root's, 0600, under /run/anneal): "" on failure.
std::string WriteEnvFile() {
  ::mkdir("/run/anneal", 0700);
  char path[] = "/run/anneal/exec-env.XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return "";
  std::string text;
  for (char** e = environ; *e; ++e) {
    if (!std::strchr(*e, '\n')) text += std::string(*e) + "\n";
  }
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!ok) {
    ::unlink(path);
    return "";
  }
  return path;
}

}  // namespace

std::vector<std::string> PodmanGlobalArgs() {
  std::vector<std::string> a = {"podman", "--cgroup-manager", "cgroupfs"};
  if (!CgroupV2()) a.insert(a.end(), {"--runtime", "runc"});
  return a;
}

std::vector<std::string> PodmanArgv(const SandboxPlan& p, const std::vector<std::string>& command, const std::string& cwd,
                                    const std::string& local_rank, bool enter, const std::string& env_file, bool tty) {
  const std::string user = std::to_string(p.uid) + ":" + std::to_string(p.gid);
  const std::string name = "anneal-" + p.name + "-" + (local_rank.empty() ? "0" : local_rank);
  std::vector<std::string> a = PodmanGlobalArgs();
  if (enter) {
    a.insert(a.end(), {"exec", "-i", "--user", user, "--workdir", cwd, "--env-file", env_file});
    if (tty) a.push_back("-t");
    a.push_back("anneal-" + p.name + "-0");
  } else {
    // --init: tini as pid 1 passes SIGTERM on (a pid 1 without a handler would ignore it), reaps, and
    // finds the command in PATH (podman's default, catatonit, does not); static, so any image runs it.
    a.insert(a.end(), {"run", "--rm", "--replace", "--init", "--init-path", "/usr/bin/tini-static", "--pull", "never", "--name", name, "--network", "host",
                       "--uts", "host", "--user", user, "--cap-drop", "all", "--security-opt", "no-new-privileges",
                       "--env-host", "--log-driver", "none", "--workdir", cwd});
    if (!p.tmp_dir.empty()) a.insert(a.end(), {"--volume", p.tmp_dir + ":/tmp:rw"});  // the job's /tmp, as in the sandbox
    for (const std::string& l : {Limit(RLIMIT_NOFILE, "nofile", 0), Limit(RLIMIT_NPROC, "nproc", PidMax())}) {
      if (!l.empty()) a.insert(a.end(), {"--ulimit", l});
    }
    if (const std::string parent = CgroupParent(p); !parent.empty()) a.insert(a.end(), {"--cgroup-parent", parent});
    for (const std::string& w : p.writable) a.insert(a.end(), {"--volume", w + ":" + w + ":rw"});
    for (const std::string& r : p.readable) a.insert(a.end(), {"--volume", r + ":" + r + ":ro"});
    for (const std::string& d : p.devices) a.insert(a.end(), {"--device", d});
    a.push_back(p.image);
  }
  a.insert(a.end(), command.begin(), command.end());
  return a;
}

Status RunInContainer(const SandboxPlan& p, const std::vector<std::string>& command, bool enter) {
  if (::geteuid() != 0) return IoError("container: running a job's image needs root (the agent's user)");
  char cwd[PATH_MAX];
  if (!::getcwd(cwd, sizeof(cwd))) return IoError(std::string("container: getcwd: ") + std::strerror(errno));
  // podman and its conmon in the job's cgroups (the container itself goes below them).
  ANNEAL_RETURN_IF_ERROR(JoinCgroups(p));
  const std::string env_file = enter ? WriteEnvFile() : "";
  if (enter && env_file.empty()) return IoError("container: cannot write the exec's environment file under /run/anneal");
  // The container is named for the rank's place on its node, as the rank contract says it (LOCAL_RANK,
  // or mpirun's or srun's own variable); an exec into the job has no rank, and enters local rank 0's.
  // A rank whose contract cannot be read starts nothing (podman's --replace would end another rank's).
  const Result<RankContract> rank = RankContract::FromEnvironment();
  if (!rank.ok() && !enter) {
    if (!env_file.empty()) ::unlink(env_file.c_str());
    return rank.status();
  }
  const std::string local_rank = rank.ok() ? std::to_string(rank->local_rank) : "";
  std::vector<std::string> argv = PodmanArgv(p, command, cwd, local_rank, enter, env_file, ::isatty(0));
  // Signals held until the child is known (one arriving before would end this process, podman not).
  sigset_t fwd, old;
  sigemptyset(&fwd);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&fwd, s);
  ::sigprocmask(SIG_BLOCK, &fwd, &old);
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) {
    const std::string why = std::strerror(errno);
    if (!env_file.empty()) ::unlink(env_file.c_str());
    return IoError("container: fork: " + why);
  }
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
    if (::getppid() != parent) ::_exit(143);  // the parent died before the death signal was set
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    std::vector<char*> args;
    for (auto& s : argv) args.push_back(s.data());
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "anneal: container: cannot run podman: %s (scripts/setup.sh installs it)\n", std::strerror(errno));
    ::_exit(127);
  }
  g_child = child;
  struct sigaction sa {};
  sa.sa_handler = Forward;
  sigemptyset(&sa.sa_mask);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(s, &sa, nullptr);
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
  siginfo_t info {};  // waited for without reaping, so the pid is not reused while a signal may still go to it
  while (::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
  g_child = 0;
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!env_file.empty()) ::unlink(env_file.c_str());
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  // podman answers 128+N when the container's process died of signal N: end the same way for the
  // signals no program sends itself as an exit code (an OOM kill is SIGKILL), so the launcher sees them.
  for (int sig : {SIGKILL, SIGSEGV, SIGABRT, SIGBUS, SIGILL, SIGFPE}) {
    if (code == 128 + sig) {
      ::signal(sig, SIG_DFL);
      ::kill(::getpid(), sig);
    }
  }
  ::_exit(code);
}

}  // namespace anneal
