// anneal jobs | describe | logs | stop | metrics: the job CLI over the server's API
// (docs/api/openapi.yaml); submit is submit_cmd.cc. Every command takes --server URL (default $ANNEAL_SERVER, else
// http://127.0.0.1:8470) or --local: an embedded server with the local backend in this process, on
// the data dir $ANNEAL_HOME/local (default ~/.anneal/local, or --data-dir).
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <csignal>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>

#include "cli/commands.h"
#include "cli/job_text.h"
#include "cli/target.h"
#include "protocol/api_client.h"
#include "protocol/job_definition.h"
#include "control/server.h"
#include "protocol/wire.h"
#include "core/clock.h"
#include "core/env.h"
#include "core/crypto.h"

namespace anneal::cli {

namespace {

using nlohmann::json;

// ---- jobs / describe / logs / stop / metrics ----

// A query parameter's value, percent-encoded.
std::string QueryValue(const std::string& v) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char ch : v) {
    if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out += static_cast<char>(ch);
    } else {
      out += '%';
      out += kHex[ch >> 4];
      out += kHex[ch & 15];
    }
  }
  return out;
}

struct JobsArgs {
  int limit = 50;
  bool active = false, as_json = false, watch = false;
  double watch_s = 2;
  std::string status, user, name;
};

std::atomic<bool> g_watch_stop{false};
extern "C" void OnWatchInterrupt(int) { g_watch_stop.store(true); }

Status PrintJobs(ApiClient& client, const JobsArgs& a) {
  std::string q = "/v1/jobs?limit=" + std::to_string(a.limit) + (a.active ? "&active=1" : "");
  if (!a.status.empty()) q += "&status=" + QueryValue(a.status);
  if (!a.user.empty()) q += "&user=" + QueryValue(a.user);
  if (!a.name.empty()) q += "&name=" + QueryValue(a.name);
  ANNEAL_ASSIGN_OR_RETURN(json r, client.Get(q));
  if (a.as_json) {
    std::printf("%s\n", r.dump(2).c_str());
    return Status::Ok();
  }
  std::fputs(JobsText(r, WallSeconds()).c_str(), stdout);
  return Status::Ok();
}

// --watch: the table redrawn every watch_s seconds until Ctrl-C (SIGINT, exit 0) or SIGTERM. On a
// terminal the screen is cleared before each drawing; otherwise each table follows the last.
Status RunJobs(const Target& t, const JobsArgs& a) {
  ANNEAL_ASSIGN_OR_RETURN(Connection conn, Connect(t, false));
  if (!a.watch) return PrintJobs(*conn.client, a);
  struct sigaction sa {};
  sa.sa_handler = OnWatchInterrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  const bool tty = ::isatty(1) == 1;
  while (!g_watch_stop.load()) {
    if (tty) std::printf("\033[H\033[2J");
    std::printf("every %gs (Ctrl-C to stop): %s\n", a.watch_s, FormatTime(WallSeconds()).c_str());
    ANNEAL_RETURN_IF_ERROR(PrintJobs(*conn.client, a));
    if (!tty) std::printf("\n");
    std::fflush(stdout);
    for (double waited = 0; waited < a.watch_s && !g_watch_stop.load(); waited += 0.05) {
      Clock::Real().SleepFor(0.05);
    }
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
  std::fputs(DescribeText(j).c_str(), stdout);
  return Status::Ok();
}

struct LogsArgs {
  std::string id;
  bool follow = false;
  int rank = -2;
  int tail = -1;       // --tail N: the last N lines first (-1: every line)
  std::string since;   // --since T: only lines from T on
};

Status RunLogs(const Target& t, const LogsArgs& a) {
  double since = 0;
  if (!a.since.empty()) {
    ANNEAL_ASSIGN_OR_RETURN(since, ParseSince(a.since, WallSeconds()));
  }
  if (a.tail == 0 && !a.follow) return Status::Ok();
  ANNEAL_ASSIGN_OR_RETURN(Connection conn, Connect(t, false));
  std::string filter;
  if (a.rank >= -1) filter += "&rank=" + std::to_string(a.rank);
  if (since > 0) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.3f", since);
    filter += "&since=" + std::string(buf);
  }
  int64_t after = 0;
  auto print = [](const json& page) {
    std::fputs(LogLinesText(page).c_str(), stdout);
    std::fflush(stdout);
  };
  if (a.tail >= 0) {  // the last N lines, then (with -f) whatever comes after them
    json page;
    if (a.tail > 0) {
      ANNEAL_ASSIGN_OR_RETURN(page, conn.client->Get("/v1/jobs/" + a.id + "/logs?tail=" + std::to_string(a.tail) + filter));
    } else {  // --tail 0 -f: only new lines; start after the newest one
      ANNEAL_ASSIGN_OR_RETURN(page, conn.client->Get("/v1/jobs/" + a.id + "/logs?tail=1" + filter));
      page = json{{"next", Field(page, "next", int64_t{0})}};  // its lines are not printed
    }
    print(page);
    after = Field(page, "next", after);
    if (!a.follow) return Status::Ok();
  }
  for (int quiet_after_end = 0;;) {
    std::string q = "/v1/jobs/" + a.id + "/logs?after=" + std::to_string(after) + "&limit=5000" + filter;
    ANNEAL_ASSIGN_OR_RETURN(json page, conn.client->Get(q));
    print(page);
    after = Field(page, "next", after);
    if (Items(page, "lines").size() == 5000) continue;
    if (!a.follow) return Status::Ok();
    const bool done = Field(page, "job_done", false);
    if (done && Items(page, "lines").empty() && ++quiet_after_end >= 3) return Status::Ok();
    Clock::Real().SleepFor(done ? 0.5 : 1.0);
  }
}

