#include "agent/agent.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <mutex>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>

#include "agent/dir_sync.h"
#include "agent/exec_runner.h"
#include "agent/health_check.h"
#include "agent/node_metrics.h"
#include "agent/shipper.h"
#include "agent/stopping_rules.h"
#include "backends/command.h"
#include "backends/slurm_text.h"
#include "control/api_client.h"
#include "control/auth.h"
#include "agent/package_unpack.h"
#include "control/exit_cause.h"
#include "control/job_spec.h"
#include "control/wire.h"
#include "core/crypto.h"
#include "core/env.h"
#include "core/progress.h"
#include "agent/job_sandbox.h"
#include "launch/launcher.h"
#include "launch/sandbox.h"
#include "comm/store.h"
#include "data/channel.h"
#include "storage/s3_stats.h"

extern char** environ;

namespace anneal {

namespace {

using nlohmann::json;

std::atomic<int> g_agent_signal{0};
extern "C" void OnAgentSignal(int sig) { g_agent_signal.store(sig); }

void Say(const std::string& m) {
  std::fprintf(stderr, "[%s] anneal agent: %s\n", FormatTime(WallSeconds()).c_str(), m.c_str());
  std::fflush(stderr);
}

// A port free on this host right now (the ranks bind it a moment later).
Result<int> FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return IoError(std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = 0;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return IoError(std::string("finding a free port: ") + std::strerror(errno));
  }
  ::close(fd);
  return static_cast<int>(ntohs(a.sin_port));
}

// Where the launchers of a multi-instance launch meet: node 0's address and the two ports it chose
// (MASTER_PORT for the ranks, the launcher's store), and the key the launchers' launch-rsh requests
// carry (mpirun off Slurm: launch/remote_exec.h), shared through the server, never the store.
struct Meeting {
  std::string master_addr;
  int master_port = 0;
  int store_port = -1;
  std::string exec_key;
};

// Meets the job's other instances through the server's rendezvous endpoint under `key` (a job attempt
// uses its attempt number; a health-check round 1000000 + attempt * 1000 + round): node 0 picks two
// free ports and PUTs them with its address (the server keeps the first value and answers with it),
// the others GET until the value is there, up to timeout_s (PeerError) or until *stop (Cancelled).
Result<Meeting> MeetThroughServer(const std::string& server_url, const std::string& job, long long key, int node,
                                  const std::string& address, double timeout_s, const std::atomic<bool>& stop,
                                  Clock& clock) {
  ANNEAL_ASSIGN_OR_RETURN(auto c, ApiClient::Make(server_url, 10));
  const std::string rdzv = "/v1/jobs/" + job + "/rendezvous/" + std::to_string(key);
  json value;
  if (node == 0) {
    ANNEAL_ASSIGN_OR_RETURN(int mp, FreePort());
    ANNEAL_ASSIGN_OR_RETURN(int sp, FreePort());
    ANNEAL_ASSIGN_OR_RETURN(value, c->Put(rdzv, {{"master_addr", address}, {"master_port", mp}, {"store_port", sp},
                                                 {"exec_key", RandomHex(16)}}));
  } else {
    const double deadline = clock.Monotonic() + timeout_s;
    for (;;) {
      auto v = c->Get(rdzv);
      if (v.ok()) {
        value = *v;
        break;
      }
      if (stop.load()) return Cancelled("stopped while waiting for node 0 of " + job + " to publish its ports");
      if (clock.Monotonic() > deadline) {
        return PeerError("node 0 of " + job + " did not publish its ports within " +
                         std::to_string(static_cast<long long>(timeout_s)) + " s");
      }
      clock.SleepFor(0.1);
    }
  }
  Meeting m;
  m.master_addr = value["master_addr"].get<std::string>();
  m.master_port = value["master_port"].get<int>();
  m.store_port = value["store_port"].get<int>();
  m.exec_key = value.value("exec_key", "");
  return m;
}

// "${NAME}" -> env[NAME] (names not in env are left as they are).
std::string ExpandVars(const std::string& s, const std::map<std::string, std::string>& env) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 2, "${") == 0) {
      const size_t end = s.find('}', i + 2);
      if (end != std::string::npos) {
        const std::string name = s.substr(i + 2, end - i - 2);
        auto it = env.find(name);
        if (it != env.end()) {
          out += it->second;
          i = end + 1;
          continue;
        }
        if (const char* e = std::getenv(name.c_str())) {
          out += e;
          i = end + 1;
          continue;
        }
      }
    }
    out += s[i++];
  }
  return out;
}

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// A run assignment this agent cannot use (a spec it cannot read: a server of another version) ends
// the attempt on this node as a user error, with the reason, instead of being asked again for ever.
void RefuseAssignment(ApiClient& client, const json& reply, const Status& why) {
  const json a = reply.value("assignment", json::object());
  if (reply.value("action", std::string()) != "run" || !a.is_object() || !a.contains("job") || !a["job"].is_string()) return;
  const json report = {{"attempt", a.value("attempt", 0)}, {"node", a.value("node", 0)}, {"state", "finished"},
                       {"exit_code", 2}, {"cause", ExitCauseName(ExitCause::kUserError)}, {"local", true},
                       {"failed_rank", -1},
                       {"message", "this agent cannot run the assignment: " + why.message()}};
  (void)client.Post("/v1/jobs/" + a["job"].get<std::string>() + "/reports", report);
}

// One job attempt on this instance, on its own thread.
// Why this agent got SIGTERM. Under Slurm (SLURM_JOB_ID set) its allocation's state tells: still
// RUNNING (a time limit's --signal warning, scancel --signal), PREEMPTED or TIMEOUT (or COMPLETING for
// one of those two reasons) — an interruption, resumed from the ranks' checkpoint; NODE_FAIL, CANCELLED
// or any other end (COMPLETING after a node failure) — the allocation was lost, an infrastructure
// failure. Elsewhere (a local agent, a pod) SIGTERM is an interruption.
ExitCause SignalCause(std::string* why) {
  const char* job = std::getenv("SLURM_JOB_ID");
  if (!job || !*job) {
    *why = "interrupted: the instance got SIGTERM";
    return ExitCause::kInterrupted;
  }
  CommandOptions co;
  co.timeout_s = 10;
  auto r = RunCommand({"scontrol", "-o", "show", "job", job}, co);
  const std::string state = r.ok() && r->exit_code == 0 ? ScontrolField(r->out, "JobState") : "";
  const std::string reason = r.ok() ? ScontrolField(r->out, "Reason") : "";
  // COMPLETING: the allocation is ending; its reason says whether a time limit or pre-emption ended it.
  const bool warned_end = state == "COMPLETING" && (reason.find("TimeLimit") != std::string::npos ||
                                                    reason.find("Preempt") != std::string::npos);
  if (state.empty() || state == "RUNNING" || state == "PREEMPTED" || state == "TIMEOUT" || warned_end) {
    *why = "interrupted: the instance got SIGTERM from Slurm (allocation " + std::string(job) + " " +
           (state.empty() ? "state unknown" : state) + ": pre-emption or a time limit)";
    return ExitCause::kInterrupted;
  }
  *why = "Slurm ended allocation " + std::string(job) + ": " + state + " (" + reason + ")";
  return ExitCause::kInfrastructure;
}

// Whether path is folder or inside it (both absolute, normalised).
bool IsUnder(const std::string& path, const std::string& folder) {
  return path == folder || (path.size() > folder.size() && path.compare(0, folder.size(), folder) == 0 && path[folder.size()] == '/');
}

// What no job's process may reach: --hide (the server's data folder), this agent's folder (its jobs,
// the sandbox plans), its join token file, and its HOME (credentials such as ~/.aws) unless the
// anneal binary itself lives there.
std::vector<std::string> SandboxHiddenPaths(const AgentOptions& o) {
  std::vector<std::string> hide;
  auto add = [&](const std::string& p) {
    std::error_code ec;
    const std::string abs = std::filesystem::absolute(p, ec).lexically_normal().string();
    if (!p.empty() && !ec && abs != "/") hide.push_back(abs);
  };
  for (const std::string& h : o.hide) add(h);
  add(o.work_dir);
  if (!o.join_token_file.empty()) add(o.join_token_file);
  const char* home = std::getenv("HOME");
  if (home && *home && !IsUnder(SelfExecutable(), home)) add(home);
  return hide;
}

