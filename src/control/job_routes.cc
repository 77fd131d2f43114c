// The job routes of `anneal server` (docs/api/openapi.yaml): health, packages, submit (with its
// checks: the source package, the execution role, the backend's capacity, the quotas, the
// idempotency key), list, describe, stop, logs, metrics and each metric's newest point.
#include "control/job_routes.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <set>

#include "anneal_version.h"
#include "control/connection_guard.h"
#include "control/execution_roles.h"
#include "control/http_util.h"
#include "control/job_summary.h"
#include "protocol/job_definition.h"
#include "protocol/wire.h"
#include "core/bounded_parse.h"
#include "core/crypto.h"
#include "core/env.h"

namespace anneal {

namespace {

using nlohmann::json;

class JobRoutes : public RoutePart {
 public:
  explicit JobRoutes(ServerContext& c) : c_(c) {}

  void Add(httplib::Server& h) {
    JobStore* st = c_.store;
    h.Get("/v1/health", [this](const httplib::Request&, httplib::Response& res) {
      Reply(res, 200, {{"ok", true}, {"version", ANNEAL_VERSION}, {"backend", c_.o.backend}});
    });
    // Streamed to disk as it arrives (a content reader: httplib does not buffer the body), after the
    // token is checked.
    h.Post("/v1/packages", [this, st](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read) {
      bool read_whole = false;
      Guarded(st, Access::kSubmit, [&](const httplib::Request& rq, httplib::Response& rs, const Principal& p) {
        PostPackage(rq, rs, read, p.name, &read_whole);
      })(req, res);
      // Answered before the upload was read to its end (a refused token, a limit, a quota, a failed
      // write): the rest of it would be taken for the connection's next request.
      if (!read_whole) ConnectionGuard::CloseAfterAnswer();
    });
    h.Get(R"(/v1/packages/([0-9a-f]{64}))", Guarded(st, Access::kAny, [this](const httplib::Request& req, httplib::Response& res, const Principal&) {
      auto data = Env::Default().ReadFile(PackagePath(req.matches[1]));
      if (!data.ok()) return ReplyError(res, 404, "no package " + std::string(req.matches[1]));
      res.set_content(std::move(*data), "application/gzip");
    }));
    h.Post("/v1/jobs", Guarded(st, Access::kSubmit, [this](const httplib::Request& req, httplib::Response& res, const Principal& p) {
      PostJob(req, res, p);
    }));
    h.Get("/v1/jobs", Guarded(st, Access::kUser, [this](const httplib::Request& req, httplib::Response& res, const Principal& p) {
      ListJobs(req, res, p);
    }));
    h.Get(R"(/v1/jobs/([^/]+))", Guarded(st, Access::kUser, [this](const httplib::Request& req, httplib::Response& res, const Principal& p) {
      auto j = VisibleJob(p, req.matches[1], res);
      if (!j) return;
      auto d = Describe(*j, p);
      if (!d.ok()) return ReplyError(res, 500, d.status().message());
      Reply(res, 200, *d);
    }));
    h.Post(R"(/v1/jobs/([^/]+)/stop)", Guarded(st, Access::kUser, [this](const httplib::Request& req, httplib::Response& res, const Principal& p) {
      StopJob(req, res, p);
    }));
    h.Get(R"(/v1/jobs/([^/]+)/logs)", Guarded(st, Access::kUser, [this](const httplib::Request& req, httplib::Response& res, const Principal& p) {
      GetLogs(req, res, p);
    }));
    h.Get(R"(/v1/jobs/([^/]+)/metrics)", Guarded(st, Access::kUser, [this](const httplib::Request& req, httplib::Response& res, const Principal& p) {
      GetMetrics(req, res, p);
    }));
    h.Get(R"(/v1/jobs/([^/]+)/metrics/latest)", Guarded(st, Access::kUser, [this](const httplib::Request& req, httplib::Response& res, const Principal& p) {
      GetLatestMetrics(req, res, p);
    }));
  }

 private:
  // The job if the caller may see it (its owner, an admin or a viewer); otherwise replies 404, the
  // same answer as for a job that does not exist, and returns nothing.
  std::optional<JobRecord> VisibleJob(const Principal& p, const std::string& id, httplib::Response& res) {
    auto j = c_.store->GetJob(id);
    if (!j.ok()) {
      ReplyError(res, 500, j.status().message());
      return std::nullopt;
    }
    if (!*j || (!p.reads_all() && (*j)->owner != p.name)) {
      ReplyError(res, 404, "no job " + id + " (list yours with anneal jobs)");
      return std::nullopt;
    }
    return **j;
  }

