#include "launch/launcher.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <thread>

#include "comm/store.h"
#include "core/crypto.h"
#include "core/env.h"
#include "core/progress.h"
#include "launch/attempt_state.h"
#include "launch/launch_plan.h"
#include "launch/nofollow.h"
#include "launch/rank_process.h"
#include "launch/remote_exec.h"

namespace anneal {

namespace {

using std::chrono::milliseconds;

std::atomic<int> g_signal{0};
extern "C" void OnLauncherSignal(int sig) { g_signal.store(sig); }

std::string Joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& a : v) s += (s.empty() ? "" : " ") + a;
  return s;
}

HostFacts ThisHost() {
  HostFacts h;
  h.has_gpus = ::access("/dev/nvidia0", F_OK) == 0;
  h.cores = std::max(1u, std::thread::hardware_concurrency());
  cpu_set_t all;
  CPU_ZERO(&all);
  if (::sched_getaffinity(0, sizeof(all), &all) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &all)) h.cpus.push_back(c);
    }
  }
  return h;
}

// mpirun mode's per-process TMPDIRs (Launcher::OwnTmpDir) go with the attempt, on every way out of it.
struct TmpDirs {
  std::vector<RankProcess>* ranks;
  ~TmpDirs() {
    std::error_code ec;
    for (const RankProcess& r : *ranks) {
      if (!r.tmp_dir.empty()) std::filesystem::remove_all(r.tmp_dir, ec);
    }
  }
};

// Whether every rank (not a daemon run for launch-rsh) has ended.
bool RanksDone(const std::vector<RankProcess>& ranks) {
  for (const RankProcess& r : ranks) {
    if (r.running && r.remote_seq < 0) return false;
  }
  return true;
}

bool AnyOpen(const std::vector<RankProcess>& ranks) {
  for (const RankProcess& r : ranks) {
    if (r.out_fd >= 0 || r.err_fd >= 0) return true;
  }
  return false;
}

class Launcher {
 public:
  Launcher(const LaunchOptions& o, const std::function<void(const std::string&)>& log)
      : o_(o), log_(log), clock_(*o.clock), local_(PlanLocal(o)), host_facts_(ThisHost()) {}

  Result<LaunchResult> Run() {
    ANNEAL_ASSIGN_OR_RETURN(bool reached, ConnectStore());
    if (!reached) {
      LaunchResult res;
      res.exit_code = 1;
      res.interrupted = true;
      res.summary = "interrupted by a stop request while reaching the rendezvous store at " + store_addr_ + "\n";
      return res;
    }
    auto host = LocalAddressToward(o_.master_addr);
    host_ = host.ok() ? *host : "127.0.0.1";
    // With every node's address given, this node's is the one the others know.
    if (HostsGiven(o_)) host_ = o_.hosts[o_.node_rank];
    exec_key_ = o_.exec_key.empty() ? RandomHex(16) : o_.exec_key;
    if (!o_.stop) {
      struct sigaction sa {};
      sa.sa_handler = OnLauncherSignal;
      sigemptyset(&sa.sa_mask);
      sigaction(SIGTERM, &sa, nullptr);
      sigaction(SIGINT, &sa, nullptr);
    }
    LaunchResult res;
    for (int attempt = o_.first_attempt;; ++attempt) {
      res.attempts = attempt - o_.first_attempt + 1;
      ANNEAL_ASSIGN_OR_RETURN(AttemptOutcome out, RunAttempt(attempt));
      res.failed_rank = out.failed_rank;
      res.failed_status = out.failed_status;
      res.failure_local = out.failure_local;
      res.interrupted = out.interrupted;
      res.last_words = out.last_words;
      res.exit_code = out.exit_code;
      if (!out.failure.empty()) res.summary += "attempt " + std::to_string(attempt) + ": " + out.failure + "\n";
      if (!Again(out, attempt, &res)) return res;
    }
  }