// What a sandboxed job names on the host's /tmp or /dev/shm (an argument, FLAG=PATH, an environment
// value) that exists there: its own /tmp and /dev/shm are private, so its ranks will not find it.
std::vector<std::string> HostTmpPathsNamed(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
  std::vector<std::string> out;
  auto consider = [&](const std::string& a) {
    const size_t eq = a.find('=');
    const std::string p = std::filesystem::path(a.rfind('/', 0) == 0 || eq == std::string::npos ? a : a.substr(eq + 1))
                              .lexically_normal()
                              .string();
    if ((IsUnder(p, "/tmp") || IsUnder(p, "/dev/shm")) && p != "/tmp" && p != "/dev/shm" && Env::Default().Exists(p) &&
        std::find(out.begin(), out.end(), p) == out.end()) {
      out.push_back(p);
    }
  };
  for (const std::string& a : args) consider(a);
  for (const auto& kv : env) consider(kv.second);
  return out;
}

std::string FormatNumber(double v) {
  char b[32];
  std::snprintf(b, sizeof(b), "%g", v);
  return b;
}

class JobRunner {
 public:
  // on_done is called from the runner's thread once the job's end is reported.
  JobRunner(const AgentOptions& o, std::string address, Assignment assignment, std::function<void()> on_done)
      : o_(o), address_(std::move(address)), a_(std::move(assignment)), on_done_(std::move(on_done)) {
    job_ = a_.job;
    attempt_ = a_.attempt;
    node_ = a_.node;
    nnodes_ = static_cast<int>(a_.addresses.size());
    thread_ = std::thread([this] { Run(); });
  }
  ~JobRunner() {
    Stop();
    if (thread_.joinable()) thread_.join();
  }
  void Stop() { stop_.store(true); }
  // The server has been unreachable past the orphan timeout: stop the ranks (they checkpoint) rather
  // than train on unwatched; what is left to report gets the short budget a signal's stop gets.
  void Orphan() {
    orphaned_.store(true);
    stop_.store(true);
  }
  bool done() const { return done_.load(); }
  const std::string& job() const { return job_; }
  int attempt() const { return attempt_; }
  // Where and with what an `anneal exec` into this job runs (set once the job is prepared).
  std::optional<ExecPlace> Place() {
    std::lock_guard<std::mutex> l(place_mu_);
    return place_;
  }

 private:
  void Log(const std::string& raw) {
    const std::string m = Mask(raw);
    Say(job_ + " node " + std::to_string(node_) + ": " + m);
    if (shipper_) shipper_->AddLine(-1, "agent", m);
  }

  // The line with every secret value (spec.secrets, the role's secret key) replaced by "***".
  std::string Mask(std::string line) const {
    for (const std::string& v : secret_values_) {
      for (size_t at = line.find(v); at != std::string::npos; at = line.find(v, at + 3)) line.replace(at, v.size(), "***");
    }
    return line;
  }

  // Posts a node report, retrying while the server is away (up to the orphan timeout).
  void Report(const std::string& state, int exit_code = -1, const std::string& message = "", int failed_rank = -1,
              ExitCause cause = ExitCause::kNone, bool local = false) {
    json body = {{"attempt", attempt_}, {"node", node_}, {"state", state}, {"exit_code", exit_code}, {"message", Mask(message)}};
    if (!sandbox_desc_.empty()) body["sandbox"] = sandbox_desc_;
    if (failed_rank >= 0) body["failed_rank"] = failed_rank;
    if (state == "finished") {
      body["cause"] = ExitCauseName(cause);
      body["local"] = local;  // false: this node stopped because another one failed
    }
    double backoff = 0.1;
    for (;;) {
      auto c = ApiClient::Make(o_.server_url, 10);
      if (c.ok() && (*c)->Post("/v1/jobs/" + job_ + "/reports", body).ok()) {
        unreachable_since_ = -1;
        return;
      }
      if (unreachable_since_ < 0) unreachable_since_ = o_.clock->Monotonic();
      if (ServerBudgetLeft() <= 0) break;
      o_.clock->SleepFor(backoff);
      backoff = std::min(2.0, backoff * 2);
    }
    Say("could not report '" + state + "' for " + job_ + ": the server stayed unreachable");
  }

  // How much longer calls to the server may keep retrying. One budget for all of this job's calls,
  // counted from the first that failed: the orphan timeout, or 10 s once the agent or its job was told
  // to stop (SIGTERM, a stop request, the orphan timeout itself). Each report used to retry for the whole orphan timeout on its own, so an agent whose
  // server was gone, signalled or not, took one timeout per report and flush to exit.
  double ServerBudgetLeft() const {
    if (unreachable_since_ < 0) return o_.orphan_timeout_s;
    const double budget = g_agent_signal.load() || orphaned_.load() || stop_.load() ? std::min(10.0, o_.orphan_timeout_s)
                                                                                   : o_.orphan_timeout_s;
    return budget - (o_.clock->Monotonic() - unreachable_since_);
  }

  void Run() {
    shipper_ = std::make_unique<Shipper>(o_.server_url, job_, attempt_, node_);
    s3_start_ = S3CounterSnapshot();
    Report("downloading");
    LaunchOptions lo;
    Status st = Prepare(&lo);
    int exit_code = 0, failed_rank = -1;
    ExitCause cause = ExitCause::kNone;
    bool local = false;
    std::string summary;
    if (!st.ok()) {
      Log("preparing the job failed: " + st.ToString());
      exit_code = st.ExitCode();
      summary = st.message();
      // A spec, source or dataset that cannot be used is the user's; a store or server that failed is not.
      local = true;
      cause = st.code() == Code::kInvalidInput || st.code() == Code::kNotFound ? ExitCause::kUserError
                                                                                : ExitCause::kInfrastructure;
    } else if (stop_.load()) {
      exit_code = 1;
      summary = "stopped before the ranks started";
      cause = ExitCause::kStopped;
      if (g_agent_signal.load()) {
        cause = SignalCause(&summary);
        local = true;
      }
    } else {
      Report("training");
      auto oom_kills = [this] { return sandbox_ && sandbox_->cgroup() ? sandbox_->cgroup()->OomKills() : CgroupOomKills(); };
      const long long oom_before = oom_kills();
      last_activity_.store(o_.clock->Monotonic());
      std::atomic<bool> metrics_stop{false};
      std::thread metrics([&] { MetricsLoop(&metrics_stop); });
      auto r = RunLauncher(lo, [this](const std::string& line) { Log(line); });
      {
        std::lock_guard<std::mutex> l(metrics_mu_);
        metrics_stop.store(true);
      }
      metrics_cv_.notify_all();
      metrics.join();
      if (!r.ok()) {
        exit_code = r.status().ExitCode();
        summary = r.status().message();
        Log("the launcher failed: " + r.status().ToString());
        local = true;
        cause = r.status().code() == Code::kInvalidInput ? ExitCause::kUserError : ExitCause::kInfrastructure;
      } else {
        exit_code = r->exit_code;
        summary = r->summary.empty() ? "ranks finished with exit code " + std::to_string(exit_code) : r->summary;
        failed_rank = r->failed_rank;
        local = r->failure_local;
        const long long oom_after = oom_kills();
        if (rule_fired_.load()) {
          // A stopping rule ended the attempt: its action says whether that is retried.
          exit_code = exit_code ? exit_code : 1;
          cause = rule_retry_ ? ExitCause::kInfrastructure : ExitCause::kUserError;
          local = true;
          failed_rank = -1;
          summary = rule_message_ + "\n" + summary;
        } else if (exit_code == 0 && g_agent_signal.load()) {
          // Slurm's SIGTERM reaches the ranks too (scancel --signal, a time limit's warning): they may
          // checkpoint and exit 0 before this agent's own stop reaches them. Not a completed job.
          cause = SignalCause(&summary);
          exit_code = 1;
          local = true;
          summary += "; the ranks saved a checkpoint and exited";
        } else if (exit_code == 0) {
          cause = ExitCause::kNone;
        } else if (hung_.load()) {
          cause = ExitCause::kInfrastructure;
          local = true;
          summary = hang_message_ + "\n" + summary;
        } else if (r->failure_local) {
          cause = ClassifyRankExit(r->failed_status, oom_before >= 0 && oom_after > oom_before);
          if (cause == ExitCause::kOutOfMemory) {
            summary += spec_memory_mb_ > 0 ? "\nthe job's cgroup counted an OOM kill: the rank went over resources.memory_mb (" +
                                                 std::to_string(spec_memory_mb_) + " MiB)"
                                           : "\nthe instance's cgroup counted an OOM kill: the rank ran out of memory";
          }
        } else if (r->interrupted && g_agent_signal.load()) {
          // The agent itself got SIGTERM: the ranks were sent SIGTERM to checkpoint. A warning (the
          // allocation goes on) is an interruption the server resumes; a lost allocation is not.
          std::string why;
          cause = SignalCause(&why);
          local = true;
          summary = why + "; the ranks were stopped to save a checkpoint\n" + summary;
        } else if (r->interrupted && !stop_.load()) {
          // A rank ended by a SIGTERM or SIGINT no one here sent (exit 143/130: it saved first): not
          // the job's failure; retried from that checkpoint.
          cause = ExitCause::kInfrastructure;
          local = true;
          summary = "a rank was interrupted by a signal from outside anneal\n" + summary;
        } else if (r->interrupted) {
          cause = ExitCause::kStopped;
        } else {
          cause = ExitCause::kInfrastructure;  // another node failed; the server takes that node's cause
        }
      }
      EndLeftovers();
      Report("uploading");
      Upload();
    }
    sandbox_.reset();
    while (!summary.empty() && summary.back() == '\n') summary.pop_back();
    ShipS3();
    if (!shipper_->Flush(std::max(1.0, ServerBudgetLeft()))) Say("log lines for " + job_ + " could not all be delivered");
    Report("finished", exit_code, summary, failed_rank, cause, local);
    // Nothing of this job stays on the instance for the next one (a warm pool, a joined agent): the
    // job's folder is removed (the role's credentials lived only in this runner and the ranks'
    // environments).
    if (o_.keep_job_dirs == false) {
      std::error_code ec;
      std::filesystem::remove_all(JoinPath(JoinPath(o_.work_dir, "jobs"), job_), ec);
    }
    done_.store(true);
    if (on_done_) on_done_();
  }

