#include "launch/launcher.h"

#include "launch/nofollow.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
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
#include <thread>

#include "comm/store.h"
#include "core/crypto.h"
#include "core/env.h"
#include "core/progress.h"
#include "launch/remote_exec.h"


namespace anneal {

namespace {

using std::chrono::milliseconds;

std::atomic<int> g_signal{0};
extern "C" void OnLauncherSignal(int sig) { g_signal.store(sig); }

struct Rank {
  int global = 0, local = 0;
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1;
  std::string out_buf, err_buf;
  bool running = false;
  int status = 0;  // waitpid status once exited
  int64_t remote_seq = -1;  // a command run for launch-rsh (an mpirun daemon), not a rank
  std::string tmp_dir;      // mpirun mode: this process's own TMPDIR, removed when the attempt ends
  std::string last_line;    // the last line it printed (either stream)
};

std::string Describe(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by " + SignalName(WTERMSIG(status));
  return "status " + std::to_string(status);
}

bool RankFailed(int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }

// A rank that exited 128 + SIGINT or SIGTERM (130, 143) was stopped by that signal after saving what it
// could (anneal train checkpoints first): an interruption, never a failure of the rank's own.
bool InterruptedExit(int status) {
  return WIFEXITED(status) && (WEXITSTATUS(status) == 128 + SIGINT || WEXITSTATUS(status) == 128 + SIGTERM);
}

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 3;  // a rank lost to a signal: the cluster failed
}

class Launcher {
 public:
  Launcher(const LaunchOptions& o, const std::function<void(const std::string&)>& log) : o_(o), log_(log) {}

  Result<LaunchResult> Run() {
    const bool multi = o_.nnodes > 1;
    const std::string bind = !o_.store_bind.empty() ? o_.store_bind : multi ? o_.master_addr : "127.0.0.1";
    int port = o_.store_port >= 0 ? o_.store_port : multi ? o_.master_port + 1 : 0;
    if (o_.node_rank == 0) {
      ANNEAL_ASSIGN_OR_RETURN(server_, TcpStoreServer::Start(bind, port));
      port = server_->port();
    }
    store_addr_ = (o_.node_rank == 0 ? bind : o_.master_addr) + ":" + std::to_string(port);
    if (o_.node_rank == 0 && bind == "0.0.0.0") store_addr_ = o_.master_addr + ":" + std::to_string(port);
    // Embedded (a stop or kill flag given), the store is reached in one-second tries, so a stop or
    // kill request ends the wait for node 0 at once.
    const bool embedded = o_.stop || o_.kill;
    const double connect_deadline = MonotonicSeconds() + o_.rendezvous_timeout_s;
    for (;;) {
      const double left = std::max(0.0, connect_deadline - MonotonicSeconds());
      auto s = OpenStore(store_addr_, milliseconds(static_cast<int64_t>(1000 * (embedded ? std::min(1.0, left) : left))));
      if (s.ok()) {
        store_ = std::move(s).value();
        break;
      }
      if (!embedded) return s.status();
      if (MonotonicSeconds() >= connect_deadline) {
        return PeerError(s.status().message() + " (tried for " + std::to_string(static_cast<int>(o_.rendezvous_timeout_s)) +
                         " s)");
      }
      if ((o_.stop && o_.stop->load()) || (o_.kill && o_.kill->load())) {
        LaunchResult res;
        res.exit_code = 1;
        res.interrupted = true;
        res.summary = "interrupted by a stop request while reaching the rendezvous store at " + store_addr_ + "\n";
        return res;
      }
    }
    auto host = LocalAddressToward(o_.master_addr);
    host_ = host.ok() ? *host : "127.0.0.1";
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
      if (!out.failure.empty()) res.summary += "attempt " + std::to_string(attempt) + ": " + out.failure + "\n";
      if (out.exit_code == 0) {
        res.exit_code = 0;
        if (!Leading()) {
          log_("anneal launch: all " + std::to_string(o_.nproc_per_node) + " local ranks of attempt " +
               std::to_string(attempt) + " finished (exit code 0)");
        } else {
          log_(std::string("anneal launch: ") + LaunchModeName(o_.mode) + " and its " +
               std::to_string(o_.nnodes * o_.nproc_per_node) + " ranks of attempt " + std::to_string(attempt) +
               " finished (exit code 0)");
        }
        return res;
      }
      res.exit_code = out.exit_code;
      if (out.interrupted) {
        if (!o_.stop && g_signal.load()) res.signal = g_signal.load();
        log_("anneal launch: interrupted by " + (StopRequested() ? StopReason() : std::string("a signal to a rank")) +
             "; ranks were sent SIGTERM" + (out.last_words.empty() ? "" : "; " + out.last_words));
        return res;
      }
      if (out.exit_code == 2) {
        log_("anneal launch: a rank reported bad input (exit code 2): not restarting, retrying cannot fix it");
        return res;
      }
      if (attempt - o_.first_attempt >= o_.max_restarts) {
        log_("anneal launch: no restarts left (--max-restarts " + std::to_string(o_.max_restarts) + "); giving up");
        return res;
      }
      log_("anneal launch: restarting the group (restart " + std::to_string(attempt + 1) + " of " +
           std::to_string(o_.max_restarts) + "); ranks resume from the newest complete checkpoint");
    }
  }