 private:
  bool StopRequested() const { return o_.stop ? o_.stop->load() : g_signal.load() != 0; }
  bool KillRequested() const { return o_.kill && o_.kill->load(); }
  std::string StopReason() const { return o_.stop ? std::string("a stop request") : SignalName(g_signal.load()); }

  std::string Key(int attempt, const std::string& k) const { return LaunchKey(o_.job, attempt, k); }
  std::string MyName() const { return o_.node_name.empty() ? "node-" + std::to_string(o_.node_rank) : o_.node_name; }

  // Node 0 serves the store; every node connects to it. Embedded (a stop or kill flag given), the
  // store is reached in one-second tries, so a stop or kill request ends the wait for node 0 at once
  // (false: stopped).
  Result<bool> ConnectStore() {
    const StorePlan plan = PlanStore(o_);
    int port = plan.port;
    if (plan.serve) {
      ANNEAL_ASSIGN_OR_RETURN(server_, TcpStoreServer::Start(plan.bind, port));
      port = server_->port();
    }
    store_addr_ = plan.Address(o_, port);
    const bool embedded = o_.stop || o_.kill;
    const double deadline = clock_.Monotonic() + o_.rendezvous_timeout_s;
    for (;;) {
      const double left = std::max(0.0, deadline - clock_.Monotonic());
      auto s = OpenStore(store_addr_, milliseconds(static_cast<int64_t>(1000 * (embedded ? std::min(1.0, left) : left))));
      if (s.ok()) {
        store_ = std::move(s).value();
        return true;
      }
      if (!embedded) return s.status();
      if (clock_.Monotonic() >= deadline) {
        return PeerError(s.status().message() + " (tried for " + std::to_string(static_cast<int>(o_.rendezvous_timeout_s)) +
                         " s)");
      }
      if (StopRequested() || KillRequested()) return false;
    }
  }

  // After an attempt that did not succeed: whether the group starts again (logging why not).
  bool Again(const AttemptOutcome& out, int attempt, LaunchResult* res) {
    if (out.exit_code == 0) {
      if (!local_.leading) {
        log_("anneal launch: all " + std::to_string(o_.nproc_per_node) + " local ranks of attempt " +
             std::to_string(attempt) + " finished (exit code 0)");
      } else {
        log_(std::string("anneal launch: ") + LaunchModeName(o_.mode) + " and its " + std::to_string(local_.world) +
             " ranks of attempt " + std::to_string(attempt) + " finished (exit code 0)");
      }
      return false;
    }
    if (out.interrupted) {
      if (!o_.stop && g_signal.load()) res->signal = g_signal.load();
      log_("anneal launch: interrupted by " + (StopRequested() ? StopReason() : std::string("a signal to a rank")) +
           "; ranks were sent SIGTERM" + (out.last_words.empty() ? "" : "; " + out.last_words));
      return false;
    }
    if (out.exit_code == 2) {
      log_("anneal launch: a rank reported bad input (exit code 2): not restarting, retrying cannot fix it");
      return false;
    }
    if (attempt - o_.first_attempt >= o_.max_restarts) {
      log_("anneal launch: no restarts left (--max-restarts " + std::to_string(o_.max_restarts) + "); giving up");
      return false;
    }
    log_("anneal launch: restarting the group (restart " + std::to_string(attempt + 1) + " of " +
         std::to_string(o_.max_restarts) + "); ranks resume from the newest complete checkpoint");
    return true;
  }