  Status Prepare(LaunchOptions* lo) {
    Env& env = Env::Default();
    const JobSpec& spec = a_.spec;
    const std::string jobdir = JoinPath(JoinPath(o_.work_dir, "jobs"), job_);
    const std::string code = JoinPath(jobdir, "code");
    std::error_code ec;
    std::filesystem::remove_all(code, ec);
    ANNEAL_RETURN_IF_ERROR(env.CreateDirs(code));
    if (!spec.source.empty()) {
      const std::string sha = spec.source.substr(spec.source.find(':') + 1);
      ANNEAL_ASSIGN_OR_RETURN(auto c, ApiClient::Make(o_.server_url, 300));
      ANNEAL_ASSIGN_OR_RETURN(std::string pkg, c->GetRaw("/v1/packages/" + sha));
      // A damaged download is infrastructure (retried); a package that is not a .tar.gz or unpacks past
      // the limits is the user's (InvalidInput: a user error, never retried).
      ANNEAL_RETURN_IF_ERROR(UnpackPackage(pkg, sha, JoinPath(jobdir, "source.tar.gz"), code,
                                           {o_.max_unpacked_bytes, o_.max_unpacked_files})
                                 .Annotate("the job's source " + spec.source));
      Log("unpacked the source package (" + std::to_string(pkg.size()) + " bytes) into " + code);
    }
    std::map<std::string, std::string> vars;
    for (const auto& [k, v] : spec.environment) vars[k] = v;
    for (const auto& [k, v] : spec.secrets) {
      vars[k] = v;
      secret_values_.push_back(v);
    }
    // The execution role's storage credentials: for the ranks' environment, and passed explicitly to
    // this job's own storage calls here (channels, checkpoint, output) — never into the agent's
    // environment, which other jobs' threads share.
    for (const auto& [k, v] : a_.credentials) {
      vars[k] = v;
      storage_[k] = vars[k];
      if (k == "AWS_SECRET_ACCESS_KEY") secret_values_.push_back(vars[k]);
    }
    std::vector<std::string> in_place;  // channels' local paths (the sandbox binds those outside jobdir)
    for (const ChannelSpec& c : spec.channels) {
      if (stop_.load()) return Status::Ok();
      const std::string var = "ANNEAL_CHANNEL_" + Upper(c.name);
      vars[var + "_MODE"] = c.mode;
      vars[var + "_URI"] = c.uri;
      if (c.mode == "fastfile") {
        vars[var] = c.uri;  // read in place by the loader (data.mode=fastfile)
        in_place.push_back(c.uri);
        continue;
      }
      ChannelOptions co;
      co.mode = c.mode;
      co.local_dir = JoinPath(JoinPath(jobdir, "channels"), c.name);
      co.quiet = true;
      co.storage = storage_;
      ANNEAL_ASSIGN_OR_RETURN(std::string path, PrepareDataChannel(c.uri, co));
      vars[var] = path;
      in_place.push_back(path);
      Log("channel " + c.name + " (" + c.mode + ") ready at " + path);
    }
    const std::string ckpt_local =
        spec.checkpoint_local_path.empty() ? JoinPath(jobdir, "checkpoints") : spec.checkpoint_local_path;
    // Folders outside the job's that its ranks write: given to the job's uid, so first checked.
    std::vector<std::string> writable;
    if (!IsUnder(ckpt_local, jobdir)) writable.push_back(ckpt_local);
    if (!spec.checkpoint_sync) {  // the ranks write it themselves: a folder here (file:// or a path)
      const std::string& u = spec.checkpoint_uri;
      const std::string dir = u.rfind("file://", 0) == 0 ? u.substr(7) : u.rfind('/', 0) == 0 ? u : "";
      if (!dir.empty() && !IsUnder(dir, jobdir)) writable.push_back(dir);
    }
    for (const std::string& w : writable) {
      if (Sandboxed()) {
        const std::string field = w == ckpt_local ? "checkpoint.local_path" : "checkpoint.uri";
        ANNEAL_RETURN_IF_ERROR(OutsideHidden(w, field + ": " + w));
        ANNEAL_RETURN_IF_ERROR(PrepareGivable(w, field, UidKey()));
      }
    }
    // (A given folder is made by PrepareGivable, not again through its path as root.)
    if (!Sandboxed() || IsUnder(ckpt_local, jobdir)) ANNEAL_RETURN_IF_ERROR(env.CreateDirs(ckpt_local));
    if (!Sandboxed()) {
      for (const std::string& w : writable) ANNEAL_RETURN_IF_ERROR(env.CreateDirs(w));
    }
    vars["ANNEAL_CHECKPOINT_DIR"] = ckpt_local;
    if (!spec.checkpoint_uri.empty()) vars["ANNEAL_CHECKPOINT_URI"] = spec.checkpoint_uri;
    if (!spec.checkpoint_uri.empty() && spec.checkpoint_sync) {
      ANNEAL_ASSIGN_OR_RETURN(ckpt_sync_, DirSync::Open(ckpt_local, spec.checkpoint_uri, storage_));
      ANNEAL_ASSIGN_OR_RETURN(int restored, ckpt_sync_->Restore());
      if (restored) Log("restored " + std::to_string(restored) + " checkpoint file(s) from " + spec.checkpoint_uri);
    }
    output_dir_ = JoinPath(jobdir, "output");
    model_dir_ = JoinPath(jobdir, "model");
    progress_dir_ = JoinPath(jobdir, "progress-" + std::to_string(attempt_));
    for (const auto& d : {output_dir_, model_dir_, progress_dir_}) ANNEAL_RETURN_IF_ERROR(env.CreateDirs(d));
    output_uri_ = spec.output_uri;
    vars["ANNEAL_OUTPUT_DIR"] = output_dir_;
    vars["ANNEAL_MODEL_DIR"] = model_dir_;
    vars["ANNEAL_PROGRESS_DIR"] = progress_dir_;
    vars["ANNEAL_INSTANCE_ID"] = o_.instance_id;
    const std::string self_dir = std::filesystem::path(SelfExecutable()).parent_path().string();
    const char* path = std::getenv("PATH");
    vars["PATH"] = self_dir + ":" + (path ? path : "/usr/bin:/bin");

    // Meet the other instances: node 0 chooses the ports.
    std::string master = address_;
    int master_port = 0, store_port = -1;
    if (nnodes_ > 1) {
      auto m = MeetThroughServer(o_.server_url, job_, attempt_, node_, address_, 300, stop_, *o_.clock);
      if (!m.ok() && stop_.load()) return Status::Ok();  // Run() reports the stop
      ANNEAL_RETURN_IF_ERROR(m.status());
      master = m->master_addr;
      master_port = m->master_port;
      store_port = m->store_port;
      lo->exec_key = m->exec_key;
    } else {
      ANNEAL_ASSIGN_OR_RETURN(master_port, FreePort());
    }
    json rc = {{"job", job_},
               {"attempt", attempt_},
               {"current_host", "node-" + std::to_string(node_)},
               {"current_address", address_},
               {"hosts", json::array()},
               {"addresses", a_.addresses},
               {"procs_per_instance", spec.procs_per_instance},
               {"instance_type", spec.instance_type}};
    for (int n = 0; n < nnodes_; ++n) rc["hosts"].push_back("node-" + std::to_string(n));
    const std::string rc_path = JoinPath(jobdir, "resourceconfig.json");
    ANNEAL_RETURN_IF_ERROR(env.WriteFileAtomic(rc_path, rc.dump(2) + "\n"));
    vars["ANNEAL_RESOURCE_CONFIG"] = rc_path;

    lo->nproc_per_node = spec.procs_per_instance;
    lo->nnodes = nnodes_;
    lo->node_rank = node_;
    lo->master_addr = master;
    lo->master_port = master_port;
    lo->store_port = store_port;
    lo->store_bind = nnodes_ > 1 ? master : "127.0.0.1";
    lo->max_restarts = 0;  // retries are the server's decision (retry.max_attempts)
    lo->job = job_;
    lo->grace_s = spec.grace_period_s;
    lo->stop = &stop_;
    lo->kill = &kill_;
    lo->first_attempt = attempt_;
    lo->allow_loopback_master = true;
    ANNEAL_ASSIGN_OR_RETURN(lo->mode, ParseLaunchMode(spec.launcher));
    const char* slurm_job = std::getenv("SLURM_JOB_ID");
    const char* slurm_node = std::getenv("SLURMD_NODENAME");
    lo->under_slurm = slurm_job && *slurm_job;
    if (lo->under_slurm && slurm_node) lo->node_name = slurm_node;  // mpirun and srun name the nodes so
    lo->self = SelfExecutable();
    hang_timeout_s_ = spec.hang_timeout_s;
    hang_startup_s_ = spec.hang_startup_s;
    ANNEAL_RETURN_IF_ERROR(MakeSandbox(jobdir, writable, in_place, lo, &vars));
    lo->workdir = code;
    lo->extra_env = vars;
    {
      ExecPlace place{code, vars, exec_wrap_};
      place.env["ANNEAL_JOB"] = job_;
      place.env["ANNEAL_ATTEMPT"] = std::to_string(attempt_);
      place.env["GROUP_RANK"] = std::to_string(node_);
      place.env["WORLD_SIZE"] = std::to_string(nnodes_ * spec.procs_per_instance);
      place.env["LOCAL_WORLD_SIZE"] = std::to_string(spec.procs_per_instance);
      place.env["MASTER_ADDR"] = master;
      place.env["MASTER_PORT"] = std::to_string(master_port);
      std::lock_guard<std::mutex> l(place_mu_);
      place_ = std::move(place);
    }
    for (const std::string& arg : spec.RankArgv()) lo->command.push_back(ExpandVars(arg, vars));
    if (sandbox_ && sandbox_->sandboxed()) {
      const std::vector<std::string> unseen = HostTmpPathsNamed(lo->command, spec.environment);
      std::string list;
      for (const std::string& u : unseen) list += (list.empty() ? "" : ", ") + u;
      if (!list.empty()) {
        Log("note: the job names " + list + " on this host's /tmp or /dev/shm, which its sandbox does not show: its /tmp "
            "and /dev/shm are its own. Pass such files in the job's source, or as a channel");
      }
    }
    extractor_ = std::make_unique<MetricExtractor>(spec.metric_definitions);
    defined_names_.clear();
    for (const MetricDefinition& d : spec.metric_definitions) defined_names_.insert(d.name);
    if (!spec.stopping_rules.empty()) rules_ = std::make_unique<StoppingRuleWatch>(spec.stopping_rules, o_.clock->Monotonic());
    lo->on_output = [this](int rank, bool err, const std::string& line) {
      last_activity_.store(o_.clock->Monotonic());
      active_seen_.store(true);
      const std::string masked = Mask(line);
      shipper_->AddLine(rank, err ? "stderr" : "stdout", masked);
      Watch([&](StoppingRuleWatch& w) {
        w.OnLine(o_.clock->Monotonic());
        return std::optional<StoppingRuleWatch::Violation>();
      });
      for (const auto& [name, v] : extractor_->Match(masked)) Metric(name, rank, v);
    };
    Log("starting " + std::to_string(spec.procs_per_instance) + " rank(s) as node " + std::to_string(node_) + " of " +
        std::to_string(nnodes_) + ": " + lo->command[0]);
    return Status::Ok();
  }

