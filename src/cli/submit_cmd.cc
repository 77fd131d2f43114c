// anneal submit: reads a job spec, packs and uploads its source folder, submits it and, with --wait
// or --local, follows it to its end (docs/job-spec.md, docs/api/openapi.yaml).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "cli/commands.h"
#include "cli/job_text.h"
#include "cli/target.h"
#include "control/api_client.h"
#include "control/job_spec.h"
#include "control/server.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/env.h"

namespace anneal::cli {

namespace {

using nlohmann::json;

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