  Result<AttemptOutcome> RunAttempt(int attempt) {
    leader_failed_rank_ = -1, leader_failed_weight_ = 0;
    if (local_.leading) ANNEAL_RETURN_IF_ERROR(PublishNode(attempt));
    AttemptOutcome stopped;
    std::optional<std::string> hosts = KnownHosts(o_, local_, attempt);
    if (!hosts) {
      ANNEAL_ASSIGN_OR_RETURN(hosts, Meet(attempt, &stopped));
      if (!hosts) return stopped;
    }
    ANNEAL_ASSIGN_OR_RETURN(std::vector<RankProcess> ranks, StartRanks(attempt, *hosts));
    TmpDirs tmp_dirs{&ranks};
    AttemptState st(o_.grace_s, local_.awaits_leader);
    ANNEAL_RETURN_IF_ERROR(Supervise(attempt, *hosts, &ranks, &st));
    for (RankProcess& r : ranks) {
      if (r.out_fd >= 0) ::close(r.out_fd);
      if (r.err_fd >= 0) ::close(r.err_fd);
    }
    if (!st.failed()) {
      AwaitOtherNodes(attempt, &st);
    } else {
      // An interrupted node never says done: node 0, waiting for every node's, stops on this.
      if (st.interrupted() && o_.nnodes > 1) (void)store_->Set(Key(attempt, "interrupted"), MyName());
      Summarise(attempt, ranks, &st);
    }
    return st.outcome();
  }

  // Meets the other launchers: every node's address, in node order ("a,b"); nullopt when a stop or
  // kill request ended the wait (*stopped then says so). Polled rather than a blocking Get, so such a
  // request ends the wait at once.
  Result<std::optional<std::string>> Meet(int attempt, AttemptOutcome* stopped) {
    ANNEAL_RETURN_IF_ERROR(store_->Set(Key(attempt, "host/" + std::to_string(o_.node_rank)), host_));
    std::string hosts;
    const double deadline = clock_.Monotonic() + o_.rendezvous_timeout_s;
    for (int n = 0; n < o_.nnodes; ++n) {
      const std::string key = Key(attempt, "host/" + std::to_string(n));
      for (;;) {
        ANNEAL_ASSIGN_OR_RETURN(std::optional<std::string> h, store_->TryGet(key));
        if (h) {
          hosts += (n ? "," : "") + *h;
          break;
        }
        if (StopRequested() || KillRequested()) {
          stopped->exit_code = 1;
          stopped->interrupted = true;
          stopped->failure = "interrupted by " + StopReason() + " while waiting for node " + std::to_string(n);
          return std::optional<std::string>();
        }
        if (clock_.Monotonic() > deadline) {
          return PeerError("node " + std::to_string(n) + " of " + std::to_string(o_.nnodes) + " did not join within " +
                           std::to_string(static_cast<int>(o_.rendezvous_timeout_s)) + " s (no key " + key + " in " +
                           store_->Describe() + "): start its launcher, or check that it reaches --master-addr");
        }
        clock_.SleepFor(0.02);
      }
    }
    return std::optional<std::string>(hosts);
  }

  // Runs the attempt until this node's processes have ended and their output is read (and, on a node
  // that waits for the leader, until the leader ended or anything failed).
  Status Supervise(int attempt, const std::string& hosts, std::vector<RankProcess>* ranks, AttemptState* st) {
    const double t_start = clock_.Monotonic();
    std::unique_ptr<RemoteExecQueue> remote;
    if (local_.serves_remote) {
      remote = std::make_unique<RemoteExecQueue>(store_.get(), Key(attempt, "rsh/" + MyName() + "/"), MyName(), exec_key_);
    }
    int running = static_cast<int>(ranks->size());
    while (running > 0 || AnyOpen(*ranks) || st->awaiting_leader()) {
      Pump(ranks);
      if (remote && !st->failed()) ANNEAL_RETURN_IF_ERROR(ServeRemote(remote.get(), attempt, hosts, ranks, &running));
      // Each rank's own pid: an embedding process may have other children.
      for (RankProcess& r : *ranks) {
        if (r.running) Reap(&r, attempt, t_start, remote.get(), st, ranks, &running);
      }
      if (o_.nnodes > 1 && st->PeerCheckDue(clock_.Monotonic())) CheckPeers(attempt, st, ranks);
      if (StopRequested()) Signal(st->Interrupt(clock_.Monotonic(), "interrupted by " + StopReason()), ranks);
      if (KillRequested()) Signal(st->Kill(clock_.Monotonic()), ranks);
      Signal(st->Tick(clock_.Monotonic(), RanksDone(*ranks), running > 0), ranks);
    }
    return Status::Ok();
  }

