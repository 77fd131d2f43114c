// RunCommand: fork + execvpe with both output pipes read through poll() until the command exits or its
// time runs out (then SIGKILL to its process group).
#include "provision/command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/clock.h"

extern char** environ;

namespace anneal {

namespace {

std::vector<std::string> ChildEnvironment(const CommandOptions& o) {
  std::vector<std::string> envs;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    bool drop = o.set_env.count(key) > 0;
    for (const auto& u : o.unset_env) drop = drop || u == key;
    if (!drop) envs.push_back(kv);
  }
  for (const auto& [k, v] : o.set_env) envs.push_back(k + "=" + v);
  return envs;
}

// Reads both pipes until they close or the deadline passes; true when they closed in time.
bool Drain(int out_fd, int err_fd, double deadline, CommandResult* r) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&r->out, &r->err};
  int open = 2;
  char buf[8192];
  while (open > 0) {
    const double left = deadline - MonotonicSeconds();
    if (left <= 0) return false;
    const int n = ::poll(fds, 2, static_cast<int>(left * 1000) + 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    for (int k = 0; k < 2; ++k) {
      if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t got = ::read(fds[k].fd, buf, sizeof(buf));
      if (got > 0) {
        sinks[k]->append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        fds[k].fd = -1;
        --open;
      }
    }
  }
  return true;
}

}  // namespace

Result<CommandResult> RunCommand(const std::vector<std::string>& argv, const CommandOptions& o) {
  if (argv.empty()) return Internal("RunCommand: no command");
  std::vector<std::string> args = argv, envs = ChildEnvironment(o);
  std::vector<char*> av, ev;
  for (auto& a : args) av.push_back(a.data());
  av.push_back(nullptr);
  for (auto& e : envs) ev.push_back(e.data());
  ev.push_back(nullptr);
  int out[2], err[2], status_pipe[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 || ::pipe2(status_pipe, O_CLOEXEC) != 0) {
    return IoError(std::string("cannot run ") + argv[0] + ": pipe: " + std::strerror(errno));
  }
  const pid_t pid = ::fork();
  if (pid < 0) return IoError(std::string("cannot run ") + argv[0] + ": fork: " + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);  // its own group: a timeout kills what it started too
    const int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    for (int sig : {SIGTERM, SIGINT, SIGPIPE, SIGCHLD}) ::signal(sig, SIG_DFL);
    ::execvpe(av[0], av.data(), ev.data());
    const int e = errno;
    (void)!::write(status_pipe[1], &e, sizeof(e));
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  ::close(status_pipe[1]);
  int exec_errno = 0;
  const bool exec_failed = ::read(status_pipe[0], &exec_errno, sizeof(exec_errno)) == sizeof(exec_errno);
  ::close(status_pipe[0]);
  CommandResult r;
  const bool closed = !exec_failed && Drain(out[0], err[0], MonotonicSeconds() + o.timeout_s, &r);
  if (!exec_failed && !closed) {
    r.timed_out = true;
    ::kill(-pid, SIGKILL);
  }
  ::close(out[0]);
  ::close(err[0]);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (exec_failed) {
    return PeerError("cannot run " + argv[0] + ": " + std::strerror(exec_errno) +
                     (exec_errno == ENOENT ? " (not on PATH: install it or put it on the server's PATH)" : ""));
  }
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

}  // namespace anneal
