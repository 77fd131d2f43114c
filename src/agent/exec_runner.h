// ExecRunner: one `anneal exec` session on this instance (control/exec_sessions.h, docs/exec.md): the
// command runs in the job's working directory with the ranks' environment (in its own process group;
// under a pseudo-terminal when the user asked for one), its output goes to the server in chunks, the
// user's input comes from it, and its exit code ends the session. Destroying the runner (the job
// ended, the agent stops) kills the command.
#pragma once

#include <atomic>
#include <map>
#include <string>
#include <vector>
#include <thread>

#include <nlohmann/json.hpp>

namespace anneal {

struct ExecPlace {
  std::string workdir;
  std::map<std::string, std::string> env;
  std::vector<std::string> wrap;  // the job's sandbox-exec prefix (agent/job_sandbox.h): exec runs inside it
};

class ExecRunner {
 public:
  // session: the heartbeat answer's {id, job, argv, stdin, tty}.
  ExecRunner(std::string server_url, nlohmann::json session, ExecPlace place);
  ~ExecRunner();
  bool done() const { return done_.load(); }
  const std::string& job() const { return job_; }

 private:
  void Run();
  int Start(int* in_fd, int* out_fd, int* err_fd);  // the child's pid, or -1
  void FeedInput(int fd);                          // the input thread
  void Pump(int out_fd, int err_fd);               // output until both streams end
  void Send(const nlohmann::json& body);

  std::string url_, id_, job_;
  nlohmann::json session_;
  ExecPlace place_;
  std::atomic<bool> done_{false}, stop_{false}, input_closed_{false};
  std::atomic<int> pid_{-1};
  std::thread thread_;
};

}  // namespace anneal