  // Whether r has exited or stopped, and what that means for the attempt.
  void Reap(RankProcess* r, int attempt, double t_start, RemoteExecQueue* remote, AttemptState* st,
            std::vector<RankProcess>* ranks, int* running) {
    int status = 0;
    const pid_t pid = ::waitpid(r->pid, &status, WNOHANG | WUNTRACED);
    if (pid <= 0) return;
    if (WIFSTOPPED(status)) {
      log_("anneal launch: rank " + std::to_string(r->role.global) + " (pid " + std::to_string(pid) + ") was stopped by " +
           SignalName(WSTOPSIG(status)) + "; its peers will time out if it does not continue");
      return;
    }
    r->running = false;
    r->status = status;
    --*running;
    if (r->remote_seq >= 0) {
      (void)remote->Finish(r->remote_seq, StatusFailed(status) ? ExitCodeOf(status) : 0);
      return;
    }
    if (InterruptedExit(status) && !LeaderReportedAFailure(r)) {
      // A signal from outside (Slurm's, a user's kill) reached this rank before any stop of the
      // launcher's: the others are stopped the same way, to checkpoint too.
      Signal(st->Interrupt(clock_.Monotonic(), "rank " + std::to_string(r->role.global) + " was interrupted (" +
                                                   DescribeStatus(status) + ": " +
                                                   SignalName(WEXITSTATUS(status) - 128) + ")"),
             ranks);
      return;
    }
    if (!StatusFailed(status) || st->failed()) return;
    int failed_rank = r->role.global;
    const std::string what = FailureOf(r, status, clock_.Monotonic() - t_start, &failed_rank);
    int64_t n = 1;
    if (auto a = store_->Add(Key(attempt, "nfailed"), 1); a.ok()) n = *a;
    if (n == 1) (void)store_->Set(Key(attempt, "failed"), what);
    Failed(st->RankFailed(clock_.Monotonic(), failed_rank, status, what, ExitCodeOf(status)), what, ranks);
  }

  // Another node's failure, a lost store, or (waiting for the leader) the leader's good end.
  void CheckPeers(int attempt, AttemptState* st, std::vector<RankProcess>* ranks) {
    auto f = store_->TryGet(Key(attempt, "failed"));
    if (!f.ok()) {
      const std::string what = "lost the rendezvous store at " + store_addr_ + " (" + f.status().message() + ")";
      Failed(st->Fail(clock_.Monotonic(), what, 3), what, ranks);
    } else if (*f) {
      Failed(st->Fail(clock_.Monotonic(), "another node's " + **f, 3), "another node's " + **f, ranks);
    } else if (st->awaiting_leader()) {
      auto d = store_->TryGet(Key(attempt, "done"));
      if (d.ok() && *d) st->LeaderDone();  // this node's daemons end with it
    }
  }

  // The first failure's line, and its SIGTERM.
  void Failed(StopSignal s, const std::string& what, std::vector<RankProcess>* ranks) {
    if (s == StopSignal::kNone) return;
    log_("anneal launch: " + what + "; stopping the other ranks (SIGTERM, SIGKILL after " +
         std::to_string(static_cast<int>(o_.grace_s)) + " s)");
    Signal(s, ranks);
  }

  void Signal(StopSignal s, std::vector<RankProcess>* ranks) {
    if (s == StopSignal::kNone) return;
    for (RankProcess& r : *ranks) {
      if (!r.running) continue;
      ::kill(-r.pid, s == StopSignal::kKill ? SIGKILL : SIGTERM);
      ::kill(-r.pid, SIGCONT);  // a stopped (frozen) rank must run to receive it
    }
  }