  // The job's sandbox on this node (agent/job_sandbox.h): its uid owns the job's folder, every
  // process the launcher or an exec starts enters it, and its cgroup holds the limits. A job with
  // sandbox: false, or an agent started with --no-sandbox, keeps only the cgroup (as root).
  bool Sandboxed() const { return a_.spec.sandbox && !o_.no_sandbox; }
  std::string UidKey() const { return o_.server_url + " " + job_; }

  // A folder a sandboxed job is given (bound into its sandbox) must neither lie in nor hold what no
  // job may reach: a bind of it would uncover that.
  Status OutsideHidden(const std::string& path, const std::string& what) const {
    for (const std::string& h : SandboxHiddenPaths(o_)) {
      if (IsUnder(path, h) || IsUnder(h, path)) {
        return InvalidInput(what + " is, or holds, " + h + ", which no job may reach (the server's data folder, the "
                            "agents' folders, the agent's HOME): name a folder of the job's own");
      }
    }
    return Status::Ok();
  }

  Status MakeSandbox(const std::string& jobdir, const std::vector<std::string>& writable, const std::vector<std::string>& in_place,
                     LaunchOptions* lo, std::map<std::string, std::string>* vars) {
    const JobSpec& spec = a_.spec;
    spec_memory_mb_ = spec.memory_mb;
    JobSandboxSpec js;
    js.agent_dir = o_.work_dir;
    js.name = o_.instance_id + "-" + job_ + "-" + std::to_string(attempt_);
    // Its real path: the sandbox opens the folders it binds without following links (launch/nofollow.h),
    // and the agent's own work root may be named through one.
    std::error_code ec;
    js.job_dir = std::filesystem::canonical(jobdir, ec).string();
    if (ec) return IoError("the job's folder " + jobdir + ": " + ec.message());
    js.memory_bytes = spec.memory_mb << 20;
    js.cpus = spec.cpus;
    js.uid_key = UidKey();
    js.sandboxed = Sandboxed();
    js.image = spec.image;
    if (!spec.image.empty() && !js.sandboxed) {
      return InvalidInput("image: " + spec.image + " runs as the job's sandbox uid, and this agent was started with "
                          "--no-sandbox: run it on an agent with its sandbox, or without image:");
    }
    if (!js.sandboxed && spec.memory_mb == 0 && spec.cpus == 0) {
      sandbox_desc_ = UnsandboxedWhy();
      Log("sandbox: " + sandbox_desc_);
      return Status::Ok();
    }
    if (js.sandboxed && !o_.sandbox_unavailable.empty()) {
      return InvalidInput("this agent cannot run the job in its sandbox: " + o_.sandbox_unavailable);
    }
    js.writable = writable;
    js.hide = SandboxHiddenPaths(o_);
    for (std::string p : in_place) {
      if (p.rfind("file://", 0) == 0) p = p.substr(7);
      if (p.empty() || p[0] != '/' || IsUnder(p, jobdir) || !Env::Default().Exists(p)) continue;
      // Bound read-only at its real place (a link in the named path resolves to it inside): never
      // inside what no job may reach.
      std::error_code ec;
      const std::string real = std::filesystem::canonical(p, ec).string();
      if (ec) return IoError("channel " + p + ": " + ec.message());
      ANNEAL_RETURN_IF_ERROR(OutsideHidden(real, "channels: " + p));
      js.readable.push_back(real);
    }
    js.devices = GpuDeviceNodes();
    ANNEAL_ASSIGN_OR_RETURN(sandbox_, JobSandbox::Make(js));
    lo->wrap = sandbox_->Wrap(SelfExecutable());
    exec_wrap_ = sandbox_->ExecWrap(SelfExecutable());
    lo->sandbox_plan = sandbox_->plan_file();
    if (sandbox_->sandboxed()) {
      lo->owner_uid = static_cast<int>(sandbox_->uid());
      const std::string uid = std::to_string(sandbox_->uid());
      (*vars)["HOME"] = JoinPath(jobdir, "home");
      (*vars)["TMPDIR"] = JoinPath(jobdir, "tmp");
      (*vars)["USER"] = (*vars)["LOGNAME"] = "anneal-" + uid;
      sandbox_desc_ = "uid " + uid + (spec.image.empty() ? "" : ", image " + spec.image);
    } else {
      sandbox_desc_ = UnsandboxedWhy();
    }
    if (spec.memory_mb > 0) sandbox_desc_ += ", memory " + std::to_string(spec.memory_mb) + " MiB";
    if (spec.cpus > 0) sandbox_desc_ += ", cpus " + FormatNumber(spec.cpus);
    Log("sandbox: " + sandbox_desc_);
    return Status::Ok();
  }