  std::string PackagePath(const std::string& sha) const {
    return JoinPath(JoinPath(c_.o.data_dir, "packages"), sha + ".tar.gz");
  }

  // A package upload: at most --max-package-bytes (413 naming it, before reading when Content-Length
  // says so), a gzip stream (its magic bytes), written to a temporary file as it arrives and renamed
  // to <sha256>.tar.gz once whole.
  // Deletes the packages no unfinished job uses whose every upload is older than --package-keep-s
  // (on each upload: the clean-up costs a query, and uploads are what fill the folder).
  Status CleanPackages(double now) {
    ANNEAL_ASSIGN_OR_RETURN(auto active, c_.store->ListJobs(1000000, true, 0, ""));
    std::set<std::string> keep;
    for (const JobRecord& j : active) {
      if (j.spec.source.rfind("package:", 0) == 0) keep.insert(j.spec.source.substr(8));
    }
    ANNEAL_ASSIGN_OR_RETURN(auto gone, c_.store->ForgetPackagesBefore(now - c_.o.package_keep_s, keep));
    for (const std::string& sha : gone) std::remove(PackagePath(sha).c_str());
    return Status::Ok();
  }

  // *read_whole: whether the upload was read to its end (whatever the answer).
  void PostPackage(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read,
                   const std::string& owner, bool* read_whole) {
    const double now = c_.clock->Wall();
    if (Status st = CleanPackages(now); !st.ok()) return ReplyError(res, 500, st.message());
    auto used = c_.store->PackageBytesOf(owner);
    if (!used.ok()) return ReplyError(res, 500, used.status().message());
    const int64_t quota_left = c_.o.package_quota_bytes - *used;
    const std::string over_quota = "your packages hold " + std::to_string(*used) + " bytes of your quota of " +
                                   std::to_string(c_.o.package_quota_bytes) + " (anneal server --package-quota-bytes); " +
                                   "a package no unfinished job uses is deleted --package-keep-s after its upload";
    const int64_t limit = std::min<int64_t>(c_.o.max_package_bytes, std::max<int64_t>(quota_left, 0));
    const bool quota_bound = quota_left < c_.o.max_package_bytes;
    const std::string over_max = "more than this server's limit of " + std::to_string(c_.o.max_package_bytes) +
                                 " bytes (anneal server --max-package-bytes): leave data and checkpoints out of the "
                                 "source folder (channels carry data)";
    if (req.has_header("Content-Length")) {
      const int64_t n = std::strtoll(req.get_header_value("Content-Length").c_str(), nullptr, 10);
      if (n > c_.o.max_package_bytes) return ReplyError(res, 413, "the package is " + std::to_string(n) + " bytes, " + over_max);
      if (n > limit) return ReplyError(res, 413, "the package is " + std::to_string(n) + " bytes and " + over_quota);
    }
    const std::string tmp = JoinPath(JoinPath(c_.o.data_dir, "packages"), ".upload-" + RandomHex(8));
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) return ReplyError(res, 500, "cannot write " + tmp);
    Sha256Stream sha256;
    int64_t got = 0;
    std::string head;
    bool written = true;
    const bool whole = read([&](const char* data, size_t n) {
      got += static_cast<int64_t>(n);
      if (got > limit) return false;
      if (head.size() < 2) head.append(data, std::min<size_t>(n, 2 - head.size()));
      sha256.Update(std::string_view(data, n));
      written = written && std::fwrite(data, 1, n, f) == n;
      return written;
    });
    written = std::fclose(f) == 0 && written;
    *read_whole = whole && got <= limit && written;
    auto fail = [&](int status, const std::string& why) {
      std::remove(tmp.c_str());
      ReplyError(res, status, why);
    };
    if (got > limit && quota_bound) return fail(413, "the package is more than " + std::to_string(limit) + " bytes, and " + over_quota);
    if (got > limit) return fail(413, "the package is " + over_max);
    if (!written) return fail(500, "cannot write the package to " + tmp + " (disk full?)");
    if (!whole) return fail(400, "the package upload ended early; submit again");
    if (head.size() < 2 || static_cast<unsigned char>(head[0]) != 0x1f || static_cast<unsigned char>(head[1]) != 0x8b) {
      return fail(400, "the package is not gzip'd: upload a .tar.gz (anneal submit packs the source folder)");
    }
    const std::string sha = sha256.Hex();
    if (req.has_header("X-Anneal-Sha256") && req.get_header_value("X-Anneal-Sha256") != sha) {
      return fail(400, "the package arrived damaged: its SHA-256 is " + sha + ", the client sent " +
                           req.get_header_value("X-Anneal-Sha256") + "; submit again");
    }
    if (std::rename(tmp.c_str(), PackagePath(sha).c_str()) != 0) return fail(500, "cannot store the package " + sha);
    if (Status st = c_.store->PutPackage(sha, owner, got, now); !st.ok()) return ReplyError(res, 500, st.message());
    Reply(res, 201, {{"package", "package:" + sha}, {"bytes", got}});
  }