  // Success here; node 0 keeps the store up until every node has finished too.
  void AwaitOtherNodes(int attempt, AttemptState* st) {
    (void)store_->Add(Key(attempt, "done"), 1);
    if (o_.node_rank != 0 || o_.nnodes == 1) return;
    const double deadline = clock_.Monotonic() + o_.rendezvous_timeout_s;
    while (clock_.Monotonic() < deadline) {
      auto d = store_->TryGet(Key(attempt, "done"));
      auto f = store_->TryGet(Key(attempt, "failed"));
      if (!d.ok() || (*d && std::atoi((*d)->c_str()) >= o_.nnodes)) return;
      if (f.ok() && *f) {
        (void)st->Fail(clock_.Monotonic(), "another node's " + **f, 3);  // every process has ended: no signal
        return;
      }
      // A node interrupted (stopped, killed as hung) will not say done, and this node told to stop or
      // kill has nothing left to keep the store for: the wait used to last the whole rendezvous
      // timeout (300 s), holding a released agent (found by the chaos soak).
      auto i = store_->TryGet(Key(attempt, "interrupted"));
      if ((i.ok() && *i) || StopRequested() || KillRequested()) return;
      clock_.SleepFor(0.1);
    }
  }

  // How every local rank ended, and (interrupted) the first one's last line.
  void Summarise(int attempt, const std::vector<RankProcess>& ranks, AttemptState* st) {
    std::string how;
    for (const RankProcess& r : ranks) how += " rank " + std::to_string(r.role.global) + ": " + DescribeStatus(r.status) + ";";
    log_("anneal launch: attempt " + std::to_string(attempt) + (st->interrupted() ? " interrupted —" : " failed —") + how);
    if (!st->interrupted() || local_.leading) return;
    for (const RankProcess& r : ranks) {
      if (!r.last_line.empty()) {
        st->outcome().last_words = "rank " + std::to_string(r.role.global) + ": " + r.last_line;
        return;
      }
    }
  }

  // mpirun/srun mode: this node's RankSetup file (0600, beside the ranks' working directory) and its
  // path under "node/<n>" for launch-rank, before this node joins the attempt's meeting.
  Status PublishNode(int attempt) {
    const std::string dir = o_.workdir.empty() ? "." : o_.workdir;
    const std::string file = JoinPath(dir, ".anneal-rank-setup-" + std::to_string(attempt) + ".json");
    RankSetup setup{o_.workdir, o_.extra_env, o_.sandbox_plan};
    ANNEAL_RETURN_IF_ERROR(Env::Default().WriteFileAtomic(file, RankSetupToJson(setup)));
    ::chmod(file.c_str(), 0600);
    // Read by ranks a sandboxed mpirun or its daemons start (already the job's uid, inside its sandbox),
    // and trusted by a root launch-rank (srun's, Slurm's mpirun's) only as root's own file: root's, in
    // the job's group (its gid is its uid), mode 0640.
    if (o_.owner_uid >= 0) {  // through an fd: the folder is the job's, which could put a link in its place
      std::error_code ec;  // absolute without resolving links (realpath would follow one the job put there)
      auto fd = OpenNoFollow(std::filesystem::absolute(file, ec).lexically_normal().string(), false);
      if (!fd.ok() || ::fchownat(fd->get(), "", 0, o_.owner_uid, AT_EMPTY_PATH) != 0 ||
          ::chmod(ProcFdPath(fd->get()).c_str(), 0640) != 0) {
        return IoError("cannot let the job's uid read " + file + (fd.ok() ? std::string(": ") + std::strerror(errno) : ": " + fd.status().message()));
      }
    }
    char abs[4096];
    const std::string path = ::realpath(file.c_str(), abs) ? std::string(abs) : file;
    return store_->Set(Key(attempt, "node/" + std::to_string(o_.node_rank)), NodeInfoToJson(NodeInfo{MyName(), path}));
  }