 private:
  struct AttemptOutcome {
    int exit_code = 0;
    bool interrupted = false;
    int failed_rank = -1, failed_status = 0;
    bool failure_local = false;
    std::string failure;  // "rank 1 (node 0, pid 123) failed first: killed by SIGKILL after 3.2 s"
    std::string last_words;  // interrupted: the first rank's last line ("... checkpoint ... saved ...")
  };

  bool StopRequested() const { return o_.stop ? o_.stop->load() : g_signal.load() != 0; }
  std::string StopReason() const { return o_.stop ? std::string("a stop request") : SignalName(g_signal.load()); }

  std::string Key(int attempt, const std::string& k) const { return LaunchKey(o_.job, attempt, k); }
  bool Leading() const { return o_.mode != LaunchMode::kAnneal; }
  std::string NodeName(int n) const { return "node-" + std::to_string(n); }
  std::string MyName() const { return o_.node_name.empty() ? NodeName(o_.node_rank) : o_.node_name; }

  Result<AttemptOutcome> RunAttempt(int attempt) {
    leader_failed_rank_ = -1, leader_failed_weight_ = 0;
    if (Leading()) ANNEAL_RETURN_IF_ERROR(PublishNode(attempt));
    // Meet the other launchers: every node's address, in node order.
    ANNEAL_RETURN_IF_ERROR(store_->Set(Key(attempt, "host/" + std::to_string(o_.node_rank)), host_));
    std::string hosts;
    // Polled rather than a blocking Get, so a stop or kill request ends the wait at once.
    const double meet_deadline = MonotonicSeconds() + o_.rendezvous_timeout_s;
    for (int n = 0; n < o_.nnodes; ++n) {
      const std::string key = Key(attempt, "host/" + std::to_string(n));
      for (;;) {
        ANNEAL_ASSIGN_OR_RETURN(std::optional<std::string> h, store_->TryGet(key));
        if (h) {
          hosts += (n ? "," : "") + *h;
          break;
        }
        if (StopRequested() || (o_.kill && o_.kill->load())) {
          AttemptOutcome out;
          out.exit_code = 1;
          out.interrupted = true;
          out.failure = "interrupted by " + StopReason() + " while waiting for node " + std::to_string(n);
          return out;
        }
        if (MonotonicSeconds() > meet_deadline) {
          return PeerError("node " + std::to_string(n) + " of " + std::to_string(o_.nnodes) + " did not join within " +
                           std::to_string(static_cast<int>(o_.rendezvous_timeout_s)) + " s (no key " + key + " in " +
                           store_->Describe() + "): start its launcher, or check that it reaches --master-addr");
        }
        std::this_thread::sleep_for(milliseconds(20));
      }
    }
    ANNEAL_ASSIGN_OR_RETURN(std::vector<Rank> ranks, StartRanks(attempt, hosts));
    // mpirun mode's per-process TMPDIRs (OwnTmpDir) go with the attempt, on every way out of it.
    struct TmpDirs {
      std::vector<Rank>* ranks;
      ~TmpDirs() {
        std::error_code ec;
        for (const Rank& r : *ranks) {
          if (!r.tmp_dir.empty()) std::filesystem::remove_all(r.tmp_dir, ec);
        }
      }
    } tmp_dirs{&ranks};
    const double t_start = MonotonicSeconds();
    std::unique_ptr<RemoteExecQueue> remote;
    if (o_.mode == LaunchMode::kMpirun && !o_.under_slurm) {
      remote = std::make_unique<RemoteExecQueue>(store_.get(), Key(attempt, "rsh/" + MyName() + "/"), MyName(), exec_key_);
    }
    // A node other than the leader's waits for the leader's end ("done") or a failure.
    bool awaiting_leader = Leading() && o_.node_rank != 0;

    AttemptOutcome out;
    double failed_at = -1, last_check = 0, daemons_left_at = -1;
    bool killed = false, daemons_termed = false;
    int running = static_cast<int>(ranks.size());
    auto stop_all = [&](int sig) {
      for (Rank& r : ranks) {
        if (!r.running) continue;
        ::kill(-r.pid, sig);
        ::kill(-r.pid, SIGCONT);  // a stopped (frozen) rank must run to receive it
      }
    };
    auto fail = [&](const std::string& what, int code) {
      if (failed_at >= 0) return;
      failed_at = MonotonicSeconds();
      out.failure = what;
      out.exit_code = code;
      log_("anneal launch: " + what + "; stopping the other ranks (SIGTERM, SIGKILL after " +
           std::to_string(static_cast<int>(o_.grace_s)) + " s)");
      stop_all(SIGTERM);
    };
    while (running > 0 || AnyOpen(ranks) || (awaiting_leader && failed_at < 0)) {
      Pump(&ranks);
      if (remote && failed_at < 0) ANNEAL_RETURN_IF_ERROR(ServeRemote(remote.get(), attempt, hosts, &ranks, &running));
      // Exits and stops.
      // Each rank's own pid: an embedding process may have other children.
      for (Rank& r : ranks) {
        if (!r.running) continue;
        int st = 0;
        const pid_t pid = ::waitpid(r.pid, &st, WNOHANG | WUNTRACED);
        if (pid <= 0) continue;
        {
          if (WIFSTOPPED(st)) {
            log_("anneal launch: rank " + std::to_string(r.global) + " (pid " + std::to_string(pid) + ") was stopped by " +
                 SignalName(WSTOPSIG(st)) + "; its peers will time out if it does not continue");
            continue;
          }
          r.running = false;
          r.status = st;
          --running;
          if (r.remote_seq >= 0) {
            (void)remote->Finish(r.remote_seq, RankFailed(st) ? ExitCodeOf(st) : 0);
            continue;
          }
          if (InterruptedExit(st) && !LeaderReportedAFailure(&r)) {
            if (!out.interrupted) {
              // A signal from outside (Slurm's, a user's kill) reached this rank before any stop of
              // the launcher's: the others are stopped the same way, to checkpoint too.
              out.interrupted = true;
              if (failed_at < 0) {
                failed_at = MonotonicSeconds();
                out.exit_code = 1;
                out.failure = "rank " + std::to_string(r.global) + " was interrupted (" + Describe(st) + ": " +
                              SignalName(WEXITSTATUS(st) - 128) + ")";
              }
              stop_all(SIGTERM);
            }
            continue;
          }
          if (RankFailed(st) && failed_at < 0) {
            int failed_rank = r.global;
            const std::string what = FailureOf(&r, st, MonotonicSeconds() - t_start, &failed_rank);
            if (!out.interrupted) {
              out.failed_rank = failed_rank;
              out.failed_status = st;
              out.failure_local = true;
            }
            int64_t n = 1;
            if (auto a = store_->Add(Key(attempt, "nfailed"), 1); a.ok()) n = *a;
            if (n == 1) (void)store_->Set(Key(attempt, "failed"), what);
            fail(what, ExitCodeOf(st));
          }
        }
      }
      // Another node's failure, or this node's interruption.
      if (failed_at < 0 && o_.nnodes > 1 && MonotonicSeconds() - last_check > 0.5) {
        last_check = MonotonicSeconds();
        auto f = store_->TryGet(Key(attempt, "failed"));
        if (!f.ok()) {
          fail("lost the rendezvous store at " + store_addr_ + " (" + f.status().message() + ")", 3);
        } else if (*f) {
          fail("another node's " + **f, 3);
        } else if (awaiting_leader) {
          auto d = store_->TryGet(Key(attempt, "done"));
          if (d.ok() && *d) awaiting_leader = false;  // the leader ended well; this node's daemons end with it
        }
      }
      if (StopRequested() && !out.interrupted) {
        out.interrupted = true;
        if (failed_at < 0) {
          failed_at = MonotonicSeconds();
          out.exit_code = 1;
          out.failure = "interrupted by " + StopReason();
        }
        stop_all(SIGTERM);
      }
      if (o_.kill && o_.kill->load() && !killed) {
        if (failed_at < 0) {
          failed_at = MonotonicSeconds();
          out.exit_code = 3;
          out.failure = "killed: the job was declared hung";
          out.interrupted = true;
        }
        killed = true;
        stop_all(SIGKILL);
      }
      if (failed_at >= 0 && !killed && MonotonicSeconds() - failed_at > o_.grace_s) {
        killed = true;
        stop_all(SIGKILL);
      }
      // mpirun's daemons outliving the job here: they get the grace, then SIGTERM, then SIGKILL.
      if (failed_at < 0 && !awaiting_leader && running > 0 && RanksDone(ranks)) {
        if (daemons_left_at < 0) daemons_left_at = MonotonicSeconds();
        const double late = MonotonicSeconds() - daemons_left_at;
        if (late > o_.grace_s && !daemons_termed) daemons_termed = true, stop_all(SIGTERM);
        if (late > 2 * o_.grace_s) stop_all(SIGKILL);
      }
    }
    for (Rank& r : ranks) {
      if (r.out_fd >= 0) ::close(r.out_fd);
      if (r.err_fd >= 0) ::close(r.err_fd);
    }
    if (failed_at < 0) {
      // Success here; node 0 keeps the store up until every node has finished too.
      (void)store_->Add(Key(attempt, "done"), 1);
      if (o_.node_rank == 0 && o_.nnodes > 1) {
        const double deadline = MonotonicSeconds() + o_.rendezvous_timeout_s;
        while (MonotonicSeconds() < deadline) {
          auto d = store_->TryGet(Key(attempt, "done"));
          auto f = store_->TryGet(Key(attempt, "failed"));
          if (!d.ok() || (*d && std::atoi((*d)->c_str()) >= o_.nnodes)) break;
          if (f.ok() && *f) {
            out.exit_code = 3;
            out.failure = "another node's " + **f;
            break;
          }
          std::this_thread::sleep_for(milliseconds(100));
        }
      }
    } else {
      // Summarise how every local rank ended.
      std::string how;
      for (const Rank& r : ranks) how += " rank " + std::to_string(r.global) + ": " + Describe(r.status) + ";";
      log_("anneal launch: attempt " + std::to_string(attempt) + (out.interrupted ? " interrupted —" : " failed —") + how);
      if (out.interrupted && !Leading()) {
        for (const Rank& r : ranks) {
          if (!r.last_line.empty()) {
            out.last_words = "rank " + std::to_string(r.global) + ": " + r.last_line;
            break;
          }
        }
      }
    }
    return out;
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

  // This node's local processes of an attempt: its ranks, or in mpirun/srun mode the leader (node 0)
  // or nothing (the other nodes).
  Result<std::vector<Rank>> StartRanks(int attempt, const std::string& hosts) {
    std::vector<Rank> ranks;
    if (!Leading()) {
      ranks.resize(o_.nproc_per_node);
      for (int l = 0; l < o_.nproc_per_node; ++l) {
        ranks[l].local = l;
        ranks[l].global = o_.node_rank * o_.nproc_per_node + l;
        ANNEAL_RETURN_IF_ERROR(Spawn(&ranks[l], attempt, hosts, o_.command));
      }
    } else if (o_.node_rank == 0) {
      ranks.resize(1);
      ANNEAL_ASSIGN_OR_RETURN(std::vector<std::string> argv, LeaderCommand(attempt));
      // A leader that starts its ranks through Slurm stays outside the sandbox (launch-rank enters it).
      const bool wrap = !(o_.mode == LaunchMode::kSrun || o_.under_slurm);
      ANNEAL_RETURN_IF_ERROR(Spawn(&ranks[0], attempt, hosts, argv, wrap));
      log_("anneal launch: attempt " + std::to_string(attempt) + ": " + LaunchModeName(o_.mode) + " starts " +
           std::to_string(o_.nnodes * o_.nproc_per_node) + " ranks: " + Joined(argv));
    }
    if (o_.on_started) o_.on_started(attempt);
    if (!ranks.empty() && !Leading()) {
      log_("anneal launch: attempt " + std::to_string(attempt) + ": started ranks " + std::to_string(ranks[0].global) +
           ".." + std::to_string(ranks.back().global) + " of " + std::to_string(o_.nnodes * o_.nproc_per_node) +
           " on node " + std::to_string(o_.node_rank) + " (" + host_ + "); store " + store_addr_);
    }
    return ranks;
  }

  static std::string Joined(const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& a : v) s += (s.empty() ? "" : " ") + a;
    return s;
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
  Status ServeRemote(RemoteExecQueue* q, int attempt, const std::string& hosts, std::vector<Rank>* ranks, int* running) {
    for (;;) {
      auto req = q->Poll();
      if (!req.ok() && req.status().code() == Code::kInvalidInput) {
        log_("anneal launch: " + req.status().message());
        continue;  // a forged request, answered 255
      }
      if (!req.ok()) return Status::Ok();  // a lost store is found by the failure check
      if (!*req) return Status::Ok();
      Rank r;
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

  // "rank 1 (node 0, pid 123) failed first: exit code 3 after 2.2 s". In mpirun/srun mode the process
  // that ended is the leader: its last lines are read first, for the rank it names (*rank).
  std::string FailureOf(Rank* r, int status, double after_s, int* rank) {
    const std::string after = " after " + std::to_string(static_cast<int>(after_s * 10) / 10.0).substr(0, 5) + " s";
    if (!Leading()) {
      return "rank " + std::to_string(r->global) + " (node " + std::to_string(o_.node_rank) + ", pid " +
             std::to_string(r->pid) + ") failed first: " + Describe(status) + after;
    }
    DrainLeader(r);
    const std::string leader = std::string(LaunchModeName(o_.mode)) + " (node 0, pid " + std::to_string(r->pid) + ")";
    if (leader_failed_rank_ < 0) return leader + " failed: " + Describe(status) + after;
    *rank = leader_failed_rank_;
    return "rank " + std::to_string(*rank) + " failed first (" + leader + " reported it); " +
           LaunchModeName(o_.mode) + " ended with " + Describe(status) + after;
  }

  // The leader has exited, so its pipes end as soon as they are drained: up to 5 s for a loaded
  // machine (the report naming the failed rank may be the last thing it wrote).
  void DrainLeader(Rank* r) {
    std::vector<Rank*> one = {r};
    for (const double until = MonotonicSeconds() + 5; (r->out_fd >= 0 || r->err_fd >= 0) && MonotonicSeconds() < until;) {
      PumpSome(one);
    }
  }

  // mpirun/srun mode: whether the leader that ended named a failed rank (srun exits 143 when it
  // terminated the other tasks after one failed: a failure, not an interruption). Always false for a
  // rank of anneal's own launcher.
  bool LeaderReportedAFailure(Rank* r) {
    if (!Leading()) return false;
    DrainLeader(r);
    return leader_failed_rank_ >= 0;
  }

  // Whether every rank (not a daemon run for launch-rsh) has ended.
  static bool RanksDone(const std::vector<Rank>& ranks) {
    for (const Rank& r : ranks) {
      if (r.running && r.remote_seq < 0) return false;
    }
    return true;
  }

  static bool AnyOpen(const std::vector<Rank>& ranks) {
    for (const Rank& r : ranks) {
      if (r.out_fd >= 0 || r.err_fd >= 0) return true;
    }
    return false;
  }

  // Reads what the ranks printed (up to 100 ms), forwarding whole lines with their prefix.
  void Pump(std::vector<Rank>* ranks) {
    std::vector<Rank*> all;
    for (Rank& r : *ranks) all.push_back(&r);
    PumpSome(all);
  }

  void PumpSome(const std::vector<Rank*>& ranks) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Rank*, bool>> who;  // (rank, is stderr)
    for (Rank* r : ranks) {
      if (r->out_fd >= 0) fds.push_back({r->out_fd, POLLIN, 0}), who.push_back({r, false});
      if (r->err_fd >= 0) fds.push_back({r->err_fd, POLLIN, 0}), who.push_back({r, true});
    }
    if (fds.empty()) {
      std::this_thread::sleep_for(milliseconds(50));
      return;
    }
    if (::poll(fds.data(), fds.size(), 100) <= 0) return;
    char buf[65536];
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      Rank* r = who[i].first;
      const bool err = who[i].second;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
      std::string& b = err ? r->err_buf : r->out_buf;
      if (n > 0) {
        b.append(buf, static_cast<size_t>(n));
        Emit(*r, err, &b, false);
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        Emit(*r, err, &b, true);
        ::close(fds[i].fd);
        (err ? r->err_fd : r->out_fd) = -1;
      }
    }
  }

  // Forwards buf's whole lines (all of it when flush_all) as rank r's, or as the rank the leader's tag
  // names; a daemon's lines go to the launcher's log.
  void Emit(Rank& r, bool err, std::string* buf, bool flush_all) {
    size_t start = 0;
    for (size_t nl; (nl = buf->find('\n', start)) != std::string::npos; start = nl + 1) {
      EmitLine(r, err, buf->substr(start, nl - start));
    }
    buf->erase(0, start);
    if (flush_all && !buf->empty()) {
      EmitLine(r, err, *buf);
      buf->clear();
    }
  }

  void EmitLine(Rank& r, bool err, const std::string& line) {
    if (!line.empty()) r.last_line = line;
    if (r.remote_seq >= 0) {
      log_("anneal launch: mpirun daemon " + std::to_string(r.remote_seq) + " on " + MyName() + ": " + line);
      return;
    }
    int rank = r.global;
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

  // The environment of local rank r (of the leader in mpirun/srun mode, of a daemon for launch-rsh).
  std::map<std::string, std::string> RankEnvironment(const Rank& r, int attempt, const std::string& hosts) const {
    std::map<std::string, std::string> env = ProcessEnvironment();
    // The launcher's own Slurm task (an agent's srun step) is not this rank: drop what describes that
    // task, so that a script reading SLURM_PROCID (as PyTorch Lightning does) cannot take it for its
    // rank; the job's and node's (SLURM_JOB_ID, SLURMD_NODENAME, ...) stay visible. mpirun reads the
    // allocation's shape from SLURM_TASKS_PER_NODE.
    for (const char* k : kSlurmTaskVars) env.erase(k);
    if (!Leading()) env.erase("SLURM_TASKS_PER_NODE");
    const int world = o_.nnodes * o_.nproc_per_node;
    env["RANK"] = std::to_string(r.global);
    env["LOCAL_RANK"] = std::to_string(r.local);
    env["WORLD_SIZE"] = std::to_string(world);
    env["LOCAL_WORLD_SIZE"] = std::to_string(o_.nproc_per_node);
    env["GROUP_RANK"] = std::to_string(o_.node_rank);
    env["ROLE_RANK"] = std::to_string(r.global);
    env["MASTER_ADDR"] = o_.master_addr;
    env["MASTER_PORT"] = std::to_string(o_.master_port);
    env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(attempt);
    env["ANNEAL_JOB"] = o_.job;
    env["ANNEAL_ATTEMPT"] = std::to_string(attempt);
    env["ANNEAL_STORE"] = store_addr_;
    env["ANNEAL_HOSTS"] = hosts;
    env["ANNEAL_CURRENT_HOST"] = host_;
    for (const auto& [k, v] : o_.extra_env) env[k] = v;
    if (o_.mode == LaunchMode::kMpirun && o_.under_slurm) env["SLURM_OVERLAP"] = "1";  // mpirun's srun of its daemons
    if (o_.mode == LaunchMode::kMpirun && !o_.under_slurm) env["ANNEAL_LAUNCH_KEY"] = exec_key_;  // for launch-rsh
    if (!env.count("OMP_NUM_THREADS")) {
      const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
      env["OMP_NUM_THREADS"] = std::to_string(std::max(1u, cores / static_cast<unsigned>(o_.nproc_per_node)));
    }
    if (!Leading() && ::access("/dev/nvidia0", F_OK) == 0) {
      // One GPU per local rank (an existing CUDA_VISIBLE_DEVICES list is indexed, not replaced).
      std::vector<std::string> ids;
      if (env.count("CUDA_VISIBLE_DEVICES")) {
        std::string s = env["CUDA_VISIBLE_DEVICES"];
        for (size_t p = 0, q; p <= s.size(); p = q + 1) {
          q = s.find(',', p);
          if (q == std::string::npos) q = s.size();
          ids.push_back(s.substr(p, q - p));
        }
      }
      env["CUDA_VISIBLE_DEVICES"] = r.local < static_cast<int>(ids.size()) ? ids[r.local] : std::to_string(r.local);
    }
    return env;
  }

  // Local rank r's share of the launcher's CPUs (*bind false: no pinning).
  void CpuShare(const Rank& r, cpu_set_t* mine, bool* bind) const {
    cpu_set_t all;
    CPU_ZERO(&all);
    CPU_ZERO(mine);
    *bind = false;
    if (Leading() || r.remote_seq >= 0 || ::sched_getaffinity(0, sizeof(all), &all) != 0) return;
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &all)) cpus.push_back(c);
    }
    const int share = static_cast<int>(cpus.size()) / o_.nproc_per_node;
    *bind = o_.cpu_bind == "auto" && share >= 1;
    for (int i = 0; *bind && i < share; ++i) CPU_SET(cpus[r.local * share + i], mine);
  }

  // mpirun mode: mpirun and each of its daemons get a TMPDIR of their own (under the one they would
  // have), where Open MPI makes its session directory. Several instances of one host (the local
  // backend's) otherwise share /tmp/ompi.HOST.UID and its daemons race creating it ("A call to mkdir
  // was unable to create the desired directory ... File exists"), failing the job at random.
  Status OwnTmpDir(Rank* r, std::map<std::string, std::string>* env) const {
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

  // wrap: inside the job's sandbox (LaunchOptions::wrap), when it has one.
  Status Spawn(Rank* r, int attempt, const std::string& hosts, std::vector<std::string> args, bool wrap = true) {
    std::map<std::string, std::string> env = RankEnvironment(*r, attempt, hosts);
    ANNEAL_RETURN_IF_ERROR(OwnTmpDir(r, &env));
    Status st = SpawnWith(r, env, std::move(args), wrap);
    if (!st.ok() && !r->tmp_dir.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(r->tmp_dir, ec);
      r->tmp_dir.clear();
    }
    return st;
  }

  Status SpawnWith(Rank* r, std::map<std::string, std::string>& env, std::vector<std::string> args, bool wrap) {
    cpu_set_t mine;
    bool bind = false;
    CpuShare(*r, &mine, &bind);
    std::vector<std::string> env_strings;
    for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
    std::vector<char*> envp, argv;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    // A bare program name is looked up in the ranks' PATH (execvpe would search the launcher's own).
    if (args[0].find('/') == std::string::npos && env.count("PATH")) {
      const std::string& path = env["PATH"];
      for (size_t p = 0, q; p <= path.size(); p = q + 1) {
        q = path.find(':', p);
        if (q == std::string::npos) q = path.size();
        const std::string cand = (q > p ? path.substr(p, q - p) : std::string(".")) + "/" + args[0];
        if (::access(cand.c_str(), X_OK) == 0) {
          args[0] = cand;
          break;
        }
      }
    }
    if (wrap) args.insert(args.begin(), o_.wrap.begin(), o_.wrap.end());
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);

    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return IoError(std::string("pipe: ") + std::strerror(errno));
    const pid_t launcher_pid = ::getpid();
    pid_t pid = ::fork();
    if (pid < 0) return IoError(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
      ::setpgid(0, 0);  // its own process group: signals reach the rank's children too
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the launcher
      if (::getppid() != launcher_pid) ::_exit(1);
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      if (!o_.workdir.empty() && ::chdir(o_.workdir.c_str()) != 0) {
        std::fprintf(stderr, "anneal launch: cannot enter the working directory %s: %s\n", o_.workdir.c_str(),
                     std::strerror(errno));
        ::_exit(127);
      }
      if (bind) ::sched_setaffinity(0, sizeof(mine), &mine);
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      sigaction(SIGTERM, &dfl, nullptr);
      sigaction(SIGINT, &dfl, nullptr);
      ::execvpe(argv[0], argv.data(), envp.data());
      std::fprintf(stderr, "anneal launch: cannot run '%s': %s\n", argv[0], std::strerror(errno));
      ::_exit(127);
    }
    ::setpgid(pid, pid);
    ::close(out[1]);
    ::close(err[1]);
    r->pid = pid;
    r->out_fd = out[0];
    r->err_fd = err[0];
    r->running = true;
    return Status::Ok();
  }

  const LaunchOptions& o_;
  const std::function<void(const std::string&)>& log_;
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