  // The user's own instance limit (-1: the server's default).
  int UserLimit(const std::string& user) {
    auto u = c_.store->GetUser(user);
    return u.ok() && *u ? (*u)->max_instances : -1;
  }

  void PostJob(const httplib::Request& req, httplib::Response& res, const Principal& p) {
    std::string field;
    auto spec = ParseJobSpec(req.body, &field);
    if (!spec.ok()) return ReplyError(res, 400, spec.status().message(), field);
    if (!spec->source.empty()) {
      static const std::regex kPackage("package:[0-9a-f]{64}");
      if (spec->source.rfind("package:", 0) == 0 && !std::regex_match(spec->source, kPackage)) {
        return ReplyError(res, 400, "source: '" + spec->source + "' is not package:<64 hex digits> (the SHA-256 POST /v1/packages answered)",
                          "source");
      }
      if (spec->source.rfind("package:", 0) != 0) {
        return ReplyError(res, 400,
                          "source: '" + spec->source + "' is a local folder the server cannot read; submit with "
                          "'anneal submit', which packs it and uploads the package",
                          "source");
      }
      if (!Env::Default().Exists(PackagePath(spec->source.substr(8)))) {
        return ReplyError(res, 400, "source: no package " + spec->source + " on this server; upload it first (POST /v1/packages)",
                          "source");
      }
    }
    if (Status st = CheckExecutionRole(c_.roles, *spec, p.name, p.admin(), &field); !st.ok()) {
      return ReplyError(res, 403, st.message(), field);
    }
    if (Status st = CheckLocalChannels(*spec, &field); !st.ok()) return ReplyError(res, 400, st.message(), field);
    if (!spec->sandbox && !p.admin()) {
      return ReplyError(res, 403,
                        "sandbox: false runs the job's ranks with the agent's rights (docs/security.md), which only an "
                        "admin's token may ask for; the " + p.role + " role's jobs run sandboxed: remove 'sandbox: false'",
                        "sandbox");
    }
    if (spec->launcher == "srun" && c_.backend->name() != "slurm") {
      return ReplyError(res, 400,
                        "entrypoint.launcher: srun needs a Slurm allocation, and this server's backend is " +
                            c_.backend->name() + "; use mpirun (Open MPI) or anneal, or submit to a server started "
                            "with --backend slurm",
                        "entrypoint.launcher");
    }
    const int capacity = c_.backend->capacity();  // -1: no limit known
    if (capacity >= 0 && spec->instance_count > capacity) {
      return ReplyError(res, 400,
                        "resources.instance_count: " + std::to_string(spec->instance_count) +
                            " instances can never run at once here: " + c_.backend->CapacityHint() + "; ask for fewer",
                        "resources.instance_count");
    }
    if (Status st = CheckQuotaCanFit(c_.o.quota, {p.name, spec->instance_type, spec->instance_count, UserLimit(p.name)}); !st.ok()) {
      return ReplyError(res, 400, st.message(), "resources.instance_count");
    }
    const std::string key = req.get_header_value("Idempotency-Key");
    if (key.size() > 200 || key.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:") != std::string::npos) {
      return ReplyError(res, 400, "the Idempotency-Key header must be at most 200 letters, digits and -_.: (anneal submit sends a random one)");
    }
    const json normalized = spec->ToJson();
    auto rec = c_.store->CreateJob({spec->name, p.name, *spec, key}, c_.clock->Wall());
    if (!rec.ok()) return ReplyError(res, 500, rec.status().message());
    if (rec->existed && rec->job.spec.ToJson() != normalized) {
      return ReplyError(res, 409, "Idempotency-Key " + key + " was used for job " + rec->job.id +
                                      " with a different spec: send a new key for a new job");
    }
    if (!rec->existed) c_.scheduler->Wake();
    // A retried submit (its key known) gets the job it created, 200 instead of 201.
    Reply(res, rec->existed ? 200 : 201, {{"id", rec->job.id}, {"status", PrimaryStatus(rec->job.phase)},
                                          {"secondary_status", PhaseName(rec->job.phase)}, {"existed", rec->existed}});
  }