  // This node's local processes of an attempt (LocalPlan): its ranks, or in mpirun/srun mode the
  // leader (node 0) or nothing (the other nodes).
  Result<std::vector<RankProcess>> StartRanks(int attempt, const std::string& hosts) {
    std::vector<RankProcess> ranks(local_.processes.size());
    for (size_t i = 0; i < ranks.size(); ++i) {
      ranks[i].role = local_.processes[i];
      if (!ranks[i].role.leader) {
        ANNEAL_RETURN_IF_ERROR(Spawn(&ranks[i], attempt, hosts, o_.command));
        continue;
      }
      ANNEAL_ASSIGN_OR_RETURN(std::vector<std::string> argv, LeaderCommand(attempt));
      ANNEAL_RETURN_IF_ERROR(Spawn(&ranks[i], attempt, hosts, argv));
      log_("anneal launch: attempt " + std::to_string(attempt) + ": " + LaunchModeName(o_.mode) + " starts " +
           std::to_string(local_.world) + " ranks: " + Joined(argv));
    }
    if (o_.on_started) o_.on_started(attempt);
    if (!ranks.empty() && !local_.leading) {
      log_("anneal launch: attempt " + std::to_string(attempt) + ": started ranks " + std::to_string(ranks[0].role.global) +
           ".." + std::to_string(ranks.back().role.global) + " of " + std::to_string(local_.world) + " on node " +
           std::to_string(o_.node_rank) + " (" + host_ + "); store " + store_addr_);
    }
    return ranks;
  }

  // The leader's argv, naming the nodes as each published itself.
  Result<std::vector<std::string>> LeaderCommand(int attempt) {
    LeaderPlan p;
    p.mode = o_.mode;
    p.procs_per_node = o_.nproc_per_node;
    p.self = o_.self.empty() ? SelfExecutable() : o_.self;
    p.command = o_.command;
    p.under_slurm = o_.under_slurm;
    p.as_root = ::geteuid() == 0;
    p.forward_env = {"ANNEAL_STORE", "ANNEAL_JOB", "ANNEAL_ATTEMPT", "ANNEAL_HOSTS", "MASTER_ADDR", "MASTER_PORT",
                     "TORCHELASTIC_RESTART_COUNT", "OMP_NUM_THREADS", "PATH"};
    for (int n = 0; n < o_.nnodes; ++n) {
      ANNEAL_ASSIGN_OR_RETURN(std::string text, store_->Get(Key(attempt, "node/" + std::to_string(n)), milliseconds(10000)));
      ANNEAL_ASSIGN_OR_RETURN(NodeInfo info, NodeInfoFromJson(text));
      p.node_names.push_back(info.name);
    }
    return LeaderArgv(p);
  }

  // Starts the command of each launch-rsh request for this node (an mpirun daemon) as a local process.
  Status ServeRemote(RemoteExecQueue* q, int attempt, const std::string& hosts, std::vector<RankProcess>* ranks,
                     int* running) {
    for (;;) {
      auto req = q->Poll();
      if (!req.ok() && req.status().code() == Code::kInvalidInput) {
        log_("anneal launch: " + req.status().message());
        continue;  // a forged request, answered 255
      }
      if (!req.ok()) return Status::Ok();  // a lost store is found by the failure check
      if (!*req) return Status::Ok();
      RankProcess r;
      r.role.daemon = true;
      r.remote_seq = (*req)->seq;
      if (Status st = Spawn(&r, attempt, hosts, {"/bin/sh", "-c", (*req)->command}); !st.ok()) {
        (void)q->Finish(r.remote_seq, 255);
        return st;
      }
      log_("anneal launch: started mpirun's daemon " + std::to_string(r.remote_seq) + " on " + MyName() + " (pid " +
           std::to_string(r.pid) + ")");
      ranks->push_back(std::move(r));
      ++*running;
    }
  }

  // Reads what the processes printed (up to 100 ms), forwarding whole lines with their prefix.
  void Pump(std::vector<RankProcess>* ranks) {
    std::vector<RankProcess*> all;
    for (RankProcess& r : *ranks) all.push_back(&r);
    PumpOutput(all, clock_, emit_);
  }

