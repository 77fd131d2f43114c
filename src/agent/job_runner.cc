#include "agent/job_runner.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "agent/agent_signal.h"
#include "agent/attempt_end.h"
#include "agent/dir_sync.h"
#include "agent/job_sandbox.h"
#include "agent/meeting.h"
#include "agent/node_metrics.h"
#include "agent/node_plan.h"
#include "agent/package_unpack.h"
#include "agent/shipper.h"
#include "comm/rank_contract.h"
#include "agent/stopping_rules.h"
#include "protocol/api_client.h"
#include "protocol/exit_cause.h"
#include "core/env.h"
#include "core/progress.h"
#include "data/channel.h"
#include "launch/launcher.h"
#include "storage/s3_stats.h"

namespace anneal {

namespace {

using nlohmann::json;

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

}  // namespace

class JobRunner::Impl {
 public:
  // on_done is called from the runner's thread once the job's end is reported.
  Impl(const AgentOptions& o, std::string address, Assignment assignment, std::function<void()> on_done)
      : o_(o), address_(std::move(address)), a_(std::move(assignment)), on_done_(std::move(on_done)) {
    job_ = a_.job;
    attempt_ = a_.attempt;
    node_ = a_.node;
    nnodes_ = static_cast<int>(a_.addresses.size());
    thread_ = std::thread([this] { Run(); });
  }
  ~Impl() {
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
    AgentSay(job_ + " node " + std::to_string(node_) + ": " + m);
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
  void Report(NodeState state, int exit_code = -1, const std::string& message = "", int failed_rank = -1,
              ExitCause cause = ExitCause::kNone, bool local = false) {
    NodeReport r;
    r.attempt = attempt_;
    r.node = node_;
    r.state = state;
    r.exit_code = exit_code;
    r.message = Mask(message);
    r.sandbox = sandbox_desc_;
    r.failed_rank = failed_rank;  // these three: finished only (protocol/wire.h)
    r.cause = ExitCauseName(cause);
    r.local = local;  // false: this node stopped because another one failed
    const json body = ToJson(r);  // (its "at" is the server's to stamp)
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
    AgentSay(std::string("could not report '") + NodeStateName(state) + "' for " + job_ + ": the server stayed unreachable");
  }

  // How much longer calls to the server may keep retrying. One budget for all of this job's calls,
  // counted from the first that failed: the orphan timeout, or 10 s once the agent or its job was told
  // to stop (SIGTERM, a stop request, the orphan timeout itself). Each report used to retry for the whole orphan timeout on its own, so an agent whose
  // server was gone, signalled or not, took one timeout per report and flush to exit.
  double ServerBudgetLeft() const {
    if (unreachable_since_ < 0) return o_.orphan_timeout_s;
    const double budget = AgentSignal() || orphaned_.load() || stop_.load() ? std::min(10.0, o_.orphan_timeout_s)
                                                                                   : o_.orphan_timeout_s;
    return budget - (o_.clock->Monotonic() - unreachable_since_);
  }

  void Run() {
    shipper_ = std::make_unique<Shipper>(o_.server_url, job_, attempt_, node_, SpoolPath(o_.work_dir, job_, attempt_, node_));
    s3_start_ = S3CounterSnapshot();
    Report(NodeState::kDownloading);
    LaunchOptions lo;
    AttemptEnd end;
    const Status st = Prepare(&lo);
    if (!st.ok()) {
      Log("preparing the job failed: " + st.ToString());
      end = EndOfError(st, /*preparing=*/true);
    } else if (stop_.load()) {
      end = EndBeforeStart(AgentSignal() != 0, SignalCause);
    } else {
      end = RunRanks(lo);
      EndLeftovers();
      Report(NodeState::kUploading);
      Upload();
    }
    sandbox_.reset();
    while (!end.summary.empty() && end.summary.back() == '\n') end.summary.pop_back();
    ShipS3();
    if (shipper_->Flush(std::max(1.0, ServerBudgetLeft()))) {
      shipper_->RemoveSpool();
    } else {
      AgentSay("log lines for " + job_ + " could not all be delivered (they stay in " + SpoolPath(o_.work_dir, job_, attempt_, node_) +
               " for the local backend to deliver)");
    }
    Report(NodeState::kFinished, end.exit_code, end.summary, end.failed_rank, end.cause, end.local);
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

  // The ranks, run by the launcher while the metrics loop samples them; their end, as data.
  AttemptEnd RunRanks(const LaunchOptions& lo) {
    Report(NodeState::kTraining);
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
      Log("the launcher failed: " + r.status().ToString());
      return EndOfError(r.status(), /*preparing=*/false);
    }
    AttemptFacts f;
    f.rule_fired = rule_fired_.load();
    f.rule_retry = rule_retry_;
    f.rule_message = rule_message_;
    f.signalled = AgentSignal() != 0;
    f.hung = hung_.load();
    f.hang_message = hang_message_;
    f.stopped = stop_.load();
    const long long oom_after = oom_kills();
    f.oom_counted = oom_before >= 0 && oom_after > oom_before;
    f.memory_mb = spec_memory_mb_;
    return EndOfLaunch(*r, f, SignalCause);
  }

  // The plan (agent/node_plan.h), then its steps: the source, the channels, the folders, the
  // meeting, resourceconfig.json, the sandbox, the launch. Returns Ok with stop_ set when stopped.
  Status Prepare(LaunchOptions* lo) {
    ANNEAL_ASSIGN_OR_RETURN(NodePlan plan, PlanNode(a_, Facts()));
    secret_values_ = plan.secret_values;
    storage_ = plan.storage;
    std::map<std::string, std::string> vars = plan.env;
    std::vector<std::string> in_place = plan.in_place;  // channels' local paths (the sandbox binds those outside jobdir)
    ANNEAL_RETURN_IF_ERROR(FetchSource(plan));
    for (const ChannelFetch& c : plan.channels) {
      if (stop_.load()) return Status::Ok();
      ChannelOptions co;
      co.mode = c.mode;
      co.local_dir = c.local_dir;
      co.quiet = true;
      co.storage = storage_;
      ANNEAL_ASSIGN_OR_RETURN(std::string path, PrepareDataChannel(c.uri, co));
      vars[c.var] = path;
      in_place.push_back(path);
      Log("channel " + c.name + " (" + c.mode + ") ready at " + path);
    }
    ANNEAL_RETURN_IF_ERROR(PrepareFolders(plan));
    *lo = plan.launch;
    lo->stop = &stop_;
    lo->kill = &kill_;
    ANNEAL_ASSIGN_OR_RETURN(const bool met, Meet(plan, lo));
    if (!met) return Status::Ok();  // stopped while meeting: Run() reports the stop
    ANNEAL_RETURN_IF_ERROR(Env::Default().WriteFileAtomic(plan.resource_config_path, plan.resource_config.dump(2) + "\n"));
    hang_timeout_s_ = a_.spec.hang_timeout_s;
    hang_startup_s_ = a_.spec.hang_startup_s;
    std::vector<std::string> writable;
    for (const WritableFolder& w : plan.writable) writable.push_back(w.path);
    ANNEAL_RETURN_IF_ERROR(MakeSandbox(plan.jobdir, writable, in_place, lo, &vars));
    lo->workdir = plan.code_dir;
    lo->extra_env = vars;
    SetExecPlace(plan.code_dir, vars, *lo);
    for (const std::string& arg : a_.spec.RankArgv()) lo->command.push_back(ExpandVars(arg, vars));
    NoteHostTmpPaths(lo->command);
    WatchOutput(lo);
    Log("starting " + std::to_string(a_.spec.procs_per_instance) + " rank(s) as node " + std::to_string(node_) + " of " +
        std::to_string(nnodes_) + ": " + lo->command[0]);
    return Status::Ok();
  }

  NodeFacts Facts() const {
    NodeFacts f;
    f.work_dir = o_.work_dir;
    f.instance_id = o_.instance_id;
    f.address = address_;
    f.self = SelfExecutable();
    const char* path = std::getenv("PATH");
    f.path = path ? path : "";
    const char* slurm_job = std::getenv("SLURM_JOB_ID");
    const char* slurm_node = std::getenv("SLURMD_NODENAME");
    f.slurm_job = slurm_job ? slurm_job : "";
    f.slurm_node = slurm_node ? slurm_node : "";
    return f;
  }

  // A fresh code folder, the source package unpacked into it. A damaged download is infrastructure
  // (retried); a package that is not a .tar.gz or unpacks past the limits is the user's (InvalidInput:
  // a user error, never retried).
  Status FetchSource(const NodePlan& plan) {
    std::error_code ec;
    std::filesystem::remove_all(plan.code_dir, ec);
    ANNEAL_RETURN_IF_ERROR(Env::Default().CreateDirs(plan.code_dir));
    if (plan.source_sha.empty()) return Status::Ok();
    ANNEAL_ASSIGN_OR_RETURN(auto c, ApiClient::Make(o_.server_url, 300));
    ANNEAL_ASSIGN_OR_RETURN(std::string pkg, c->GetRaw("/v1/packages/" + plan.source_sha));
    ANNEAL_RETURN_IF_ERROR(UnpackPackage(pkg, plan.source_sha, plan.package_path, plan.code_dir,
                                         {o_.max_unpacked_bytes, o_.max_unpacked_files})
                               .Annotate("the job's source " + a_.spec.source));
    Log("unpacked the source package (" + std::to_string(pkg.size()) + " bytes) into " + plan.code_dir);
    return Status::Ok();
  }

  // The checkpoint folder (restored from its sync URI), the folders outside the job's it writes
  // (checked and given to the job's uid when sandboxed), output, model and progress.
  Status PrepareFolders(const NodePlan& plan) {
    Env& env = Env::Default();
    for (const WritableFolder& w : plan.writable) {
      if (Sandboxed()) {
        ANNEAL_RETURN_IF_ERROR(OutsideHidden(w.path, w.field + ": " + w.path));
        ANNEAL_RETURN_IF_ERROR(PrepareGivable(w.path, w.field, UidKey()));
      }
    }
    // (A given folder is made by PrepareGivable, not again through its path as root.)
    if (!Sandboxed() || plan.ckpt_in_job) ANNEAL_RETURN_IF_ERROR(env.CreateDirs(plan.ckpt_local));
    if (!Sandboxed()) {
      for (const WritableFolder& w : plan.writable) ANNEAL_RETURN_IF_ERROR(env.CreateDirs(w.path));
    }
    if (!plan.ckpt_sync_uri.empty()) {
      ANNEAL_ASSIGN_OR_RETURN(ckpt_sync_, DirSync::Open(plan.ckpt_local, plan.ckpt_sync_uri, storage_));
      ANNEAL_ASSIGN_OR_RETURN(int restored, ckpt_sync_->Restore());
      if (restored) Log("restored " + std::to_string(restored) + " checkpoint file(s) from " + plan.ckpt_sync_uri);
    }
    output_dir_ = plan.output_dir;
    model_dir_ = plan.model_dir;
    progress_dir_ = plan.progress_dir;
    output_uri_ = plan.output_uri;
    for (const auto& d : {output_dir_, model_dir_, progress_dir_}) ANNEAL_RETURN_IF_ERROR(env.CreateDirs(d));
    return Status::Ok();
  }

  // The ports: node 0's, through the server, with several nodes (the meeting of the attempt's last
  // health round, whose collective met there: protocol/wire.h's MeetingKey); a free one here with one.
  // The nodes' addresses are the assignment's, so the launchers need not meet again. False when
  // stopped while waiting.
  Result<bool> Meet(const NodePlan& plan, LaunchOptions* lo) {
    if (!plan.meet) {
      ANNEAL_ASSIGN_OR_RETURN(lo->master_port, FreePort());
      return true;
    }
    auto m = MeetThroughServer(o_.server_url, job_, MeetingKey{attempt_, a_.meeting_round}, node_, address_, 300, stop_,
                               *o_.clock);
    if (!m.ok() && stop_.load()) return false;
    ANNEAL_RETURN_IF_ERROR(m.status());
    // MASTER_PORT is the ranks' own to bind, with or without SO_REUSEADDR: its hold ends as they are
    // about to start (the launcher's store port stays held: the launcher binds it with SO_REUSEADDR).
    if (node_ == 0) PortHolds::Process().Release(MeetingKey{attempt_, a_.meeting_round}.Path(job_), m->master_port);
    lo->master_addr = lo->store_bind = m->master_addr;
    lo->master_port = m->master_port;
    lo->store_port = m->store_port;
    lo->exec_key = m->exec_key;
    lo->hosts = a_.addresses;
    return true;
  }

  // Where and with what an `anneal exec` into this job runs.
  void SetExecPlace(const std::string& code, const std::map<std::string, std::string>& vars, const LaunchOptions& lo) {
    ExecPlace place{code, vars, exec_wrap_};
    RankContract node;
    node.world = nnodes_ * a_.spec.procs_per_instance;
    node.local_world = a_.spec.procs_per_instance;
    node.node_rank = node_;
    node.job = job_;
    node.attempt = attempt_;
    node.master_addr = lo.master_addr;
    node.master_port = lo.master_port;
    for (const auto& [k, v] : node.NodeEnvironment()) place.env[k] = v;
    std::lock_guard<std::mutex> l(place_mu_);
    place_ = std::move(place);
  }

  void NoteHostTmpPaths(const std::vector<std::string>& command) {
    if (!sandbox_ || !sandbox_->sandboxed()) return;
    std::string list;
    for (const std::string& u : HostTmpPathsNamed(command, a_.spec.environment)) list += (list.empty() ? "" : ", ") + u;
    if (!list.empty()) {
      Log("note: the job names " + list + " on this host's /tmp or /dev/shm, which its sandbox does not show: its /tmp "
          "and /dev/shm are its own. Pass such files in the job's source, or as a channel");
    }
  }

  // Every line a rank prints: masked, shipped, matched by the metric definitions, seen by the
  // stopping rules and the hang watch.
  void WatchOutput(LaunchOptions* lo) {
    const JobSpec& spec = a_.spec;
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

JobRunner::JobRunner(const AgentOptions& o, std::string address, Assignment assignment, std::function<void()> on_done)
    : impl_(std::make_unique<Impl>(o, std::move(address), std::move(assignment), std::move(on_done))) {}
JobRunner::~JobRunner() = default;
void JobRunner::Stop() { impl_->Stop(); }
void JobRunner::Orphan() { impl_->Orphan(); }
bool JobRunner::done() const { return impl_->done(); }
const std::string& JobRunner::job() const { return impl_->job(); }
int JobRunner::attempt() const { return impl_->attempt(); }
std::optional<ExecPlace> JobRunner::Place() { return impl_->Place(); }

}  // namespace anneal