  // A channel on a file system (file:// or a path) that does not exist is refused now rather than
  // when an instance fails to copy it. Checked only where the instances read the server's file system
  // (the local backend); a static or Slurm agent's node may mount what the server does not. s3://
  // channels are not checked: control/ has no object-store client (the agents read them, with the
  // job's role's credentials).
  Status CheckLocalChannels(const JobSpec& spec, std::string* field) {
    if (c_.backend->name() != "local") return Status::Ok();
    for (size_t i = 0; i < spec.channels.size(); ++i) {
      const std::string& uri = spec.channels[i].uri;
      if (uri.find("://") != std::string::npos && uri.rfind("file://", 0) != 0) continue;
      const std::string path = uri.rfind("file://", 0) == 0 ? uri.substr(7) : uri;
      if (path.empty() || path[0] != '/' || Env::Default().Exists(path)) continue;
      *field = "channels[" + std::to_string(i) + "].uri";
      return InvalidInput(*field + ": '" + uri + "' does not exist on this server, whose instances would read it: " +
                          "prepare the data there first (anneal prep --output " + path +
                          ") or correct the path (a relative one is taken from the job spec's folder)");
    }
    return Status::Ok();
  }

  // The summary's text (wire.h), with the scheduler's reason while the job waits.
  std::string SummaryText(const JobRecord& j) {
    std::optional<std::string> why;
    if (j.phase == JobPhase::kPending || j.phase == JobPhase::kStarting) why = c_.scheduler->PendingReason(j.id);
    return JobSummaryJson(j, why ? &*why : nullptr);
  }
  json Summary(const JobRecord& j) { return json::parse(SummaryText(j)); }

  // A primary status (InProgress, Stopping, Completed, Failed, Stopped) or a secondary one (Pending,
  // Training, …) as the store spells it, matched without case; nothing for a word that is neither.
  static std::optional<std::string> CanonicalStatus(const std::string& s) {
    auto lower = [](std::string x) {
      for (char& ch : x) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      return x;
    };
    for (const std::string& n : AllStatusNames()) {
      if (lower(n) == lower(s)) return n;
    }
    return std::nullopt;
  }
  static std::vector<std::string> AllStatusNames() {
    std::vector<std::string> out = {"InProgress"};
    for (int i = 0; i <= static_cast<int>(JobPhase::kMaxRuntimeExceeded); ++i) {
      const JobPhase ph = static_cast<JobPhase>(i);
      for (const char* n : {PrimaryStatus(ph), PhaseName(ph)}) {
        if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
      }
    }
    return out;
  }
  static std::string StatusNames() {
    std::string list;
    for (const std::string& n : AllStatusNames()) list += (list.empty() ? "" : ", ") + n;
    return list;
  }

  void ListJobs(const httplib::Request& req, httplib::Response& res, const Principal& p) {
    const int limit = std::clamp(IntParam(req, "limit", 100), 1, 10000);
    JobStore::ListFilter f;
    f.active_only = req.has_param("active") && req.get_param_value("active") != "0";
    f.before_seq = Int64Param(req, "before", 0);
    f.owner = p.reads_all() ? "" : p.name;
    f.name = req.has_param("name") ? req.get_param_value("name") : "";
    if (req.has_param("user") && !req.get_param_value("user").empty()) {
      const std::string user = req.get_param_value("user");
      // A user who reads only its own jobs asking for another's: none it may see.
      if (!f.owner.empty() && user != f.owner) return Reply(res, 200, {{"jobs", json::array()}});
      f.owner = user;
    }
    if (req.has_param("status") && !req.get_param_value("status").empty()) {
      auto status = CanonicalStatus(req.get_param_value("status"));
      if (!status) {
        return ReplyError(res, 400, "status: '" + req.get_param_value("status") + "' is no job status; use one of " +
                                        StatusNames() + " (case does not matter)", "status");
      }
      f.status = *status;
    }
    auto jobs = c_.store->ListJobs(limit, f);
    if (!jobs.ok()) return ReplyError(res, 500, jobs.status().message());
    std::string body = "{\"jobs\":[";
    for (size_t n = 0; n < jobs->size(); ++n) {
      if (n) body += ',';
      body += SummaryText((*jobs)[n]);
    }
    body += ']';
    if (static_cast<int>(jobs->size()) == limit) {
      body += ",\"next_before\":";
      body += std::to_string(jobs->back().seq);
    }
    body += '}';
    res.status = 200;
    res.set_content(body, "application/json");
  }