  // A line of r's, as rank r's or as the rank the leader's tag names; a daemon's goes to the
  // launcher's log.
  void EmitLine(RankProcess& r, bool err, const std::string& line) {
    if (!line.empty()) r.last_line = line;
    if (r.remote_seq >= 0) {
      log_("anneal launch: mpirun daemon " + std::to_string(r.remote_seq) + " on " + MyName() + ": " + line);
      return;
    }
    int rank = r.role.global;
    std::string text;
    if (!SplitRankTag(o_.mode, line, &rank, &err, &text)) {
      text = line;
      int weight = 0;
      const int named = LeaderFailedRank(o_.mode, line, &weight);
      if (named >= 0 && (leader_failed_rank_ < 0 || weight > leader_failed_weight_)) {
        leader_failed_rank_ = named;
        leader_failed_weight_ = weight;
      }
    }
    if (o_.on_output) {
      o_.on_output(rank, err, text);
    } else {
      std::fprintf(err ? stderr : stdout, "[rank %d] %s\n", rank, text.c_str());
      std::fflush(err ? stderr : stdout);
    }
  }

  // "rank 1 (node 0, pid 123) failed first: exit code 3 after 2.2 s". In mpirun/srun mode the process
  // that ended is the leader: its last lines are read first, for the rank it names (*rank).
  std::string FailureOf(RankProcess* r, int status, double after_s, int* rank) {
    const std::string after = " after " + std::to_string(static_cast<int>(after_s * 10) / 10.0).substr(0, 5) + " s";
    if (!local_.leading) {
      return "rank " + std::to_string(r->role.global) + " (node " + std::to_string(o_.node_rank) + ", pid " +
             std::to_string(r->pid) + ") failed first: " + DescribeStatus(status) + after;
    }
    DrainLeader(r);
    const std::string leader = std::string(LaunchModeName(o_.mode)) + " (node 0, pid " + std::to_string(r->pid) + ")";
    if (leader_failed_rank_ < 0) return leader + " failed: " + DescribeStatus(status) + after;
    *rank = leader_failed_rank_;
    return "rank " + std::to_string(*rank) + " failed first (" + leader + " reported it); " +
           LaunchModeName(o_.mode) + " ended with " + DescribeStatus(status) + after;
  }

  // The leader has exited, so its pipes end as soon as they are drained: up to 5 s for a loaded
  // machine (the report naming the failed rank may be the last thing it wrote).
  void DrainLeader(RankProcess* r) {
    std::vector<RankProcess*> one = {r};
    for (const double until = clock_.Monotonic() + 5; (r->out_fd >= 0 || r->err_fd >= 0) && clock_.Monotonic() < until;) {
      PumpOutput(one, clock_, emit_);
    }
  }

  // mpirun/srun mode: whether the leader that ended named a failed rank (srun exits 143 when it
  // terminated the other tasks after one failed: a failure, not an interruption). Always false for a
  // rank of anneal's own launcher.
  bool LeaderReportedAFailure(RankProcess* r) {
    if (!local_.leading) return false;
    DrainLeader(r);
    return leader_failed_rank_ >= 0;
  }

  // mpirun mode: mpirun and each of its daemons get a TMPDIR of their own (under the one they would
  // have), where Open MPI makes its session directory. Several instances of one host (the local
  // backend's) otherwise share /tmp/ompi.HOST.UID and its daemons race creating it ("A call to mkdir
  // was unable to create the desired directory ... File exists"), failing the job at random.
  Status OwnTmpDir(RankProcess* r, std::map<std::string, std::string>* env) const {
    if (o_.mode != LaunchMode::kMpirun) return Status::Ok();
    std::error_code ec;
    const std::string given = env->count("TMPDIR") && !(*env)["TMPDIR"].empty() ? (*env)["TMPDIR"] : "/tmp";
    const std::string base = std::filesystem::absolute(given, ec).string();  // the process changes its directory
    std::string templ = JoinPath(base, "anneal-mpi.XXXXXX");
    if (::mkdtemp(templ.data()) == nullptr) {
      return IoError("cannot make a temporary folder under " + base + " for mpirun's session directory: " + std::strerror(errno) +
                     " (set TMPDIR to a writable folder)");
    }
    if (o_.owner_uid >= 0 && ::chown(templ.c_str(), o_.owner_uid, o_.owner_uid) != 0) {
      return IoError("cannot give " + templ + " to the job's uid: " + std::strerror(errno));
    }
    r->tmp_dir = templ;
    (*env)["TMPDIR"] = templ;
    return Status::Ok();
  }

