#include "agent/exec_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "protocol/api_client.h"
#include "core/clock.h"
#include "core/crypto.h"

namespace anneal {

using nlohmann::json;

ExecRunner::ExecRunner(std::string server_url, json session, ExecPlace place)
    : url_(std::move(server_url)), session_(std::move(session)), place_(std::move(place)) {
  id_ = session_.value("id", std::string());
  job_ = session_.value("job", std::string());
  thread_ = std::thread([this] { Run(); });
}

ExecRunner::~ExecRunner() {
  stop_.store(true);
  const int pid = pid_.load();
  if (pid > 0) ::kill(-pid, SIGKILL);
  if (thread_.joinable()) thread_.join();
}

void ExecRunner::Send(const json& body) {
  for (int i = 0; i < 20; ++i) {  // the server may be busy for a moment; the session is lost after that
    auto c = ApiClient::Make(url_, 10);
    if (c.ok() && (*c)->Post("/v1/exec/" + id_ + "/agent-output", body).ok()) return;
    Clock::Real().SleepFor(0.25);
  }
}

int ExecRunner::Start(int* in_fd, int* out_fd, int* err_fd) {
  std::vector<std::string> args;
  for (const json& a : session_.value("argv", json::array())) args.push_back(a.get<std::string>());
  if (args.empty()) return -1;
  args.insert(args.begin(), place_.wrap.begin(), place_.wrap.end());
  const bool tty = session_.value("tty", false);
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, master = -1;
  pid_t pid;
  if (tty) {
    pid = ::forkpty(&master, nullptr, nullptr, nullptr);
  } else {
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return -1;
    pid = ::fork();
  }
  if (pid < 0) return -1;
  if (pid == 0) {
    ::setpgid(0, 0);
    if (!tty) ::dup2(in[0], 0), ::dup2(out[1], 1), ::dup2(err[1], 2);
    for (const auto& [k, v] : place_.env) ::setenv(k.c_str(), v.c_str(), 1);
    if (!place_.workdir.empty() && ::chdir(place_.workdir.c_str()) != 0) ::_exit(126);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "anneal exec: cannot run '%s': %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  if (tty) {
    *in_fd = master, *out_fd = ::dup(master), *err_fd = -1;
  } else {
    ::close(in[0]), ::close(out[1]), ::close(err[1]);
    *in_fd = in[1], *out_fd = out[0], *err_fd = err[0];
  }
  return pid;
}

void ExecRunner::FeedInput(int fd) {
  int64_t after = 0;
  while (!stop_.load()) {
    auto c = ApiClient::Make(url_, 10);
    auto r = c.ok() ? (*c)->Get("/v1/exec/" + id_ + "/agent-input?after=" + std::to_string(after) + "&wait_s=1")
                    : Result<json>(c.status());
    if (!r.ok()) {
      Clock::Real().SleepFor(0.25);
      continue;
    }
    for (const json& ch : r->value("chunks", json::array())) {
      after = std::max<int64_t>(after, ch.value("seq", int64_t{0}));
      const std::string bytes = Base64Decode(ch.value("data", std::string()));
      for (size_t off = 0; off < bytes.size();) {
        const ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
        if (n <= 0) return;
        off += static_cast<size_t>(n);
      }
    }
    if (r->value("eof", false)) {
      if (session_.value("tty", false)) {
        (void)!::write(fd, "\x04", 1);  // end of input at a terminal: ^D
      } else {
        ::close(fd);
        input_closed_.store(true);
      }
      return;
    }
  }
}

void ExecRunner::Pump(int out_fd, int err_fd) {
  std::string pending[3];
  double last = MonotonicSeconds();
  auto flush = [&] {
    json chunks = json::array();
    for (int s : {1, 2}) {
      if (!pending[s].empty()) chunks.push_back({{"stream", s}, {"data", Base64Encode(pending[s])}}), pending[s].clear();
    }
    if (!chunks.empty()) Send({{"chunks", chunks}});
    last = MonotonicSeconds();
  };
  int fds[3] = {-1, out_fd, err_fd};
  while (fds[1] >= 0 || fds[2] >= 0) {
    std::vector<pollfd> p;
    std::vector<int> which;
    for (int s : {1, 2}) {
      if (fds[s] >= 0) p.push_back({fds[s], POLLIN, 0}), which.push_back(s);
    }
    if (::poll(p.data(), p.size(), 50) > 0) {
      for (size_t i = 0; i < p.size(); ++i) {
        if (!p[i].revents) continue;
        char buf[16384];
        const ssize_t n = ::read(p[i].fd, buf, sizeof(buf));
        if (n > 0) {
          pending[which[i]].append(buf, static_cast<size_t>(n));
        } else if (n == 0 || errno != EINTR) {  // a closed pipe, or EIO from a pty whose child ended
          ::close(p[i].fd);
          fds[which[i]] = -1;
        }
      }
    }
    if (pending[1].size() + pending[2].size() > 65536 || MonotonicSeconds() - last > 0.05) {
      flush();
    }
  }
  flush();
}

void ExecRunner::Run() {
  int in = -1, out = -1, err = -1;
  const int pid = Start(&in, &out, &err);
  if (pid < 0) {
    Send({{"exit_code", 255}, {"message", "the instance could not start the command"}});
    done_.store(true);
    return;
  }
  pid_.store(pid);
  std::thread feeder;
  if (session_.value("stdin", false)) {
    feeder = std::thread([this, in] { FeedInput(in); });
  } else if (!session_.value("tty", false)) {
    ::close(in);  // no input: the command reads end of file at once
  }
  Pump(out, err);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  stop_.store(true);
  if (feeder.joinable()) feeder.join();
  // The input's end: a pty's master, or a pipe the input never closed.
  if (session_.value("tty", false) || (session_.value("stdin", false) && !input_closed_.load())) ::close(in);
  const int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  Send({{"exit_code", code}, {"message", WIFSIGNALED(st) ? std::string("killed by signal ") + std::to_string(WTERMSIG(st)) : ""}});
  done_.store(true);
}

}  // namespace anneal