  std::string UnsandboxedWhy() const {
    return o_.no_sandbox ? "off: the agent was started with --no-sandbox" : "off: the job's sandbox: false (an admin's)";
  }

  // Every process of the job still alive once the launcher returned (a double-forked daemon, an exec
  // session) is ended through the job's cgroup.
  void EndLeftovers() {
    if (!sandbox_ || !sandbox_->cgroup()) return;
    const int n = sandbox_->cgroup()->KillAll();
    if (n > 0) Log("ended " + std::to_string(n) + " process(es) the job left running (found through its cgroup)");
  }

  // Wakes once a second at most (a woken thread on a busy machine costs the ranks' OpenMP teams a
  // barrier: bench/job_latency measures it), and at once when training ends.
  void MetricsLoop(const std::atomic<bool>* stop) {
    SystemSampler sys(o_.work_dir);
    ProgressReader progress(progress_dir_);
    TrainerMetricsReader trainer(progress_dir_, defined_names_);  // a regex of the same name wins
    double next = o_.clock->Monotonic();
    const auto nap = std::chrono::duration<double>(std::min(1.0, o_.metrics_interval_s));
    while (!stop->load()) {
      if (o_.clock->Monotonic() >= next) {
        next += o_.metrics_interval_s;
        for (const auto& [name, v] : sys.Sample()) Metric(name, -1, v);
        ShipS3();
        if (ckpt_sync_) {
          auto n = ckpt_sync_->Upload();
          if (!n.ok()) Log("checkpoint upload: " + n.status().ToString() + " (will retry)");
        }
      }
      const auto steps = progress.Poll();
      if (!steps.empty()) {
        last_activity_.store(o_.clock->Monotonic());
        active_seen_.store(true);
      }
      for (const RankStepTime& t : steps) Metric("step_time_s", t.rank, t.seconds, t.step);
      for (const StepPoint& p : trainer.Poll()) Metric(p.name, p.rank, p.value, p.step);
      CheckHang();
      Watch([&](StoppingRuleWatch& w) { return w.OnTick(o_.clock->Monotonic()); });
      std::unique_lock<std::mutex> l(metrics_mu_);
      metrics_cv_.wait_for(l, nap, [stop] { return stop->load(); });
    }
    for (const RankStepTime& t : progress.Poll()) shipper_->AddMetric("step_time_s", t.rank, t.seconds, t.step);
    for (const StepPoint& p : trainer.Poll()) shipper_->AddMetric(p.name, p.rank, p.value, p.step);
  }

  // This job's S3 requests from this agent so far (channels, checkpoint sync, output), as the node's
  // s3_* metrics, when they changed (storage/s3_stats.h).
  void ShipS3() {
    const S3Snapshot d = S3CounterDelta(s3_start_, S3CounterSnapshot());
    if (d.empty() || d[0].second == s3_shipped_requests_) return;
    s3_shipped_requests_ = d[0].second;
    for (const auto& [name, v] : d) shipper_->AddMetric(name, -1, v);
  }

  // A metric point (of a training step, or -1): shipped, and watched by the stopping rules.
  void Metric(const std::string& name, int rank, double v, int64_t step = -1) {
    shipper_->AddMetric(name, rank, v, step);
    Watch([&](StoppingRuleWatch& w) { return w.OnMetric(name, rank, v, o_.clock->Monotonic()); });
  }

  // Runs f on the stopping rules (the launcher's output thread and the metrics loop both call in);
  // the first violation stops the ranks as a stop request does (SIGTERM, so they can checkpoint).
  template <typename F>
  void Watch(F f) {
    if (!rules_) return;  // set in Prepare, before the ranks start: no rules, nothing to watch
    std::optional<StoppingRuleWatch::Violation> v;
    {
      std::lock_guard<std::mutex> l(rules_mu_);
      if (rule_fired_.load()) return;
      v = f(*rules_);
      if (!v) return;
      rule_message_ = v->why;
      rule_retry_ = v->rule.action == "retry";
      rule_fired_.store(true);
    }
    Log(v->why + "; stopping the ranks");
    stop_.store(true);
  }

  // No rank printed a line or advanced a step for the allowance: kill the ranks (no grace: a hung
  // collective cannot save anything) and report an infrastructure failure.
  void CheckHang() {
    const double limit = active_seen_.load() ? hang_timeout_s_ : hang_startup_s_;
    if (limit <= 0 || hung_.load()) return;
    const double quiet = o_.clock->Monotonic() - last_activity_.load();
    if (quiet < limit) return;
    hang_message_ = "hung: no rank printed a line or advanced a step for " + std::to_string(static_cast<int>(quiet)) +
                    " s (stopping." + (active_seen_.load() ? "hang_timeout_s " : "hang_startup_s ") +
                    std::to_string(static_cast<int>(limit)) + ")";
    Log(hang_message_ + "; killing the ranks");
    hung_.store(true);
    kill_.store(true);
  }

  void Upload() {
    if (ckpt_sync_) {
      auto n = ckpt_sync_->Upload();
      if (!n.ok()) {
        Log("final checkpoint upload failed: " + n.status().ToString());
      } else if (*n) {
        Log("uploaded " + std::to_string(*n) + " checkpoint file(s)");
      }
    }
    if (output_uri_.empty()) return;
    for (const auto& [dir, sub] : {std::pair{output_dir_, "output"}, std::pair{model_dir_, "model"}}) {
      auto s = DirSync::Open(dir, output_uri_ + "/" + job_ + "/" + sub, storage_);
      if (!s.ok()) {
        Log("output upload: " + s.status().ToString());
        continue;
      }
      auto n = (*s)->Upload();
      if (!n.ok()) Log("output upload: " + n.status().ToString());
    }
  }

