// anneal exec JOB [--node N] [-i] [-t] -- COMMAND...: runs a command on a running job's instance
// through its agent (control/exec_routes.h, docs/exec.md) and exits with the command's exit code.
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "cli/commands.h"
#include "cli/target.h"
#include "core/crypto.h"

namespace anneal::cli {

namespace {

using nlohmann::json;

struct ExecOptions {
  Target target;
  std::string job;
  int node = 0;
  bool input = false, tty = false;
  std::vector<std::string> command;
};

// Sends this process's standard input to the session until its end (-i, -t).
void SendInput(const Target& t, const std::string& sid, const std::atomic<bool>& done) {
  auto conn = Connect(t, false);
  if (!conn.ok()) return;
  char buf[4096];
  while (!done.load()) {
    const ssize_t n = ::read(0, buf, sizeof(buf));
    const bool eof = n <= 0;
    json body = {{"data", Base64Encode(std::string_view(buf, eof ? 0 : static_cast<size_t>(n)))}, {"eof", eof}};
    if (!conn->client->Post("/v1/exec/" + sid + "/input", body).ok() || eof) return;
  }
}

// Prints the session's output as it comes; returns the command's exit code.
Result<int> FollowOutput(ApiClient* c, const std::string& sid) {
  int64_t after = 0;
  for (;;) {
    ANNEAL_ASSIGN_OR_RETURN(json r, c->Get("/v1/exec/" + sid + "/output?after=" + std::to_string(after) + "&wait_s=1"));
    for (const json& ch : r.value("chunks", json::array())) {
      after = std::max<int64_t>(after, ch.value("seq", int64_t{0}));
      const std::string bytes = Base64Decode(ch.value("data", std::string()));
      FILE* to = ch.value("stream", 1) == 2 ? stderr : stdout;
      std::fwrite(bytes.data(), 1, bytes.size(), to);
      std::fflush(to);
    }
    if (r.value("done", false)) {
      const std::string m = r.value("message", std::string());
      if (!m.empty()) std::fprintf(stderr, "anneal exec: %s\n", m.c_str());
      return r.value("exit_code", 255);
    }
  }
}

Status RunExec(const ExecOptions& o) {
  ANNEAL_ASSIGN_OR_RETURN(Connection conn, Connect(o.target, false));
  const bool input = o.input || o.tty;
  ANNEAL_ASSIGN_OR_RETURN(json s, conn.client->Post("/v1/jobs/" + o.job + "/exec", {{"node", o.node}, {"command", o.command},
                                                                                    {"stdin", input}, {"tty", o.tty}}));
  const std::string sid = s.value("id", std::string());
  termios saved{};
  const bool raw = o.tty && ::isatty(0) && ::tcgetattr(0, &saved) == 0;
  if (raw) {
    termios t = saved;
    ::cfmakeraw(&t);
    ::tcsetattr(0, TCSANOW, &t);
  }
  std::atomic<bool> done{false};
  std::thread in;
  if (input) in = std::thread([&] { SendInput(o.target, sid, done); });
  Result<int> code = FollowOutput(conn.client.get(), sid);
  done.store(true);
  if (raw) ::tcsetattr(0, TCSANOW, &saved);
  if (in.joinable()) in.detach();  // it may be blocked reading a terminal; the process ends now
  if (!code.ok()) return code.status();
  std::fflush(stdout);
  std::_Exit(*code);
}

}  // namespace

void AddExecCommand(CLI::App& app, RunFn* run) {
  auto o = std::make_shared<ExecOptions>();
  CLI::App* c = app.add_subcommand(
      "exec",
      "Run a command on an instance of a running job, in the job's working directory and environment, through its "
      "agent; its output comes back and anneal exits with its exit code. Only the job's owner or an admin.\n"
      "Example: anneal exec kjv-0007 --node 1 -- sh -c 'hostname; pwd; env | grep RANK'");
  c->add_option("job", o->job, "The job's id")->required();
  c->add_option("--node", o->node, "Which instance (node index, from 0)")->capture_default_str();
  c->add_flag("-i,--stdin", o->input, "Pass this process's standard input to the command");
  c->add_flag("-t,--tty", o->tty, "Run the command under a terminal (implies -i; this terminal goes raw meanwhile)");
  c->add_option("command", o->command, "The command, after --")->required();
  AddTargetOptions(c, &o->target, false);
  c->callback([run, o] { *run = [o] { return RunExec(*o); }; });
}

}  // namespace anneal::cli
