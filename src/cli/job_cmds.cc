// anneal submit | jobs | describe | logs | stop | metrics: the job CLI over the server's API
// (docs/api/openapi.yaml). Every command takes --server URL (default $ANNEAL_SERVER, else
// http://127.0.0.1:8470) or --local: an embedded server with the local backend in this process, on
// the data dir $ANNEAL_HOME/local (default ~/.anneal/local, or --data-dir).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>

#include "cli/commands.h"
#include "cli/target.h"
#include "control/api_client.h"
#include "control/job_spec.h"
#include "control/server.h"
#include "control/wire.h"
#include "core/env.h"
#include "core/crypto.h"

namespace anneal::cli {

namespace {

using nlohmann::json;

std::string Clock(double wall) { return wall > 0 ? FormatTime(wall).substr(11, 8) : "-"; }

std::string Duration(double s) {
  if (s < 0) return "-";
  char b[32];
  if (s < 60) {
    std::snprintf(b, sizeof(b), "%.1fs", s);
  } else if (s < 3600) {
    std::snprintf(b, sizeof(b), "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  } else {
    std::snprintf(b, sizeof(b), "%dh%02dm", static_cast<int>(s) / 3600, (static_cast<int>(s) / 60) % 60);
  }
  return b;
}

std::string LinePrefix(const json& x) {
  const int rank = x.value("rank", -1);
  if (rank < 0) return "[agent node " + std::to_string(x.value("node", 0)) + "] ";
  return "[rank " + std::to_string(rank) + "] ";
}

// The final status as the CLI's result: Completed -> ok; Failed -> the job's exit class; Stopped -> 1.
Status JobOutcome(const json& j) {
  const std::string status = j.value("status", std::string());
  const std::string id = j.value("id", std::string());
  if (status == "Completed") return Status::Ok();
  if (status == "Failed") {
    const int code = j.value("exit_code", 1);
    const std::string m = "job " + id + " failed: " + j.value("failure_reason", std::string("(no reason recorded)")) +
                          "\nsee 'anneal describe " + id + "' and 'anneal logs " + id + "'";
    if (code == 2) return InvalidInput(m);
    if (code == 3) return PeerError(m);
    return Internal(m);
  }
  return Cancelled("job " + id + " ended " + status + " (" + j.value("secondary_status", std::string()) + ")");
}

// Prints status changes (stderr) and, unless quiet, the job's log lines (stdout) until it ends.
Result<json> WaitJob(ApiClient* c, const std::string& id, bool quiet) {
  size_t shown = 0;
  int64_t after = 0;
  json j;
  for (int idle_after_end = 0;;) {
    ANNEAL_ASSIGN_OR_RETURN(j, c->Get("/v1/jobs/" + id));
    const json& hist = j["history"];
    for (; shown < hist.size(); ++shown) {
      const json& h = hist[shown];
      std::fprintf(stderr, "[%s] %s: %s\n", Clock(h.value("at", 0.0)).c_str(),
                   h.value("secondary_status", std::string()).c_str(), h.value("message", std::string()).c_str());
    }
    std::fflush(stderr);
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
    const std::string s = j.value("status", std::string());
    const bool ended = s == "Completed" || s == "Failed" || s == "Stopped";
    // After the end, lines still in flight from the agents get a moment to arrive.
    if (ended && (quiet || (got == 0 && ++idle_after_end >= 3))) return j;
    std::this_thread::sleep_for(std::chrono::milliseconds(ended ? 500 : 1000));
  }
}

// ---- submit ----

struct SubmitOptions {
  std::string file;
  std::vector<std::string> hyperparameters;  // k=v, over the spec's
  bool wait = false, quiet = false;
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
    std::this_thread::sleep_for(std::chrono::duration<double>(backoff));
    backoff = std::min(backoff * 2, 2.0);
  }
}

Result<std::string> PackSource(const std::string& dir) {
  if (!Env::Default().IsDirectory(dir)) {
    return InvalidInput("source: '" + dir + "' is not a folder; give the folder whose files the ranks run from");
  }
  const std::string tmp = JoinPath(std::filesystem::temp_directory_path().string(),
                                   "anneal-source-" + std::to_string(::getpid()) + ".tar.gz");
  const std::string cmd = "tar -czf '" + tmp + "' --exclude=.git -C '" + dir + "' .";
  if (std::system(cmd.c_str()) != 0) return IoError("packing the source folder " + dir + " with tar failed");
  auto data = Env::Default().ReadFile(tmp);
  (void)Env::Default().Remove(tmp);
  return data;
}

Status RunSubmit(const SubmitOptions& o) {
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
  // Plain relative paths in the spec are relative to the spec file, like source.
  const std::filesystem::path spec_dir = std::filesystem::absolute(std::filesystem::path(o.file)).parent_path();
  auto absolute = [&](std::string* uri) {
    if (uri->empty() || uri->find("://") != std::string::npos || (*uri)[0] == '/') return;
    *uri = (spec_dir / *uri).lexically_normal().string();
  };
  for (ChannelSpec& c : spec.channels) absolute(&c.uri);
  absolute(&spec.checkpoint_uri);
  absolute(&spec.output_uri);
  ANNEAL_ASSIGN_OR_RETURN(Connection conn, Connect(o.target, true));
  if (!spec.source.empty()) {
    std::filesystem::path src(spec.source);
    if (src.is_relative()) src = spec_dir / src;
    ANNEAL_ASSIGN_OR_RETURN(std::string pkg, PackSource(src.lexically_normal().string()));
    std::fprintf(stderr, "packed source %s: %.1f KB\n", src.lexically_normal().c_str(), pkg.size() / 1024.0);
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
  auto final_state = WaitJob(conn.client.get(), id, o.quiet);
  if (conn.embedded) {
    conn.embedded->Drain(spec.grace_period_s + 30);
    conn.embedded->Stop();
  }
  if (!final_state.ok()) return final_state.status();
  std::fprintf(stderr, "job %s: %s (%s) in %s\n", id.c_str(), final_state->value("status", std::string()).c_str(),
               final_state->value("secondary_status", std::string()).c_str(),
               Duration(final_state->value("ended_at", 0.0) - final_state->value("created_at", 0.0)).c_str());
  return JobOutcome(*final_state);
}

// ---- jobs / describe / logs / stop / metrics ----

Status RunJobs(const Target& t, int limit, bool active, bool as_json) {
  ANNEAL_ASSIGN_OR_RETURN(Connection conn, Connect(t, false));
  ANNEAL_ASSIGN_OR_RETURN(json r, conn.client->Get("/v1/jobs?limit=" + std::to_string(limit) + (active ? "&active=1" : "")));
  if (as_json) {
    std::printf("%s\n", r.dump(2).c_str());
    return Status::Ok();
  }
  std::printf("%-28s %-11s %-19s %9s %-8s %9s\n", "ID", "STATUS", "SECONDARY", "INSTANCES", "CREATED", "DURATION");
  const double now = WallSeconds();
  for (const json& j : r["jobs"]) {
    const double start = j.value("created_at", 0.0), end = j.value("ended_at", 0.0);
    std::printf("%-28s %-11s %-19s %9d %-8s %9s\n", j.value("id", std::string()).c_str(),
                j.value("status", std::string()).c_str(), j.value("secondary_status", std::string()).c_str(),
                j.value("instance_count", 1), Clock(start).c_str(), Duration((end > 0 ? end : now) - start).c_str());
  }
  return Status::Ok();
}

Status RunDescribe(const Target& t, const std::string& id, bool as_json) {
  ANNEAL_ASSIGN_OR_RETURN(Connection conn, Connect(t, false));
  ANNEAL_ASSIGN_OR_RETURN(json j, conn.client->Get("/v1/jobs/" + id));
  if (as_json) {
    std::printf("%s\n", j.dump(2).c_str());
    return Status::Ok();
  }
  std::printf("Job:            %s\n", j.value("id", std::string()).c_str());
  std::printf("Status:         %s / %s\n", j.value("status", std::string()).c_str(),
              j.value("secondary_status", std::string()).c_str());
  std::printf("Attempt:        %d\n", j.value("attempt", 0));
  std::printf("Created:        %s\n", FormatTime(j.value("created_at", 0.0)).c_str());
  if (j.value("started_at", 0.0) > 0) std::printf("Started:        %s\n", FormatTime(j.value("started_at", 0.0)).c_str());
  if (j.value("ended_at", 0.0) > 0) {
    std::printf("Ended:          %s (exit code %d)\n", FormatTime(j.value("ended_at", 0.0)).c_str(), j.value("exit_code", -1));
  }
  if (!j.value("failure_reason", std::string()).empty()) {
    std::printf("Failure reason: %s\n", j.value("failure_reason", std::string()).c_str());
  }
  const json& spec = j["spec"];
  std::string cmd = spec["entrypoint"]["command"].is_string() ? spec["entrypoint"]["command"].get<std::string>() : "";
  if (spec["entrypoint"]["command"].is_array()) {
    for (const json& a : spec["entrypoint"]["command"]) cmd += (cmd.empty() ? "" : " ") + a.get<std::string>();
  }
  std::printf("Command:        %s\n", cmd.c_str());
  std::printf("Resources:      %d x %s, %d rank(s) each\n", spec["resources"].value("instance_count", 1),
              spec["resources"].value("instance_type", std::string()).c_str(), spec["resources"].value("procs_per_instance", 1));
  std::printf("\nHistory:\n");
  for (const json& h : j["history"]) {
    std::printf("  %s  %-19s %s\n", FormatTime(h.value("at", 0.0)).c_str(), h.value("secondary_status", std::string()).c_str(),
                h.value("message", std::string()).c_str());
  }
  if (!j["instances"].empty()) {
    std::printf("\nInstances:\n");
    for (const json& i : j["instances"]) {
      std::printf("  node %d  %-28s %-15s %-9s last heartbeat %s\n", i.value("node", -1), i.value("id", std::string()).c_str(),
                  i.value("address", std::string()).c_str(), i.value("state", std::string()).c_str(),
                  Clock(i.value("last_heartbeat", 0.0)).c_str());
    }
  }
  if (!j["nodes"].empty()) {
    std::printf("\nNodes (attempt %d):\n", j.value("attempt", 0));
    for (const json& n : j["nodes"]) {
      std::string msg = n.value("message", std::string());
      if (msg.size() > 100) msg = msg.substr(0, 100) + "...";
      std::printf("  node %d  %-11s exit %3d  %s\n", n.value("node", 0), n.value("state", std::string()).c_str(),
                  n.value("exit_code", -1), msg.c_str());
    }
  }
  if (!j["slowest_ranks"].empty()) {
    std::printf("\nSlowest ranks (mean step time):\n");
    for (const json& r : j["slowest_ranks"]) {
      std::printf("  rank %-4d %8.1f ms over %lld steps\n", r.value("rank", 0), 1e3 * r.value("mean_step_s", 0.0),
                  static_cast<long long>(r.value("steps", 0)));
    }
  }
  return Status::Ok();
}

Status RunLogs(const Target& t, const std::string& id, bool follow, int rank) {
  ANNEAL_ASSIGN_OR_RETURN(Connection conn, Connect(t, false));
  int64_t after = 0;
  for (int quiet_after_end = 0;;) {
    std::string q = "/v1/jobs/" + id + "/logs?after=" + std::to_string(after) + "&limit=5000";
    if (rank >= -1) q += "&rank=" + std::to_string(rank);
    ANNEAL_ASSIGN_OR_RETURN(json page, conn.client->Get(q));
    for (const json& x : page["lines"]) std::printf("%s%s\n", LinePrefix(x).c_str(), x.value("text", std::string()).c_str());
    std::fflush(stdout);
    after = page.value("next", after);
    if (page["lines"].size() == 5000) continue;
    if (!follow) return Status::Ok();
    if (page.value("job_done", false) && page["lines"].empty() && ++quiet_after_end >= 3) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(page.value("job_done", false) ? 500 : 1000));
  }
}

Status RunStop(const Target& t, const std::string& id, bool requeue) {
  ANNEAL_ASSIGN_OR_RETURN(Connection conn, Connect(t, false));
  ANNEAL_ASSIGN_OR_RETURN(json j, conn.client->Post("/v1/jobs/" + id + "/stop", requeue ? json{{"requeue", true}} : json::object()));
  std::printf("%s: %s (%s)\n", id.c_str(), j.value("status", std::string()).c_str(),
              j.value("secondary_status", std::string()).c_str());
  return Status::Ok();
}

Status RunMetrics(const Target& t, const std::string& id, const std::string& name, bool as_json) {
  ANNEAL_ASSIGN_OR_RETURN(Connection conn, Connect(t, false));
  json all = json::array();
  int64_t after = 0;
  for (;;) {
    std::string q = "/v1/jobs/" + id + "/metrics?after=" + std::to_string(after) + "&limit=100000";
    if (!name.empty()) q += "&name=" + name;
    ANNEAL_ASSIGN_OR_RETURN(json page, conn.client->Get(q));
    for (json& p : page["points"]) all.push_back(std::move(p));
    if (page["points"].size() < 100000) break;
    after = page.value("next", after);
  }
  if (as_json) {
    std::printf("%s\n", json({{"job", id}, {"points", all}}).dump(2).c_str());
    return Status::Ok();
  }
  struct Agg {
    double last = 0, sum = 0, min = INFINITY, max = -INFINITY;
    int64_t n = 0;
  };
  std::map<std::pair<std::string, int>, Agg> agg;
  for (const json& p : all) {
    Agg& a = agg[{p.value("name", std::string()), p.value("rank", -1)}];
    const double v = p.value("value", 0.0);
    a.last = v;
    a.sum += v;
    a.min = std::min(a.min, v);
    a.max = std::max(a.max, v);
    ++a.n;
  }
  std::printf("%-26s %-6s %12s %12s %12s %12s %7s\n", "NAME", "RANK", "LAST", "MEAN", "MIN", "MAX", "COUNT");
  for (const auto& [key, a] : agg) {
    std::printf("%-26s %-6s %12.6g %12.6g %12.6g %12.6g %7lld\n", key.first.c_str(),
                key.second < 0 ? "node" : std::to_string(key.second).c_str(), a.last, a.sum / a.n, a.min, a.max,
                static_cast<long long>(a.n));
  }
  return Status::Ok();
}

}  // namespace

void AddJobCommands(CLI::App& app, RunFn* run) {
  {
    auto o = std::make_shared<SubmitOptions>();
    CLI::App* c = app.add_subcommand(
        "submit",
        "Submit a job spec (YAML or JSON, docs/job-spec.md): packs its source folder, uploads it, prints the job id.\n"
        "Example: anneal submit examples/jobs/kjv_tiny.yaml --local   (runs it here and waits)");
    c->add_option("spec", o->file, "The job spec file")->required()->check(CLI::ExistingFile);
    c->add_flag("--wait", o->wait, "Wait for the job to end, printing its status changes and logs; exit with its outcome");
    c->add_flag("--quiet", o->quiet, "With --wait: status changes only, no log lines");
    c->add_option("-H,--hyperparameter", o->hyperparameters, "KEY=VALUE over the spec's entrypoint.hyperparameters (repeatable)");
    c->add_option("--idempotency-key", o->idempotency_key,
                  "The submit's key (default: a random one): submitting again with the same key returns the job it "
                  "created instead of a second one (letters, digits, -_.:, at most 200)");
    c->add_option("--retry-s", o->retry_s, "Retry a submit that got no answer (or a 5xx) for this long, with the same key")
        ->capture_default_str();
    AddTargetOptions(c, &o->target, true);
    c->callback([run, o] { *run = [o] { return RunSubmit(*o); }; });
  }
  {
    auto t = std::make_shared<Target>();
    auto limit = std::make_shared<int>(50);
    auto active = std::make_shared<bool>(false);
    auto as_json = std::make_shared<bool>(false);
    CLI::App* c = app.add_subcommand("jobs", "List jobs, newest first.\nExample: anneal jobs --active");
    c->add_option("--limit", *limit, "How many")->capture_default_str();
    c->add_flag("--active", *active, "Only jobs not yet ended");
    c->add_flag("--json", *as_json, "The API's JSON instead of a table");
    AddTargetOptions(c, t.get(), false);
    c->callback([run, t, limit, active, as_json] { *run = [=] { return RunJobs(*t, *limit, *active, *as_json); }; });
  }
  {
    auto t = std::make_shared<Target>();
    auto id = std::make_shared<std::string>();
    auto as_json = std::make_shared<bool>(false);
    CLI::App* c = app.add_subcommand(
        "describe", "Show a job: status, history, instances, failure reason, slowest ranks.\nExample: anneal describe kjv-0001");
    c->add_option("id", *id, "Job id")->required();
    c->add_flag("--json", *as_json, "The API's JSON");
    AddTargetOptions(c, t.get(), false);
    c->callback([run, t, id, as_json] { *run = [=] { return RunDescribe(*t, *id, *as_json); }; });
  }
  {
    auto t = std::make_shared<Target>();
    auto id = std::make_shared<std::string>();
    auto follow = std::make_shared<bool>(false);
    auto rank = std::make_shared<int>(-2);
    CLI::App* c = app.add_subcommand("logs", "Print a job's log lines (every rank, in order).\nExample: anneal logs kjv-0001 -f --rank 0");
    c->add_option("id", *id, "Job id")->required();
    c->add_flag("-f,--follow", *follow, "Keep printing new lines until the job ends");
    c->add_option("--rank", *rank, "Only this rank's lines (-1: the agents' own)");
    AddTargetOptions(c, t.get(), false);
    c->callback([run, t, id, follow, rank] { *run = [=] { return RunLogs(*t, *id, *follow, *rank); }; });
  }
  {
    auto t = std::make_shared<Target>();
    auto id = std::make_shared<std::string>();
    auto requeue = std::make_shared<bool>(false);
    CLI::App* c = app.add_subcommand(
        "stop", "Stop a job: its ranks get SIGTERM, then SIGKILL after stopping.grace_period_s.\n"
                "With --requeue the job is interrupted instead: its ranks checkpoint, and it resumes as a new attempt\n"
                "from that checkpoint on fresh instances (not counted against retry.max_attempts).\n"
                "Example: anneal stop kjv-0001");
    c->add_option("id", *id, "Job id")->required();
    c->add_flag("--requeue", *requeue, "Interrupt and resume the job (pre-emption by hand) instead of stopping it");
    AddTargetOptions(c, t.get(), false);
    c->callback([run, t, id, requeue] { *run = [=] { return RunStop(*t, *id, *requeue); }; });
  }
  {
    auto t = std::make_shared<Target>();
    auto id = std::make_shared<std::string>();
    auto name = std::make_shared<std::string>();
    auto as_json = std::make_shared<bool>(false);
    CLI::App* c = app.add_subcommand(
        "metrics", "A job's metrics per name and rank (last, mean, min, max), or every point as JSON.\nExample: anneal metrics kjv-0001");
    c->add_option("id", *id, "Job id")->required();
    c->add_option("--name", *name, "Only this metric");
    c->add_flag("--json", *as_json, "Every point as JSON");
    AddTargetOptions(c, t.get(), false);
    c->callback([run, t, id, name, as_json] { *run = [=] { return RunMetrics(*t, *id, *name, *as_json); }; });
  }
}

}  // namespace anneal::cli