  const AgentOptions& o_;
  std::string address_;
  Assignment a_;
  std::function<void()> on_done_;
  std::string job_;
  int attempt_ = 0, node_ = 0, nnodes_ = 1;
  std::atomic<bool> stop_{false}, done_{false}, kill_{false}, hung_{false}, active_seen_{false}, orphaned_{false};
  std::atomic<double> last_activity_{0};
  double hang_timeout_s_ = 0, hang_startup_s_ = 0;
  std::string hang_message_;
  S3Snapshot s3_start_;  // the process's S3 counters when this job began here
  double s3_shipped_requests_ = 0;
  std::mutex place_mu_;
  std::optional<ExecPlace> place_;
  std::mutex rules_mu_;  // the watch's calls, rule_message_, rule_retry_ (rules_ itself is set once, in Prepare)
  std::unique_ptr<StoppingRuleWatch> rules_;
  std::atomic<bool> rule_fired_{false};
  std::string rule_message_;
  bool rule_retry_ = false;
  std::mutex metrics_mu_;
  std::condition_variable metrics_cv_;
  std::unique_ptr<Shipper> shipper_;
  double unreachable_since_ = -1;  // when a call to the server first failed (Report), -1 once one succeeds
  std::unique_ptr<MetricExtractor> extractor_;
  std::set<std::string> defined_names_;  // the spec's metric_definitions' names
  std::vector<std::string> secret_values_;  // masked in every line shipped (Mask)
  StorageVars storage_;  // the execution role's credentials, for this job's storage calls
  std::unique_ptr<DirSync> ckpt_sync_;
  std::string output_dir_, model_dir_, progress_dir_, output_uri_;
  std::unique_ptr<JobSandbox> sandbox_;  // from Prepare until the job's processes are all gone
  std::string sandbox_desc_;             // what the node reports say: "uid N, memory M MiB", "off: why"
  std::vector<std::string> exec_wrap_;   // before an `anneal exec` command: into the sandbox or container
  int64_t spec_memory_mb_ = 0;
  std::thread thread_;
};

// A pre-start health check of one (job, attempt, round) on this instance, on its own thread
// (docs/health-checks.md): the local checks (agent/health_check.h), then the collective across the
// job's instances, then the result POSTed to /v1/jobs/<job>/health, retried with backoff while the
// server is unreachable (a 4xx answer ends the retries: the server no longer wants it). Stop()
// abandons the check: a running command and the collective's rank are killed and nothing is posted.
// While it runs, the heartbeat carries Key() so the server does not ask again.
class HealthRunner {
 public:
  // request: the heartbeat's "health" object. on_done is called from the runner's thread at its end.
  HealthRunner(const AgentOptions& o, std::string address, const json& request, std::function<void()> on_done)
      : o_(o),
        instance_id_(o.instance_id),
        address_(std::move(address)),
        on_done_(std::move(on_done)),
        job_(Text(request, "job")),
        attempt_(static_cast<int>(Number(request, "attempt", 0))),
        round_(static_cast<int>(Number(request, "round", 0))),
        node_(static_cast<int>(Number(request, "node", 0))),
        nnodes_(static_cast<int>(Number(request, "nnodes", 1))) {
    const json checks = request.contains("checks") && request["checks"].is_object() ? request["checks"] : json::object();
    min_free_memory_gb_ = Number(checks, "min_free_memory_gb", 0);
    min_free_disk_gb_ = Number(checks, "min_free_disk_gb", 0);
    collective_mb_ = Number(checks, "collective_mb", 0);
    collective_timeout_s_ = Number(checks, "collective_timeout_s", 120);
    if (collective_timeout_s_ <= 0) collective_timeout_s_ = 120;
    command_ = Text(checks, "command");
    thread_ = std::thread([this] { Run(); });
  }
  // Fields of the server's request, read without throwing (absent, null or mistyped: the default).
  static double Number(const json& j, const char* key, double dflt) {
    return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : dflt;
  }
  static std::string Text(const json& j, const char* key) {
    return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
  }
  ~HealthRunner() {
    Stop();
    if (thread_.joinable()) thread_.join();
  }
  void Stop() {
    stop_.store(true);
    kill_.store(true);
  }
  bool done() const { return done_.load(); }
  // {"job", "attempt", "round"}: what the heartbeat reports while this runs.
  json Key() const { return {{"job", job_}, {"attempt", attempt_}, {"round", round_}}; }
  bool Is(const json& request) const {
    return Text(request, "job") == job_ && Number(request, "attempt", -1) == attempt_ &&
           Number(request, "round", -1) == round_;
  }

 private:
  std::string Who() const {
    std::string w = job_;
    w += " attempt ";
    w += std::to_string(attempt_);
    w += " round ";
    w += std::to_string(round_);
    w += " node ";
    w += std::to_string(node_);
    return w;
  }

  void Run() {
    const double t0 = o_.clock->Monotonic();
    Say(Who() + ": running the pre-start health checks");
    HealthCheckOptions ho;
    ho.slots = o_.slots;
    ho.min_free_memory_gb = min_free_memory_gb_;
    ho.min_free_disk_gb = min_free_disk_gb_;
    ho.work_dir = o_.work_dir;
    ho.command = command_;
    ho.command_env = {{"ANNEAL_INSTANCE_ID", instance_id_},
                      {"ANNEAL_JOB", job_},
                      {"ANNEAL_ATTEMPT", std::to_string(attempt_)},
                      {"ANNEAL_NODE", std::to_string(node_)}};
    ho.stop = &stop_;
    json checks = RunLocalHealthChecks(ho);
    // A node whose local checks failed still joins: its peers would otherwise wait for it until their
    // timeout, and the server learns of this node's failure from this node's own result.
    checks.push_back(Collective());
    if (stop_.load()) {
      Say(Who() + ": health checks abandoned (the job was stopped)");
    } else {
      const bool ok = AllChecksOk(checks);
      const json result = {{"ok", ok}, {"checks", checks}, {"seconds", o_.clock->Monotonic() - t0}};
      Say(Who() + (ok ? ": health checks passed" : ": health checks FAILED: " + DescribeFailedChecks(checks)));
      Post({{"instance", instance_id_},
            {"attempt", attempt_},
            {"round", round_},
            {"node", node_},
            {"ok", ok},
            {"result", result}});
    }
    done_.store(true);
    if (on_done_) on_done_();
  }