Status RunStop(const Target& t, const std::string& id, bool requeue) {
  ANNEAL_ASSIGN_OR_RETURN(Connection conn, Connect(t, false));
  ANNEAL_ASSIGN_OR_RETURN(json j, conn.client->Post("/v1/jobs/" + id + "/stop", requeue ? json{{"requeue", true}} : json::object()));
  std::printf("%s: %s (%s)\n", id.c_str(), Field(j, "status", "").c_str(), Field(j, "secondary_status", "").c_str());
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
    for (const json& p : Items(page, "points")) all.push_back(p);
    if (Items(page, "points").size() < 100000) break;
    after = Field(page, "next", after);
  }
  if (as_json) {
    std::printf("%s\n", json({{"job", id}, {"points", all}}).dump(2).c_str());
    return Status::Ok();
  }
  std::fputs(MetricsText(all).c_str(), stdout);
  return Status::Ok();
}

}  // namespace

void AddJobCommands(CLI::App& app, RunFn* run) {
  {
    auto t = std::make_shared<Target>();
    auto a = std::make_shared<JobsArgs>();
    CLI::App* c = app.add_subcommand("jobs", "List jobs, newest first.\n"
                                             "Examples: anneal jobs --active\n"
                                             "          anneal jobs --status failed --user alice --name kjv-tiny\n"
                                             "          anneal jobs --watch          (redrawn every 2 s until Ctrl-C)");
    c->add_option("--limit", a->limit, "How many")->capture_default_str();
    c->add_flag("--active", a->active, "Only jobs not yet ended");
    c->add_option("--status", a->status,
                  "Only jobs in this status: a primary one (InProgress, Stopping, Completed, Failed, Stopped) or a "
                  "secondary one (Pending, Training, MaxRuntimeExceeded, ...); any case");
    c->add_option("--user", a->user, "Only this user's jobs (a user who sees only its own jobs gets none of another's)");
    c->add_option("--name", a->name, "Only jobs of this name (the spec's name: the id without its -NNNN)");
    c->add_flag("-w,--watch", a->watch, "Redraw the list every 2 s until Ctrl-C");
    c->add_flag("--json", a->as_json, "The API's JSON instead of a table");
    AddTargetOptions(c, t.get(), false);
    c->callback([run, t, a] { *run = [=] { return RunJobs(*t, *a); }; });
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
    auto a = std::make_shared<LogsArgs>();
    CLI::App* c = app.add_subcommand("logs", "Print a job's log lines (every rank, in order).\n"
                                             "Examples: anneal logs kjv-0001 -f --rank 0\n"
                                             "          anneal logs kjv-0001 --tail 20 --since 10m");
    c->add_option("id", a->id, "Job id")->required();
    c->add_flag("-f,--follow", a->follow, "Keep printing new lines until the job ends");
    c->add_option("--rank", a->rank, "Only this rank's lines (-1: the agents' own)");
    c->add_option("-n,--tail", a->tail, "Only the last N lines (with -f: then the new ones as they come)")
        ->check(CLI::Range(0, 100000));
    c->add_option("--since", a->since,
                  "Only lines from this time on: a duration before now (90s, 10m, 2h, 1d, 1h30m) or an ISO 8601 time "
                  "(2026-11-30T07:12:03Z; no offset is UTC)");
    AddTargetOptions(c, t.get(), false);
    c->callback([run, t, a] { *run = [=] { return RunLogs(*t, *a); }; });
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