  Result<json> Describe(const JobRecord& j, const Principal& p) {
    json d = Summary(j);
    // anneal exec's uses (control/exec_routes.cc), oldest first: their command lines to the owner and
    // admins only (a viewer reads every job, not what its owner typed into it).
    auto execs = c_.store->GetValue("execs:" + j.id);
    d["execs"] = execs.ok() && *execs ? json::parse(**execs, nullptr, false) : json::array();
    if (!p.admin() && p.name != j.owner && d["execs"].is_array()) {
      for (json& e : d["execs"]) {
        if (e.is_object() && e.contains("command")) e["command"] = "***";
      }
    }
    d["spec"] = j.spec.ToJson();
    if (!j.idempotency_key.empty()) d["idempotency_key"] = j.idempotency_key;
    // Secrets are never shown: their names only.
    if (d["spec"].contains("secrets")) {
      for (auto& [k, v] : d["spec"]["secrets"].items()) v = "***";
    }
    ANNEAL_ASSIGN_OR_RETURN(auto hist, c_.store->History(j.id));
    d["history"] = json::array();
    for (const auto& t : hist) {
      d["history"].push_back({{"at", t.at}, {"status", PrimaryStatus(t.phase)}, {"secondary_status", PhaseName(t.phase)},
                              {"message", t.message}});
    }
    ANNEAL_ASSIGN_OR_RETURN(auto insts, c_.store->Instances());
    d["instances"] = json::array();
    for (const auto& i : insts) {
      if (i.job_id != j.id) continue;
      d["instances"].push_back({{"id", i.id}, {"node", i.node}, {"address", i.address}, {"state", InstanceStateName(i.state)},
                                {"instance_type", i.instance_type}, {"slots", i.slots}, {"last_heartbeat", i.last_heartbeat}});
    }
    ANNEAL_ASSIGN_OR_RETURN(auto health, c_.store->Health(j.id, j.attempt));
    d["health_checks"] = json::array();
    for (const auto& h : health) {
      d["health_checks"].push_back({{"instance", h.instance_id}, {"node", h.node}, {"ok", h.ok}, {"at", h.at}, {"result", h.result}});
    }
    ANNEAL_ASSIGN_OR_RETURN(auto reps, c_.store->NodeReports(j.id, j.attempt));
    d["nodes"] = json::array();
    for (const auto& r : reps) d["nodes"].push_back(ToJson(r));
    ANNEAL_ASSIGN_OR_RETURN(auto means, c_.store->RankMeans(j.id, "step_time_s"));
    d["slowest_ranks"] = json::array();
    for (size_t i = 0; i < means.size() && i < 8; ++i) {
      d["slowest_ranks"].push_back({{"rank", means[i].rank}, {"mean_step_s", means[i].mean}, {"steps", means[i].count}});
    }
    return d;
  }

  void StopJob(const httplib::Request& req, httplib::Response& res, const Principal& p) {
    const std::string id = req.matches[1];
    std::lock_guard<std::mutex> sl(c_.scheduler->writers());  // one writer of job statuses at a time
    auto j = VisibleJob(p, id, res);
    if (!j) return;
    if (!p.admin() && j->owner != p.name) return ReplyError(res, 403, "the " + p.role + " role cannot stop another user's job");
    const JobPhase ph = j->phase;
    bool requeue = false;
    if (!req.body.empty()) {
      auto parsed = ParseJsonBounded(req.body);
      const json body = parsed.ok() ? *parsed : json();
      if (!body.is_object() || (body.contains("requeue") && !body["requeue"].is_boolean())) {
        return ReplyError(res, 400, "requeue: must be true or false", "requeue");
      }
      requeue = body.value("requeue", false);
    }
    Status st;
    if (requeue && (ph == JobPhase::kPending || IsTerminal(ph) || ph == JobPhase::kStopping)) {
      return ReplyError(res, 409, "requeue: job " + id + " is " + PhaseName(ph) + ", not running: nothing to interrupt", "requeue");
    }
    if (requeue) {
      st = c_.store->Transition(id, JobPhase::kStopping, std::string(kRequeueRequested) + " by " + p.name, c_.clock->Wall(),
                                "", -1, StopCause::kRequeue);
    } else if (ph == JobPhase::kPending) {
      st = c_.store->Transition(id, JobPhase::kStopped, "stopped by request before it started", c_.clock->Wall(), "", 1);
    } else if (!IsTerminal(ph) && ph != JobPhase::kStopping && CanTransition(ph, JobPhase::kStopping)) {
      st = c_.store->Transition(id, JobPhase::kStopping, "stop requested by " + p.name, c_.clock->Wall(), "", -1,
                                StopCause::kRequest);
    }
    if (!st.ok()) return ReplyError(res, 500, st.message());
    c_.scheduler->Wake();
    auto now = c_.store->GetJob(id);
    Reply(res, 202, now.ok() && *now ? Summary(**now) : json::object());
  }