  // An allreduce across the job's instances: they meet through the server as a job attempt does
  // (MeetThroughServer), then each runs one rank of `anneal healthcheck` under the launcher. The whole
  // of it, meeting included, is bounded by collective_timeout_s.
  json Collective() {
    const double mb = collective_mb_;
    const double limit = collective_timeout_s_;
    auto check = [](bool ok, const std::string& detail) {
      return json{{"name", "collective"}, {"ok", ok}, {"detail", detail}};
    };
    auto skipped = [&](const std::string& why) {
      json c = check(true, "skipped: " + why);
      c["skipped"] = why;
      c["seconds"] = 0.0;
      return c;
    };
    if (nnodes_ <= 1) return skipped("one instance: no network between instances to check");
    if (mb <= 0) return skipped("collective_mb is 0");
    const double t0 = o_.clock->Monotonic(), deadline = t0 + limit;
    const std::string limit_s = std::to_string(static_cast<long long>(limit));
    const std::string timed_out_msg = "collective timed out after " + limit_s +
                                      " s: a peer instance or the network between them is unhealthy";
    std::mutex mu;
    std::vector<std::string> tail;  // the launcher's and the rank's last lines, for a failure's detail
    json line;                      // the rank's {"healthcheck": "collective", ...}
    auto keep = [&](const std::string& l) {
      std::lock_guard<std::mutex> g(mu);
      tail.push_back(l);
      if (tail.size() > 8) tail.erase(tail.begin());
    };
    auto last_lines = [&] {
      std::lock_guard<std::mutex> g(mu);
      std::string s;
      for (const std::string& l : tail) {
        s += s.empty() ? "" : " | ";
        s += l;
      }
      return s.empty() ? s : "; last lines: " + s;
    };
    auto finish = [&](json c) {
      c["seconds"] = o_.clock->Monotonic() - t0;
      c["timeout_s"] = limit;
      return c;
    };

    auto m = MeetThroughServer(o_.server_url, job_, 1000000LL + attempt_ * 1000LL + round_, node_, address_, limit, stop_,
                               *o_.clock);
    if (stop_.load()) return finish(check(false, "abandoned: the job was stopped"));
    if (!m.ok()) {
      if (m.status().code() == Code::kPeer && o_.clock->Monotonic() >= deadline) {
        return finish(check(false, timed_out_msg + " (" + m.status().message() + ")"));
      }
      return finish(check(false, "the instances could not meet through the server: " + m.status().ToString()));
    }
    const double left = std::max(1.0, deadline - o_.clock->Monotonic());
    LaunchOptions lo;
    lo.nproc_per_node = 1;
    lo.nnodes = nnodes_;
    lo.node_rank = node_;
    lo.master_addr = m->master_addr;
    lo.master_port = m->master_port;
    lo.store_port = m->store_port;
    lo.store_bind = m->master_addr;
    lo.max_restarts = 0;
    lo.job = job_ + "-health";
    lo.grace_s = 1;
    lo.rendezvous_timeout_s = left;
    lo.stop = &stop_;
    lo.kill = &kill_;
    lo.first_attempt = attempt_;
    lo.allow_loopback_master = true;
    lo.workdir = o_.work_dir;
    lo.extra_env = {{"ANNEAL_INSTANCE_ID", instance_id_}};
    lo.command = {SelfExecutable(), "healthcheck", "--collective-mb", json(mb).dump(), "--timeout-s",
                  std::to_string(static_cast<long long>(std::ceil(left)))};
    lo.on_output = [&](int, bool, const std::string& l) {
      if (!l.empty() && l[0] == '{') {
        json j = json::parse(l, nullptr, false);
        if (!j.is_discarded() && j.value("healthcheck", std::string()) == "collective") {
          std::lock_guard<std::mutex> g(mu);
          line = j;
          return;
        }
      }
      keep(l);
    };
    // The watchdog: at the deadline the rank is killed (a hung peer cannot hold this instance).
    std::atomic<bool> timed_out{false}, finished{false};
    std::mutex wd_mu;
    std::condition_variable wd_cv;
    std::thread watchdog([&] {
      std::unique_lock<std::mutex> l(wd_mu);
      while (!finished.load()) {
        if (o_.clock->Monotonic() >= deadline) {
          timed_out.store(true);
          kill_.store(true);
          return;
        }
        wd_cv.wait_for(l, std::chrono::milliseconds(100));
      }
    });
    auto r = RunLauncher(lo, keep);
    {
      std::lock_guard<std::mutex> l(wd_mu);
      finished.store(true);
    }
    wd_cv.notify_all();
    watchdog.join();
    if (stop_.load()) return finish(check(false, "abandoned: the job was stopped"));
    if (timed_out.load()) return finish(check(false, timed_out_msg + last_lines()));
    if (!r.ok()) {
      if (o_.clock->Monotonic() >= deadline - 0.5) return finish(check(false, timed_out_msg + " (" + r.status().message() + ")"));
      return finish(check(false, "the collective could not start: " + r.status().ToString() + last_lines()));
    }
    json got;
    {
      std::lock_guard<std::mutex> g(mu);
      got = line;
    }
    if (r->exit_code != 0 || !got.is_object() || !got.value("ok", false)) {
      std::string why = r->summary;
      while (!why.empty() && why.back() == '\n') why.pop_back();
      if (why.empty()) why = "the rank printed no result line";
      return finish(check(false, "the collective failed (exit code " + std::to_string(r->exit_code) + "): " + why + last_lines()));
    }
    const double algbw = got.value("algbw_gbps", 0.0), busbw = got.value("busbw_gbps", 0.0);
    char buf[200];
    std::snprintf(buf, sizeof(buf), "allreduce of %g MiB across %d instances: algbw %.2f GB/s, busbw %.2f GB/s (%.4f s each)",
                  mb, got.value("world", nnodes_), algbw, busbw, got.value("seconds", 0.0));
    json c = check(true, buf);
    c["world"] = got.value("world", nnodes_);
    c["mb"] = mb;
    c["round_seconds"] = got.value("seconds", 0.0);
    c["algbw_gbps"] = algbw;
    c["busbw_gbps"] = busbw;
    return finish(c);
  }

  void Post(const json& body) {
    const std::string path = "/v1/jobs/" + job_ + "/health";
    const double deadline = o_.clock->Monotonic() + o_.orphan_timeout_s;
    double backoff = 0.1;
    while (o_.clock->Monotonic() < deadline && !stop_.load()) {
      auto c = ApiClient::Make(o_.server_url, 10);
      if (c.ok()) {
        auto r = (*c)->Post(path, body);
        if (r.ok()) return;
        if (r.status().code() != Code::kPeer) {
          Say(Who() + ": the server refused the health result: " + r.status().ToString());
          return;
        }
      }
      o_.clock->SleepFor(backoff);
      backoff = std::min(2.0, backoff * 2);
    }
    if (!stop_.load()) Say(Who() + ": could not post the health result: the server stayed unreachable");
  }

  const AgentOptions& o_;
  const std::string instance_id_;  // copied: the main thread may re-register meanwhile
  std::string address_;
  std::function<void()> on_done_;
  std::string job_;
  int attempt_ = 0, round_ = 0, node_ = 0, nnodes_ = 1;
  double min_free_memory_gb_ = 0, min_free_disk_gb_ = 0, collective_mb_ = 0, collective_timeout_s_ = 120;
  std::string command_;
  std::atomic<bool> stop_{false}, kill_{false}, done_{false};
  std::thread thread_;
};

// The heartbeat answer's new anneal exec sessions: each runs if this agent runs that job (prepared),
// else it is answered at once with exit 255.
void StartExecs(const AgentOptions& o, const json& sessions, JobRunner* runner,
                std::vector<std::unique_ptr<ExecRunner>>* execs) {
  for (const json& e : sessions) {
    const std::string job = e.value("job", std::string()), id = e.value("id", std::string());
    std::optional<ExecPlace> place = runner && runner->job() == job ? runner->Place() : std::nullopt;
    if (place) {
      Say("exec " + id + " into " + job);
      execs->push_back(std::make_unique<ExecRunner>(o.server_url, e, std::move(*place)));
      continue;
    }
    auto c = ApiClient::Make(o.server_url, 10);
    if (c.ok()) {
      (void)(*c)->Post("/v1/exec/" + id + "/agent-output",
                       {{"exit_code", 255}, {"message", "this instance is not running " + job + "'s ranks now"}});
    }
  }
}

