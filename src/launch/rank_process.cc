#include "launch/rank_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

namespace anneal {

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by " + SignalName(WTERMSIG(status));
  return "status " + std::to_string(status);
}

bool StatusFailed(int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }

bool InterruptedExit(int status) {
  return WIFEXITED(status) && (WEXITSTATUS(status) == 128 + SIGINT || WEXITSTATUS(status) == 128 + SIGTERM);
}

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 3;  // a process lost to a signal: the cluster failed
}

namespace {

// A bare program name, looked up in the ranks' PATH (execvpe would search the launcher's own).
std::string InPath(const std::string& program, const std::map<std::string, std::string>& env) {
  auto path = env.find("PATH");
  if (program.find('/') != std::string::npos || path == env.end()) return program;
  for (const std::string& dir : SplitList(path->second, ':')) {
    const std::string cand = (dir.empty() ? std::string(".") : dir) + "/" + program;
    if (::access(cand.c_str(), X_OK) == 0) return cand;
  }
  return program;
}

// The child's side of SpawnProcess, between fork and exec: only async-signal-safe calls.
[[noreturn]] void ExecChild(pid_t launcher, int out, int err, const std::string& workdir, const cpu_set_t* cpus,
                            char** argv, char** envp) {
  ::setpgid(0, 0);  // its own process group: signals reach the rank's children too
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the launcher
  if (::getppid() != launcher) ::_exit(1);
  ::dup2(out, 1);
  ::dup2(err, 2);
  if (!workdir.empty() && ::chdir(workdir.c_str()) != 0) {
    std::fprintf(stderr, "anneal launch: cannot enter the working directory %s: %s\n", workdir.c_str(), std::strerror(errno));
    ::_exit(127);
  }
  if (cpus) ::sched_setaffinity(0, sizeof(*cpus), cpus);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGTERM, &dfl, nullptr);
  sigaction(SIGINT, &dfl, nullptr);
  ::execvpe(argv[0], argv, envp);
  std::fprintf(stderr, "anneal launch: cannot run '%s': %s\n", argv[0], std::strerror(errno));
  ::_exit(127);
}

}  // namespace

Status SpawnProcess(RankProcess* r, SpawnSpec spec) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  for (int c : spec.cpus) CPU_SET(c, &mine);
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  spec.argv[0] = InPath(spec.argv[0], spec.env);
  spec.argv.insert(spec.argv.begin(), spec.wrap.begin(), spec.wrap.end());
  for (auto& s : spec.argv) argv.push_back(s.data());
  argv.push_back(nullptr);

  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return IoError(std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]), ::close(out[1]);
    return IoError(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t launcher = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
    return IoError(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) ExecChild(launcher, out[1], err[1], spec.workdir, spec.cpus.empty() ? nullptr : &mine, argv.data(), envp.data());
  ::setpgid(pid, pid);
  ::close(out[1]);
  ::close(err[1]);
  r->pid = pid;
  r->out_fd = out[0];
  r->err_fd = err[0];
  r->running = true;
  return Status::Ok();
}

namespace {

// Calls emit for buf's whole lines (all of it when flush_all) and keeps the rest.
void EmitLines(RankProcess& r, bool err, std::string* buf, bool flush_all,
               const std::function<void(RankProcess&, bool, const std::string&)>& emit) {
  size_t start = 0;
  for (size_t nl; (nl = buf->find('\n', start)) != std::string::npos; start = nl + 1) {
    emit(r, err, buf->substr(start, nl - start));
  }
  buf->erase(0, start);
  if (flush_all && !buf->empty()) {
    emit(r, err, *buf);
    buf->clear();
  }
}

}  // namespace

void PumpOutput(const std::vector<RankProcess*>& ps, Clock& clock,
                const std::function<void(RankProcess&, bool is_stderr, const std::string& line)>& emit) {
  std::vector<pollfd> fds;
  std::vector<std::pair<RankProcess*, bool>> who;  // (process, is stderr)
  for (RankProcess* r : ps) {
    if (r->out_fd >= 0) fds.push_back({r->out_fd, POLLIN, 0}), who.push_back({r, false});
    if (r->err_fd >= 0) fds.push_back({r->err_fd, POLLIN, 0}), who.push_back({r, true});
  }
  if (fds.empty()) {
    clock.SleepFor(0.05);
    return;
  }
  if (::poll(fds.data(), fds.size(), 100) <= 0) return;
  char buf[65536];
  for (size_t i = 0; i < fds.size(); ++i) {
    if (!fds[i].revents) continue;
    RankProcess* r = who[i].first;
    const bool err = who[i].second;
    const ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
    std::string& b = err ? r->err_buf : r->out_buf;
    if (n > 0) {
      b.append(buf, static_cast<size_t>(n));
      EmitLines(*r, err, &b, false, emit);
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      EmitLines(*r, err, &b, true, emit);
      ::close(fds[i].fd);
      (err ? r->err_fd : r->out_fd) = -1;
    }
  }
}

}  // namespace anneal