  void GetLogs(const httplib::Request& req, httplib::Response& res, const Principal& p) {
    const std::string id = req.matches[1];
    auto j = VisibleJob(p, id, res);
    if (!j) return;
    const int rank = req.has_param("rank") ? IntParam(req, "rank", -2) : -2;
    double since = 0;
    if (req.has_param("since")) {
      char* end = nullptr;
      const std::string v = req.get_param_value("since");
      since = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !std::isfinite(since)) {
        return ReplyError(res, 400, "since: '" + v + "' is not a time in seconds since the Unix epoch", "since");
      }
    }
    const int64_t after = Int64Param(req, "after", 0);
    // tail=N: the last N matching lines (anneal logs --tail), else the first `limit` after `after`.
    auto lines = req.has_param("tail")
                     ? c_.store->TailLogs(id, after, rank, std::clamp(IntParam(req, "tail", 100), 1, 100000), since)
                     : c_.store->Logs(id, after, rank, std::clamp(IntParam(req, "limit", 1000), 1, 10000), since);
    if (!lines.ok()) return ReplyError(res, 500, lines.status().message());
    json out = json::array();
    int64_t next = Int64Param(req, "after", 0);
    for (const LogLine& x : *lines) {
      out.push_back(ToJson(x));
      next = x.id;
    }
    Reply(res, 200, {{"lines", out}, {"next", next}, {"job_done", IsTerminal(j->phase)}});
  }

  void GetMetrics(const httplib::Request& req, httplib::Response& res, const Principal& p) {
    const std::string id = req.matches[1];
    auto j = VisibleJob(p, id, res);
    if (!j) return;
    const std::string name = req.has_param("name") ? req.get_param_value("name") : "";
    auto pts = c_.store->Metrics(id, name, Int64Param(req, "after", 0), std::clamp(IntParam(req, "limit", 10000), 1, 100000));
    if (!pts.ok()) return ReplyError(res, 500, pts.status().message());
    json out = json::array();
    int64_t next = Int64Param(req, "after", 0);
    for (const MetricPoint& pt : *pts) {
      out.push_back(ToJson(pt));
      next = pt.id;
    }
    Reply(res, 200, {{"points", out}, {"next", next}});
  }

  // Each series' newest point (name, node, rank): from memory while the job is active (as /metrics
  // reads it), else from the store, whose query scans the job's points (the dashboard's jobs page
  // asks for active jobs only).
  void GetLatestMetrics(const httplib::Request& req, httplib::Response& res, const Principal& p) {
    const std::string id = req.matches[1];
    auto j = VisibleJob(p, id, res);
    if (!j) return;
    std::optional<std::vector<MetricPoint>> pts = c_.latest ? c_.latest->Of(id) : std::nullopt;
    if (!pts) {
      auto stored = c_.store->LatestMetrics(id);
      if (!stored.ok()) return ReplyError(res, 500, stored.status().message());
      pts = std::move(*stored);
    }
    json out = json::array();
    for (const MetricPoint& pt : *pts) out.push_back(ToJson(pt));
    Reply(res, 200, {{"points", out}});
  }

  ServerContext& c_;
};

}  // namespace

std::unique_ptr<RoutePart> AddJobRoutes(httplib::Server& h, ServerContext& c) {
  auto r = std::make_unique<JobRoutes>(c);
  r->Add(h);
  return r;
}

}  // namespace anneal
