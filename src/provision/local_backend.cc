// The local backend: each instance is an `anneal agent` process on this machine, in its own session
// (so it outlives a server that is killed and restarted), writing its own output to
// <work_root>/<id>.log. Release is a request through the API (the agent exits on its next heartbeat);
// an agent still running release_grace_s later is killed.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <vector>

#include "provision/instance_provider.h"
#include "core/dir_lock.h"
#include "core/env.h"
#include "core/progress.h"

namespace anneal {

namespace {

class LocalBackend : public InstanceProvider {
 public:
  explicit LocalBackend(const LocalBackendOptions& o) : o_(o) {
    if (o_.agent_binary.empty()) o_.agent_binary = SelfExecutable();
  }
  ~LocalBackend() override { (void)Poll(); }

  std::string name() const override { return "local"; }
  bool obtains() const override { return true; }
  int capacity() const override { return o_.max_instances; }
  std::string CapacityHint() const override {
    return "the local backend runs at most " + std::to_string(o_.max_instances) + " at once (start the server with more --max-instances)";
  }

  // Processes start at once: nothing is ever pending. A fork that fails stops the ones started.
  Status Obtain(const GangRequest& g) override {
    for (size_t n = 0; n < g.instances.size(); ++n) {
      Status st = Launch(g.instances[n]);
      if (st.ok()) continue;
      for (size_t k = 0; k < n; ++k) Kill(g.instances[k].id);
      return st.Annotate("obtaining " + std::to_string(g.instances.size()) + " instance(s) for " + g.job);
    }
    return Status::Ok();
  }

  void Release(const std::string& id) override {
    auto it = procs_.find(id);
    if (it != procs_.end() && it->second.released_at < 0) it->second.released_at = MonotonicSeconds();
  }

  ProvisionReport Poll() override {
    ProvisionReport r;
    for (auto it = procs_.begin(); it != procs_.end();) {
      int st = 0;
      const pid_t p = ::waitpid(it->second.pid, &st, WNOHANG);
      if (p == it->second.pid || (p < 0 && errno == ECHILD)) {
        r.gone.push_back(it->first);
        r.gone_dirs[it->first] = JoinPath(o_.work_root, it->first);
        it = procs_.erase(it);
        continue;
      }
      if (it->second.released_at >= 0 && MonotonicSeconds() - it->second.released_at > o_.release_grace_s) {
        ::kill(it->second.pid, SIGKILL);
      }
      ++it;
    }
    AbandonedFolders(&r);
    return r;
  }

 private:
  // Agents' folders under the work root that no live process owns and no agent of this server uses:
  // those of agents a previous server started, which this one never saw exit (a folder counts when
  // it has the owner lock file, free, or a spool: never anything else a user keeps there).
  void AbandonedFolders(ProvisionReport* r) const {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(o_.work_root, ec)) {
      const std::string id = e.path().filename().string();
      if (!e.is_directory(ec) || procs_.count(id) || r->gone_dirs.count(id)) continue;
      const std::string dir = e.path().string();
      const bool agents = std::filesystem::exists(dir + "/.owner.lock", ec) || std::filesystem::is_directory(dir + "/spool", ec);
      if (agents && DirLockFree(dir)) r->gone_dirs[id] = dir;
    }
  }

  void Kill(const std::string& id) {
    auto it = procs_.find(id);
    if (it == procs_.end()) return;
    ::kill(it->second.pid, SIGKILL);
    ::waitpid(it->second.pid, nullptr, 0);
    procs_.erase(it);
  }

  Status Launch(const InstanceRequest& r) {
    ANNEAL_RETURN_IF_ERROR(Env::Default().CreateDirs(o_.work_root));
    const std::string work = JoinPath(o_.work_root, r.id);
    const std::string log = work + ".log";
    std::vector<std::string> args = {o_.agent_binary, "agent", "--server", r.server_url, "--instance-id", r.id,
                                     "--instance-type", r.instance_type, "--slots", std::to_string(r.slots),
                                     "--work-dir", work, "--heartbeat-s", std::to_string(o_.heartbeat_s),
                                     "--orphan-timeout-s", std::to_string(o_.orphan_timeout_s),
                                     "--remove-work-dir", "--join-token-fd", std::to_string(kSecretFd)};
    for (const std::string& h : o_.hide) args.insert(args.end(), {"--hide", h});
    if (o_.no_sandbox) args.push_back("--no-sandbox");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // The environment (built before fork): this process's, less any token, plus the backend's. The
    // instance's registration secret goes through a pipe (fd kSecretFd in the agent), read once: not
    // in the environment, which /proc shows every process of this user, nor on a command line.
    std::vector<std::string> envs;
    for (char** e = environ; e && *e; ++e) {
      const std::string kv = *e;
      const std::string key = kv.substr(0, kv.find('='));
      if (key == "ANNEAL_TOKEN" || key == "ANNEAL_TOKEN_FILE" || key == "ANNEAL_JOIN_TOKEN" || o_.env.count(key)) continue;
      envs.push_back(kv);
    }
    for (const auto& [k, v] : o_.env) envs.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& e : envs) envp.push_back(e.data());
    envp.push_back(nullptr);
    int secret[2];
    if (::pipe2(secret, O_CLOEXEC) != 0) return PeerError(std::string("local backend: pipe: ") + std::strerror(errno));
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(secret[0]);
      ::close(secret[1]);
      return PeerError(std::string("local backend: fork: ") + std::strerror(errno));
    }
    if (pid == 0) {
      // The pipe's read end as kSecretFd, open across exec (dup2 clears FD_CLOEXEC; a no-op dup2 does not).
      if (secret[0] == kSecretFd) {
        ::fcntl(kSecretFd, F_SETFD, 0);
      } else {
        ::dup2(secret[0], kSecretFd);
      }
      ::setsid();  // its own session: a server killed with its process group leaves the agent running
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (devnull >= 0) ::dup2(devnull, 0);
      for (int sig : {SIGTERM, SIGINT, SIGPIPE}) ::signal(sig, SIG_DFL);
      ::execve(argv[0], argv.data(), envp.data());
      std::fprintf(stderr, "local backend: cannot run %s: %s\n", argv[0], std::strerror(errno));
      ::_exit(127);
    }
    // A secret is far below the pipe's buffer: the write never waits for the agent; the read end,
    // still open here, spares this process a SIGPIPE if the agent already died.
    const ssize_t n = ::write(secret[1], r.secret.data(), r.secret.size());
    ::close(secret[1]);
    ::close(secret[0]);
    procs_[r.id] = {pid, -1};
    if (n != static_cast<ssize_t>(r.secret.size())) return PeerError("local backend: cannot hand instance " + r.id + " its secret");
    return Status::Ok();
  }

  static constexpr int kSecretFd = 3;  // the agent's --join-token-fd

  struct Proc {
    pid_t pid;
    double released_at;
  };
  LocalBackendOptions o_;
  std::map<std::string, Proc> procs_;
};

}  // namespace

std::unique_ptr<InstanceProvider> MakeLocalBackend(const LocalBackendOptions& o) { return std::make_unique<LocalBackend>(o); }


}  // namespace anneal