  // Starts r with its environment (the rank contract: launch/launch_plan.h) inside the job's sandbox
  // when it has one and r belongs in it (LaunchOptions::wrap).
  Status Spawn(RankProcess* r, int attempt, const std::string& hosts, std::vector<std::string> args) {
    SpawnSpec spec;
    spec.env = ProcessEnvironmentFor(o_, r->role, AttemptContract(o_, attempt, store_addr_, hosts, host_),
                                     ProcessEnvironment(), host_facts_, exec_key_);
    ANNEAL_RETURN_IF_ERROR(OwnTmpDir(r, &spec.env));
    spec.argv = std::move(args);
    if (r->role.wrap) spec.wrap = o_.wrap;
    spec.workdir = o_.workdir;
    spec.cpus = CpuShare(o_, r->role, host_facts_.cpus);
    Status st = SpawnProcess(r, std::move(spec));
    if (!st.ok() && !r->tmp_dir.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(r->tmp_dir, ec);
      r->tmp_dir.clear();
    }
    return st;
  }

  const LaunchOptions& o_;
  const std::function<void(const std::string&)>& log_;
  Clock& clock_;
  const LocalPlan local_;
  const HostFacts host_facts_;
  const std::function<void(RankProcess&, bool, const std::string&)> emit_ =
      [this](RankProcess& r, bool err, const std::string& line) { EmitLine(r, err, line); };
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<Store> store_;
  std::string store_addr_, host_;
  std::string exec_key_;  // launch-rsh requests' key (mpirun off Slurm)
  int leader_failed_rank_ = -1;  // the rank the leader named as failed first (this attempt)
  int leader_failed_weight_ = 0;  // how surely (LeaderFailedRank)
};

}  // namespace

Result<LaunchResult> RunLauncher(const LaunchOptions& o, const std::function<void(const std::string&)>& log) {
  if (o.command.empty()) return InvalidInput("anneal launch needs a command after --, e.g. -- anneal train --config x.yaml");
  if (o.nproc_per_node < 1) return InvalidInput("--nproc-per-node " + std::to_string(o.nproc_per_node) + " must be at least 1");
  if (o.nnodes < 1) return InvalidInput("--nnodes " + std::to_string(o.nnodes) + " must be at least 1");
  if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
    return InvalidInput("--node-rank " + std::to_string(o.node_rank) + " must be in [0, --nnodes " +
                        std::to_string(o.nnodes) + ")");
  }
  if (o.max_restarts < 0) return InvalidInput("--max-restarts must be at least 0");
  if (o.mode == LaunchMode::kSrun && !o.under_slurm) {
    return InvalidInput("entrypoint.launcher srun needs the job's instances to be a Slurm allocation (anneal server "
                        "--backend slurm); use mpirun or anneal elsewhere");
  }
  if (o.mode == LaunchMode::kMpirun && !o.under_slurm && o.nnodes > 1 && o.exec_key.empty()) {
    return InvalidInput("mpirun across " + std::to_string(o.nnodes) + " nodes off Slurm needs the nodes' shared key "
                        "for launch-rsh (LaunchOptions::exec_key)");
  }
  if (o.cpu_bind != "auto" && o.cpu_bind != "none") {
    return InvalidInput("--cpu-bind '" + o.cpu_bind + "' must be auto or none");
  }
  if (o.nnodes > 1 && !o.allow_loopback_master && (o.master_addr == "127.0.0.1" || o.master_addr == "localhost")) {
    return InvalidInput("--nnodes " + std::to_string(o.nnodes) + " needs --master-addr: the address of node 0 that "
                        "every node can reach (not " + o.master_addr + ")");
  }
  Launcher l(o, log);
  return l.Run();
}

}  // namespace anneal