// The join token or the instance's one-time secret (AgentOptions::join_token_file), read once.
Result<std::string> ReadJoinSecret(const AgentOptions& o) {
  if (o.join_token_fd >= 0) {
    std::string text;
    char buf[256];
    ssize_t n;
    while ((n = ::read(o.join_token_fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
      if (n > 0) text.append(buf, static_cast<size_t>(n));
    }
    ::close(o.join_token_fd);
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    if (n < 0) return IoError("cannot read the join secret from fd " + std::to_string(o.join_token_fd));
    return text;
  }
  if (!o.join_token_file.empty()) {
    ANNEAL_ASSIGN_OR_RETURN(std::string secret, ReadSecretFile(o.join_token_file));
    if (o.remove_join_token_file) ::unlink(o.join_token_file.c_str());
    return secret;
  }
  const char* e = std::getenv("ANNEAL_JOIN_TOKEN");
  return std::string(e ? e : "");
}

}  // namespace

Status RunAgent(const AgentOptions& in) {
  AgentOptions o = in;
  if (o.work_dir.empty()) return InvalidInput("anneal agent needs --work-dir DIR (where jobs are unpacked and run)");
  if (o.slots < 1) return InvalidInput("--slots must be at least 1");
  ANNEAL_RETURN_IF_ERROR(Env::Default().CreateDirs(o.work_dir));
  {
    std::error_code ec;
    const auto abs = std::filesystem::canonical(o.work_dir, ec);
    if (!ec) o.work_dir = abs.string();  // the sandbox binds and hides by absolute path
  }
  if (o.no_sandbox) {
    Say("--no-sandbox: jobs' ranks run as this agent's uid " + std::to_string(::geteuid()) +
        ", without their own uid, mounts or cgroup isolation (docs/security.md)");
  } else if (!(o.sandbox_unavailable = SandboxUnavailableReason()).empty()) {
    Say("jobs cannot be sandboxed here, so they will be refused: " + o.sandbox_unavailable);
  }
  std::string address = o.address;
  if (address.empty()) {
    std::string host = o.server_url.substr(o.server_url.find("://") + 3);
    host = host.substr(0, host.find_first_of(":/"));
    auto a = LocalAddressToward(host);
    address = a.ok() ? *a : "127.0.0.1";
  }
  struct sigaction sa {};
  sa.sa_handler = OnAgentSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  ANNEAL_ASSIGN_OR_RETURN(std::string join, ReadJoinSecret(o));
  // Tokens stay in this process: the ranks inherit its environment.
  for (const char* v : {"ANNEAL_JOIN_TOKEN", "ANNEAL_TOKEN", "ANNEAL_TOKEN_FILE"}) ::unsetenv(v);
  if (join.empty()) {
    return InvalidInput("anneal agent needs the server's join token: --join-token-file FILE or $ANNEAL_JOIN_TOKEN "
                        "(the server wrote it to <its data dir>/join.token)");
  }
  ApiClient::SetProcessToken("");
  ANNEAL_ASSIGN_OR_RETURN(auto client, ApiClient::Make(o.server_url, 10));
  std::string id = o.instance_id;
  auto register_once = [&]() -> Status {
    json body = {{"address", address}, {"slots", o.slots}, {"instance_type", o.instance_type}};
    if (!id.empty()) body["id"] = id;
    client->set_token(join);
    auto r = client->Post("/v1/agents", body);
    if (!r.ok() && r.status().code() == Code::kInvalidInput) {
      return Status(Code::kCancelled, "the server refused to register this agent: " + r.status().message() +
                                          "; give the server's join token (--join-token-file)");
    }
    ANNEAL_RETURN_IF_ERROR(r.status());
    id = (*r)["id"].get<std::string>();
    o.instance_id = id;
    // The instance's own token, for every later call of this process (the job runners' too).
    const std::string token = r->value("token", std::string());
    ApiClient::SetProcessToken(token);
    client->set_token(token);
    return Status::Ok();
  };
  std::mutex wake_mu;
  std::condition_variable wake;
  std::unique_ptr<JobRunner> runner;
  std::unique_ptr<HealthRunner> health;  // a pre-start health check in progress
  std::vector<std::unique_ptr<ExecRunner>> execs;  // anneal exec sessions into the job
  // Ends the exec sessions that are done, or every one when the job is gone (killing its commands).
  auto reap_execs = [&] {
    for (auto it = execs.begin(); it != execs.end();) {
      it = (*it)->done() || !runner || runner->job() != (*it)->job() ? execs.erase(it) : std::next(it);
    }
  };
  bool registered = false, orphan_stop = false;
  double unreachable_since = -1;
  double next_s = o.heartbeat_s;  // the server may ask for the next heartbeat sooner
  Status result;
  for (;;) {
    if (g_agent_signal.load()) {
      Say("stopping on signal " + std::to_string(g_agent_signal.load()));
      break;
    }
    if (runner && runner->done()) runner.reset(), orphan_stop = false;
    if (health && health->done()) health.reset();
    reap_execs();
    next_s = o.heartbeat_s;
    Status st;
    HeartbeatReply action;
    if (!registered) {
      st = register_once();
      if (st.code() == Code::kCancelled) {
        result = InvalidInput(st.message());
        break;
      }
      if (st.ok()) {
        registered = true;
        Say("registered as " + id + " (" + address + ", " + std::to_string(o.slots) + " slot(s), type " + o.instance_type +
            ") with " + o.server_url);
      }
    }
    if (registered) {
      HeartbeatMsg hb;
      if (runner) hb.job = runner->job(), hb.attempt = runner->attempt();
      if (health) hb.health = health->Key();  // so the server does not ask again meanwhile
      auto r = client->Post("/v1/agents/" + id + "/heartbeat", ToJson(hb));
      auto reply = r.ok() ? HeartbeatReplyFromJson(*r) : Result<HeartbeatReply>(r.status());
      if (reply.ok()) {
        action = std::move(*reply);
      } else if (r.ok()) {  // an answer this agent cannot use
        Say("the server's heartbeat answer is unusable: " + reply.status().message());
        RefuseAssignment(*client, *r, reply.status());
      } else {
        st = r.status();
        // A server that lost us (404), or dropped our token with the instance (401): join again.
        if (st.code() == Code::kNotFound || st.message().find("HTTP 401") != std::string::npos) {
          registered = false;
          st = NotFound(st.message());
        }
      }
    }
    if (st.ok()) {
      unreachable_since = -1;
      StartExecs(o, action.execs, runner.get(), &execs);
      const std::string& a = action.action;
      if (action.next_s >= 0) next_s = std::min(o.heartbeat_s, action.next_s);
      if (a == "run" && !runner) {
        if (health) health->Stop();  // the server has decided without it
        Say("assigned " + action.assignment.job + " (node " + std::to_string(action.assignment.node) + ")");
        runner = std::make_unique<JobRunner>(o, address, std::move(action.assignment), [&] {
          std::lock_guard<std::mutex> l(wake_mu);
          wake.notify_all();
        });
      } else if (a == "health") {
        const json& h = action.health;
        if (health && !health->Is(h)) {
          health->Stop();  // a different round: abandon this one; the server asks again once it ended
        } else if (!health && !runner && h.is_object() && h.contains("job") && h["job"].is_string()) {
          health = std::make_unique<HealthRunner>(o, address, h, [&] {
            std::lock_guard<std::mutex> l(wake_mu);
            wake.notify_all();
          });
        }
      } else if (a == "stop") {
        if (runner) runner->Stop();
        if (health) health->Stop();  // kills a running command or collective
      } else if (a == "exit") {
        Say("released by the server");
        break;
      }
    } else if (st.code() != Code::kNotFound) {
      if (unreachable_since < 0) {
        unreachable_since = o.clock->Monotonic();
        Say("the server is unreachable (" + st.message() + "); retrying");
      }
      if (runner && !orphan_stop && o.clock->Monotonic() - unreachable_since > o.orphan_timeout_s) {
        Say("the server at " + o.server_url + " was unreachable for " + std::to_string(static_cast<int>(o.orphan_timeout_s)) +
            " s (--orphan-timeout-s): stopping the ranks of " + runner->job() + " (they save a checkpoint) instead of "
            "training on unwatched");
        runner->Orphan();
        orphan_stop = true;
      }
      if (!runner && o.clock->Monotonic() - unreachable_since > o.orphan_timeout_s) {
        result = PeerError("the server at " + o.server_url + " was unreachable for " +
                           std::to_string(static_cast<int>(o.orphan_timeout_s)) + " s; exiting");
        break;
      }
    }
    // Until the next heartbeat: woken at once when the job ends; a signal is seen within 250 ms.
    const double until = o.clock->Monotonic() + next_s;
    std::unique_lock<std::mutex> l(wake_mu);
    while (o.clock->Monotonic() < until && !g_agent_signal.load() && !(runner && runner->done()) &&
           !(health && health->done())) {
      o.clock->WaitFor(wake, l, std::min(0.25, std::max(0.0, until - o.clock->Monotonic())));
    }
  }
  health.reset();  // abandons a health check (kills its command and collective) and waits for it
  execs.clear();   // kills the exec sessions' commands
  runner.reset();  // stops and waits: ranks get SIGTERM and the grace period, uploads and reports run
  if (o.remove_work_dir) {
    std::error_code ec;
    std::filesystem::remove_all(o.work_dir, ec);
  }
  return result;
}

}  // namespace anneal
