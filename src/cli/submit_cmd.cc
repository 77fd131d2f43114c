// anneal submit: reads a job spec, packs and uploads its source folder, submits it and, with --wait
// or --local, follows it to its end (docs/job-spec.md, docs/api/openapi.yaml).
//
// Ctrl-C (SIGINT, or SIGTERM) while following a job: with --local, whose server lives in this process,
// the first stops the job with its grace period (the ranks checkpoint) and waits for it; a second
// detaches at once, the job's agent stopping its ranks when it finds the server gone. With --wait on
// a server, the first detaches: the job runs on. Either way the exit code is 128 + the signal.
#include <unistd.h>

#include <atomic>
#include <csignal>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "cli/commands.h"
#include "cli/job_text.h"
#include "cli/target.h"
#include "protocol/api_client.h"
#include "protocol/job_definition.h"
#include "control/server.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/env.h"

namespace anneal::cli {

namespace {

using nlohmann::json;

std::atomic<int> g_signals{0}, g_last_signal{0};
extern "C" void OnSubmitSignal(int sig) {
  g_last_signal.store(sig);
  g_signals.fetch_add(1);
}

// SIGINT and SIGTERM counted from now on instead of ending the process (the default again once done).
struct SignalCounter {
  SignalCounter() {
    struct sigaction sa {};
    sa.sa_handler = OnSubmitSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
  }
  ~SignalCounter() {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
  }
  struct sigaction old_int {}, old_term {};
};

// The words for an exit cause (protocol/exit_cause.h) in a failure's first line.
std::string CauseWords(const std::string& cause) {
  if (cause == "user_error") return "user error";
  if (cause == "out_of_memory") return "out of memory";
  if (cause == "max_runtime") return "stopping.max_runtime_s reached";
  if (cause.empty()) return "";
  return cause;  // infrastructure, stopped, interrupted
}

// The final status as the CLI's result: Completed -> ok; Failed -> the job's exit class (2 bad input,
// 3 infrastructure, else 1), named as the job's failure and its cause, never as anneal's own;
// Stopped -> 1. hint_flags: what the hint's commands need to reach the same server ("--local").
Status JobOutcome(const json& j, const std::string& hint_flags) {
  const std::string status = j.value("status", std::string());
  const std::string id = j.value("id", std::string());
  if (status == "Completed") return Status::Ok();
  const std::string see = "\nsee 'anneal describe " + id + hint_flags + "' and 'anneal logs " + id + hint_flags + "'";
  if (status == "Failed") {
    std::string cause;
    for (const json& n : j.value("nodes", json::array())) {
      if (!n.value("cause", std::string()).empty() && (cause.empty() || n.value("local", false))) {
        cause = n.value("cause", std::string());
        if (n.value("local", false)) break;
      }
    }
    const std::string words = CauseWords(cause);
    const int code = j.value("exit_code", 1);
    const std::string m = "job " + id + " failed" + (words.empty() ? "" : " (" + words + ")") + ": " +
                          j.value("failure_reason", std::string("(no reason recorded)")) + see;
    if (code == 2) return InvalidInput(m);
    if (code == 3) return PeerError(m);
    return Failed(m);
  }
  return Cancelled("job " + id + " ended " + status + " (" + j.value("secondary_status", std::string()) + ")" + see);
}

// What a Ctrl-C while following a job does (see the file's comment).
struct FollowSignals {
  bool local = false;      // the server is this process's: the first signal stops the job
  double grace_s = 30;     // the job's stopping.grace_period_s, for the message
  std::string url;         // where the job runs, for the detach message
  int handled = 0;         // signals acted on so far
  bool detached = false;   // stop following now
  bool stop_sent = false;
};

// Acts on the signals counted since the last call: stop the job (local, first), or detach.
void OnSignals(ApiClient* c, const std::string& id, FollowSignals* f) {
  const int n = g_signals.load();
  if (n <= f->handled) return;
  f->handled = n;
  const std::string sig = SignalName(g_last_signal.load());
  if (f->local && !f->stop_sent) {
    f->stop_sent = true;
    auto r = c->Post("/v1/jobs/" + id + "/stop", json::object());
    if (!r.ok()) {
      std::fprintf(stderr, "anneal submit: %s: could not stop job %s: %s\n", sig.c_str(), id.c_str(), r.status().message().c_str());
    }
    std::fprintf(stderr,
                 "anneal submit: %s: stopping job %s: its ranks get SIGTERM and save a checkpoint (within "
                 "stopping.grace_period_s, %.0f s); press Ctrl-C again to detach\n",
                 sig.c_str(), id.c_str(), f->grace_s);
    if (n == 1) return;
  }
  f->detached = true;
  if (f->local) {
    std::fprintf(stderr,
                 "anneal submit: detached from job %s, still stopping: its agent stops the ranks (SIGKILL after the "
                 "grace period) and, finding this server gone, exits; see 'anneal describe %s --local'\n",
                 id.c_str(), id.c_str());
  } else {
    std::fprintf(stderr,
                 "anneal submit: detached; job %s keeps running on %s: follow it with 'anneal logs %s -f', stop it "
                 "with 'anneal stop %s'\n",
                 id.c_str(), f->url.c_str(), id.c_str(), id.c_str());
  }
}

// Sleeps up to s seconds, less when a signal arrives.
void Nap(double s) {
  const int seen = g_signals.load();
  for (double t = 0; t < s && g_signals.load() == seen; t += 0.1) Clock::Real().SleepFor(0.1);
}

// Prints status changes (stderr) and, unless quiet, the job's log lines (stdout) until it ends or
// the user detaches (f->detached). The job's last lines come before its final status: once it has
// ended, lines still in flight from the agents get three quiet rounds to arrive first.
Result<json> WaitJob(ApiClient* c, const std::string& id, bool quiet, FollowSignals* f) {
  size_t shown = 0;
  int64_t after = 0;
  json j;
  auto print_history = [&](size_t upto) {
    const json& hist = j["history"];
    for (; shown < std::min(upto, hist.size()); ++shown) {
      const json& h = hist[shown];
      std::fprintf(stderr, "[%s] %s: %s\n", Clock(h.value("at", 0.0)).c_str(),
                   h.value("secondary_status", std::string()).c_str(), h.value("message", std::string()).c_str());
    }
    std::fflush(stderr);
  };
  for (int idle_after_end = 0;;) {
    OnSignals(c, id, f);
    if (f->detached) return j;
    ANNEAL_ASSIGN_OR_RETURN(j, c->Get("/v1/jobs/" + id));
    const std::string s = j.value("status", std::string());
    const bool ended = s == "Completed" || s == "Failed" || s == "Stopped";
    // Until the end has been seen and the last lines are in, the final entry waits.
    const size_t n = j["history"].size();
    print_history(ended && n > 0 ? n - 1 : n);
    size_t got = 0;
    if (!quiet) {
      for (;;) {
        ANNEAL_ASSIGN_OR_RETURN(json page, c->Get("/v1/jobs/" + id + "/logs?after=" + std::to_string(after) + "&limit=5000"));
        for (const json& x : page["lines"]) std::printf("%s%s\n", LinePrefix(x).c_str(), x.value("text", std::string()).c_str());
        std::fflush(stdout);
        after = page.value("next", after);
        got += page["lines"].size();
        if (page["lines"].size() < 5000) break;
      }
    }
    if (ended && (quiet || (got == 0 && ++idle_after_end >= 3))) {
      print_history(n);
      return j;
    }
    Nap(ended ? 0.5 : 1.0);
  }
}

// ---- submit ----

struct SubmitOptions {
  std::string file;
  std::vector<std::string> hyperparameters;  // k=v, over the spec's
  std::vector<std::string> env;              // K=V, over the spec's environment
  int instances = 0;                         // > 0: over resources.instance_count
  bool wait = false, quiet = false, dry_run = false;
  std::string idempotency_key;  // "" = a random one
  double retry_s = 20;          // how long a submit with no answer is retried
  Target target;
};

// POST /v1/jobs with the submit's idempotency key, retried while the server gives no answer (down,
// restarting, the connection cut) or a 5xx, for up to retry_s: a retry after a lost answer gets the
// job the first try created (200), never a second one.
Result<json> PostJob(ApiClient* c, const json& spec, const std::string& key, double retry_s) {
  const double deadline = WallSeconds() + retry_s;
  double backoff = 0.2;
  for (int tries = 1;; ++tries) {
    auto r = c->PostRaw("/v1/jobs", spec.dump(), "application/json", {{"Idempotency-Key", key}});
    if (r.ok() || r.status().code() != Code::kPeer) return r;
    if (WallSeconds() + backoff > deadline) {
      return r.status().Annotate("submitting (" + std::to_string(tries) + " tries in " +
                                 std::to_string(static_cast<int>(retry_s)) + " s, --retry-s)");
    }
    if (tries == 1) {
      std::fprintf(stderr, "anneal submit: %s; retrying for up to %.0f s with idempotency key %s\n",
                   r.status().message().c_str(), retry_s, key.c_str());
    }
    Clock::Real().SleepFor(backoff);
    backoff = std::min(backoff * 2, 2.0);
  }
}

Status CheckSourceFolder(const std::string& dir) {
  if (Env::Default().IsDirectory(dir)) return Status::Ok();
  return InvalidInput("source: '" + dir + "' is not a folder; give the folder whose files the ranks run from");
}

Result<std::string> PackSource(const std::string& dir) {
  ANNEAL_RETURN_IF_ERROR(CheckSourceFolder(dir));
  const std::string tmp = JoinPath(std::filesystem::temp_directory_path().string(),
                                   "anneal-source-" + std::to_string(::getpid()) + ".tar.gz");
  const std::string cmd = "tar -czf '" + tmp + "' --exclude=.git -C '" + dir + "' .";
  if (std::system(cmd.c_str()) != 0) return IoError("packing the source folder " + dir + " with tar failed");
  auto data = Env::Default().ReadFile(tmp);
  (void)Env::Default().Remove(tmp);
  return data;
}

// The spec file with the command line's overrides (-H, --env, --instances) checked as the spec's own
// fields are, and plain relative paths made relative to the spec file, as source is.
Result<JobSpec> ResolveSpec(const SubmitOptions& o, std::string* source_dir) {
  ANNEAL_ASSIGN_OR_RETURN(std::string text, Env::Default().ReadFile(o.file));
  std::string field;
  auto parsed = ParseJobSpec(text, &field);
  if (!parsed.ok()) return InvalidInput(o.file + ": " + parsed.status().message());
  JobSpec spec = *parsed;
  for (const std::string& kv : o.hyperparameters) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidInput("--hyperparameter '" + kv + "' must be KEY=VALUE, e.g. -H train.steps=100");
    }
    spec.hyperparameters[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const std::string& kv : o.env) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return InvalidInput("--env '" + kv + "' must be KEY=VALUE, e.g. --env OMP_NUM_THREADS=4");
    spec.environment[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (o.instances > 0) spec.instance_count = o.instances;
  if (!o.env.empty() || o.instances > 0) {
    std::string f;
    auto again = JobSpecFromJson(spec.ToJson(), &f);
    if (!again.ok()) return InvalidInput("--env/--instances: " + again.status().message());
  }
  const std::filesystem::path spec_dir = std::filesystem::absolute(std::filesystem::path(o.file)).parent_path();
  auto absolute = [&](std::string* uri) {
    if (uri->empty() || uri->find("://") != std::string::npos || (*uri)[0] == '/') return;
    *uri = (spec_dir / *uri).lexically_normal().string();
  };
  for (ChannelSpec& c : spec.channels) absolute(&c.uri);
  absolute(&spec.checkpoint_uri);
  absolute(&spec.output_uri);
  *source_dir = spec.source.empty() ? "" : (spec_dir / spec.source).lexically_normal().string();
  return spec;
}

Status PrintDryRun(const SubmitOptions& o, JobSpec spec, const std::string& source_dir) {
  if (!spec.source.empty()) {
    ANNEAL_RETURN_IF_ERROR(CheckSourceFolder(source_dir));
    spec.source = source_dir;
  }
  std::printf("%s\n", spec.ToJson().dump(2).c_str());
  std::fprintf(stderr,
               "dry run: %s is a valid job spec (above, resolved); nothing was submitted. The server's own checks "
               "(capacity, quotas, the execution role) run at a real submit.\n",
               o.file.c_str());
  return Status::Ok();
}

// Follows a submitted job to its end (or the user's detaching) and says how it ended.
Status FollowSubmitted(Connection& conn, const JobSpec& spec, const std::string& id, const SubmitOptions& o) {
  SignalCounter counting;
  FollowSignals f;
  f.local = o.target.local;
  f.grace_s = spec.grace_period_s;
  f.url = conn.client->url();
  auto final_state = WaitJob(conn.client.get(), id, o.quiet, &f);
  if (conn.embedded) {
    // Detached: the agents are left to find the server gone. Otherwise they report their end first.
    if (!f.detached) conn.embedded->Drain(spec.grace_period_s + 30);
    conn.embedded->Stop();
  }
  if (!final_state.ok()) return final_state.status();
  const int sig = g_last_signal.load();
  if (f.detached) return Interrupted(sig, "by " + SignalName(sig) + "; detached from job " + id);
  const json& j = *final_state;
  std::fprintf(stderr, "job %s: %s (%s), exit code %d, in %s\n", id.c_str(), j.value("status", std::string()).c_str(),
               j.value("secondary_status", std::string()).c_str(), j.value("exit_code", -1),
               Duration(j.value("ended_at", 0.0) - j.value("created_at", 0.0)).c_str());
  if (f.stop_sent && j.value("status", std::string()) == "Stopped") {
    return Interrupted(sig, "by " + SignalName(sig) + ": job " + id + " stopped; its ranks saved a checkpoint if they " +
                                "could: submit the spec again to resume from " +
                                (spec.checkpoint_uri.empty() ? std::string("it") : spec.checkpoint_uri));
  }
  return JobOutcome(j, o.target.local ? " --local" : "");
}

Status RunSubmit(const SubmitOptions& o) {
  std::string source_dir;
  ANNEAL_ASSIGN_OR_RETURN(JobSpec spec, ResolveSpec(o, &source_dir));
  if (o.dry_run) return PrintDryRun(o, spec, source_dir);
  ANNEAL_ASSIGN_OR_RETURN(Connection conn, Connect(o.target, true));
  if (!spec.source.empty()) {
    ANNEAL_ASSIGN_OR_RETURN(std::string pkg, PackSource(source_dir));
    std::fprintf(stderr, "packed source %s: %.1f KB\n", source_dir.c_str(), pkg.size() / 1024.0);
    ANNEAL_ASSIGN_OR_RETURN(json up, conn.client->PostRaw("/v1/packages", pkg, "application/gzip",
                                                           {{"X-Anneal-Sha256", Sha256Hex(pkg)}}));
    spec.source = up["package"].get<std::string>();
  }
  const std::string key = o.idempotency_key.empty() ? RandomHex(16) : o.idempotency_key;
  auto posted = PostJob(conn.client.get(), spec.ToJson(), key, o.retry_s);
  if (!posted.ok()) return posted.status().Annotate(o.file);
  const std::string id = (*posted)["id"].get<std::string>();
  std::printf("%s\n", id.c_str());
  std::fflush(stdout);
  if (!o.wait && !o.target.local) return Status::Ok();
  return FollowSubmitted(conn, spec, id, o);
}

}  // namespace

void AddSubmitCommand(CLI::App& app, RunFn* run) {
  {
    auto o = std::make_shared<SubmitOptions>();
    CLI::App* c = app.add_subcommand(
        "submit",
        "Submit a job spec (YAML or JSON, docs/job-spec.md): packs its source folder, uploads it, prints the job id.\n"
        "Example: anneal submit examples/jobs/kjv_tiny.yaml --local   (runs it here and waits)");
    c->add_option("spec", o->file, "The job spec file")->required()->check(CLI::ExistingFile);
    c->add_flag("--wait", o->wait, "Wait for the job to end, printing its status changes and logs; exit with its outcome");
    c->add_flag("--quiet", o->quiet, "With --wait: status changes only, no log lines");
    c->add_flag("--dry-run", o->dry_run, "Check the spec (and the overrides), print it resolved as JSON, submit nothing");
    c->add_option("--instances", o->instances, "Over resources.instance_count")->check(CLI::PositiveNumber);
    c->add_option("-e,--env", o->env, "KEY=VALUE over the spec's environment (repeatable)");
    c->add_option("-H,--hyperparameter", o->hyperparameters, "KEY=VALUE over the spec's entrypoint.hyperparameters (repeatable)");
    c->add_option("--idempotency-key", o->idempotency_key,
                  "The submit's key (default: a random one): submitting again with the same key returns the job it "
                  "created instead of a second one (letters, digits, -_.:, at most 200)");
    c->add_option("--retry-s", o->retry_s, "Retry a submit that got no answer (or a 5xx) for this long, with the same key")
        ->capture_default_str();
    AddTargetOptions(c, &o->target, true);
    c->callback([run, o] { *run = [o] { return RunSubmit(*o); }; });
  }
}

}  // namespace anneal::cli
