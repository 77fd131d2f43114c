#include "control/server.h"

#include <httplib.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "anneal_version.h"
#include "backends/backend.h"
#include "control/auth.h"
#include "control/exit_cause.h"
#include "control/execution_roles.h"
#include "control/http_util.h"
#include "control/job_spec.h"
#include "control/job_store.h"
#include "control/user_routes.h"
#include "control/webhooks.h"
#include "control/wire.h"
#include "core/env.h"
#include "core/crypto.h"

namespace anneal {

namespace {

using nlohmann::json;

const std::map<std::string, int> kNodeStateOrder = {{"downloading", 0}, {"training", 1}, {"uploading", 2}, {"finished", 3}};

class Server : public ControlServer {
 public:
  explicit Server(const ServerOptions& o) : o_(o) {}
  ~Server() override { Stop(); }

  Status Init() {
    Env& env = Env::Default();
    ANNEAL_RETURN_IF_ERROR(env.CreateDirs(o_.data_dir));
    // The store holds secrets and token hashes, the folder the token files: this OS user's only.
    if (::chmod(o_.data_dir.c_str(), 0700) != 0) return IoError("cannot make " + o_.data_dir + " private (chmod 700)");
    ANNEAL_RETURN_IF_ERROR(env.CreateDirs(JoinPath(o_.data_dir, "packages")));
    ANNEAL_ASSIGN_OR_RETURN(store_, JobStore::Open(JoinPath(o_.data_dir, "anneal.db")));
    ANNEAL_RETURN_IF_ERROR(BootstrapAuth(store_.get(), o_.data_dir, o_.join_token_file, WallSeconds()));
    if (!o_.execution_roles_file.empty()) {
      ANNEAL_ASSIGN_OR_RETURN(roles_, LoadExecutionRoles(o_.execution_roles_file));
    }
    const bool tls = !o_.tls_cert.empty() || !o_.tls_key.empty();
    if (tls) {
      if (o_.tls_cert.empty() || o_.tls_key.empty()) return InvalidInput("TLS needs both --tls-cert and --tls-key");
      http_ = std::make_unique<httplib::SSLServer>(o_.tls_cert.c_str(), o_.tls_key.c_str());
      if (!http_->is_valid()) {
        return InvalidInput("cannot load the TLS certificate " + o_.tls_cert + " or key " + o_.tls_key +
                            ": check they are PEM files that belong together");
      }
    } else {
      http_ = std::make_unique<httplib::Server>();
    }
    if (o_.backend == "local") {
      LocalBackendOptions lo;
      ANNEAL_ASSIGN_OR_RETURN(std::string join, Env::Default().ReadFile(
          o_.join_token_file.empty() ? JoinPath(o_.data_dir, "join.token") : o_.join_token_file));
      while (!join.empty() && (join.back() == '\n' || join.back() == ' ')) join.pop_back();
      lo.env["ANNEAL_JOIN_TOKEN"] = join;
      if (tls) lo.env["ANNEAL_CA_CERT"] = o_.tls_ca.empty() ? o_.tls_cert : o_.tls_ca;
      lo.agent_binary = o_.agent_binary;
      lo.work_root = JoinPath(o_.data_dir, "instances");
      lo.max_instances = o_.max_instances;
      lo.heartbeat_s = o_.heartbeat_s;
      backend_ = MakeLocalBackend(lo);
    } else if (o_.backend != "static") {
      return InvalidInput("--backend '" + o_.backend + "' must be local or static");
    }
    if (!o_.webhook_urls.empty()) {
      WebhookOptions wo;
      wo.urls = o_.webhook_urls;
      if (!o_.webhook_secret_file.empty()) {
        ANNEAL_ASSIGN_OR_RETURN(wo.secret, env.ReadFile(o_.webhook_secret_file));
        while (!wo.secret.empty() && (wo.secret.back() == '\n' || wo.secret.back() == ' ')) wo.secret.pop_back();
      }
      ANNEAL_ASSIGN_OR_RETURN(webhooks_, WebhookSender::Start(store_.get(), wo));
    }
    // Heartbeat deadlines restart now: agents get a full timeout to reach a restarted server.
    start_wall_ = WallSeconds();
    Routes();
    http_->set_payload_max_length(size_t{4} << 30);
    // Idle keep-alive connections are held this long (polled every 10 ms by cpp-httplib meanwhile:
    // anneal's own clients close theirs); Stop() waits for them.
    http_->set_keep_alive_timeout(1);
    // Small JSON answers: without TCP_NODELAY each waits for the peer's delayed ACK (40 ms).
    http_->set_tcp_nodelay(true);
    // A keep-alive connection holds a worker for its life: room for every agent and client at once.
    http_->new_task_queue = [] { return new httplib::ThreadPool(64); };
    int port = o_.port;
    if (port == 0) {
      port = http_->bind_to_any_port(o_.host);
      if (port < 0) return InvalidInput("cannot listen on " + o_.host + ": no free port");
    } else if (!http_->bind_to_port(o_.host, port)) {
      return InvalidInput("cannot listen on " + o_.host + ":" + std::to_string(port) +
                          " (in use, or not an address of this machine): choose another --listen");
    }
    url_ = std::string(tls ? "https://" : "http://") + o_.host + ":" + std::to_string(port);
    ANNEAL_RETURN_IF_ERROR(env.WriteFileAtomic(JoinPath(o_.data_dir, "server.json"),
                                               json({{"url", url_}, {"pid", ::getpid()}}).dump() + "\n"));
    listener_ = std::thread([this] { http_->listen_after_bind(); });
    if (o_.schedule) scheduler_ = std::thread([this] { SchedulerLoop(); });
    return Status::Ok();
  }

  std::string url() const override { return url_; }

  void Stop() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stopped_) return;
      stopped_ = true;
    }
    cv_.notify_all();
    cv_pool_.notify_all();
    if (scheduler_.joinable()) scheduler_.join();
    http_->stop();
    if (listener_.joinable()) listener_.join();
    if (webhooks_) webhooks_->Stop();
  }

  void Drain(double timeout_s) override {
    const double deadline = WallSeconds() + timeout_s;
    auto insts = store_->Instances();
    if (insts.ok()) {
      std::set<std::string> pools;  // jobs whose warm pool ends with this server
      for (InstanceRecord r : *insts) {
        if (r.state == "released") continue;
        if (r.state == "available") pools.insert(r.job_id);
        r.state = "released";
        (void)store_->PutInstance(r);
        if (backend_ && r.backend == "local") backend_->Release(r.id);
      }
      for (const std::string& from : pools) {
        auto old = store_->GetJob(from);
        if (!old.ok() || !*old || !(*old)->warm_pool.is_object()) continue;
        json wp = (*old)->warm_pool;
        wp["status"] = "Terminated";
        wp["ended_because"] = "the server ended (anneal submit --local releases every instance)";
        wp["ended_at"] = WallSeconds();
        (void)store_->SetWarmPool(from, wp);
      }
    }
    while (WallSeconds() < deadline) {
      auto left = store_->Instances();
      if (!left.ok() || left->empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

 private:
  // ---- HTTP ----
  void Routes() {
    httplib::Server& h = *http_;
    JobStore* st = store_.get();
    h.Get("/v1/health", [this](const httplib::Request&, httplib::Response& res) {
      Reply(res, 200, {{"ok", true}, {"version", ANNEAL_VERSION}, {"backend", o_.backend}});
    });
    h.Post("/v1/packages", Guarded(st, Access::kSubmit, [this](const httplib::Request& req, httplib::Response& res, const Principal&) {
      PostPackage(req, res);
    }));
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
      auto d = Describe(*j);
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
    AddUserRoutes(h, st);
    // Agent-facing: registration with the join token, everything else with the agent's own token and
    // only for the jobs its instance serves.
    h.Post("/v1/agents", Guarded(st, Access::kJoin, [this](const httplib::Request& req, httplib::Response& res, const Principal&) {
      Register(req, res);
    }));
    h.Post(R"(/v1/agents/([^/]+)/heartbeat)", Guarded(st, Access::kAgent, [this](const httplib::Request& req, httplib::Response& res, const Principal& p) {
      if (p.name != req.matches[1]) return ReplyError(res, 403, "an agent's token is valid for its own instance only");
      Heartbeat(req, res);
    }));
    AgentRoute("Post", R"(/v1/jobs/([^/]+)/logs)", [this](const httplib::Request& req, httplib::Response& res, const json& b, const Principal&) -> Status {
      std::vector<LogLine> lines;
      for (const json& x : b.value("lines", json::array())) lines.push_back(LogLineFromJson(x));
      ANNEAL_RETURN_IF_ERROR(store_->AppendLogs(req.matches[1], lines));
      Reply(res, 200, {{"stored", lines.size()}});
      return Status::Ok();
    });
    AgentRoute("Post", R"(/v1/jobs/([^/]+)/metrics)", [this](const httplib::Request& req, httplib::Response& res, const json& b, const Principal&) -> Status {
      std::vector<MetricPoint> pts;
      for (const json& x : b.value("points", json::array())) pts.push_back(MetricPointFromJson(x));
      ANNEAL_RETURN_IF_ERROR(store_->AppendMetrics(req.matches[1], pts));
      Reply(res, 200, {{"stored", pts.size()}});
      return Status::Ok();
    });
    AgentRoute("Post", R"(/v1/jobs/([^/]+)/reports)", [this](const httplib::Request& req, httplib::Response& res, const json& b, const Principal&) -> Status {
      NodeReport r = NodeReportFromJson(b);
      r.at = WallSeconds();
      ANNEAL_RETURN_IF_ERROR(store_->PutNodeReport(req.matches[1], r));
      cv_.notify_all();
      Reply(res, 200, {{"ok", true}});
      return Status::Ok();
    });
    AgentRoute("Post", R"(/v1/jobs/([^/]+)/health)", [this](const httplib::Request& req, httplib::Response& res, const json& b, const Principal& p) -> Status {
      return PostHealth(req.matches[1], b, p, res);
    });
    AgentRoute("Put", R"(/v1/jobs/([^/]+)/rendezvous/([0-9]+))", [this](const httplib::Request& req, httplib::Response& res, const json& b, const Principal&) -> Status {
      ANNEAL_ASSIGN_OR_RETURN(std::string v, store_->SetRendezvous(req.matches[1], std::stoi(req.matches[2]), b.dump()));
      Reply(res, 200, json::parse(v));
      return Status::Ok();
    });
    AgentRoute("Get", R"(/v1/jobs/([^/]+)/rendezvous/([0-9]+))", [this](const httplib::Request& req, httplib::Response& res, const json&, const Principal&) -> Status {
      ANNEAL_ASSIGN_OR_RETURN(auto v, store_->GetRendezvous(req.matches[1], std::stoi(req.matches[2])));
      if (!v) {
        ReplyError(res, 404, "not yet");
        return Status::Ok();
      }
      Reply(res, 200, json::parse(*v));
      return Status::Ok();
    });
    h.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "internal error";
      try {
        if (ep) std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      ReplyError(res, 400, "bad request: " + what);
    });
  }

  // An agent route on a job: the agent's token, its instance serving that job (assigned to it now,
  // or still running it by its last heartbeat), and a JSON body (GET: none).
  void AgentRoute(const std::string& method, const std::string& pattern,
                  std::function<Status(const httplib::Request&, httplib::Response&, const json&, const Principal&)> f) {
    auto handler = Guarded(store_.get(), Access::kAgent,
                           [this, method, f](const httplib::Request& req, httplib::Response& res, const Principal& p) {
                             const std::string job = req.matches[1];
                             auto inst = store_->GetInstance(p.name);
                             if (!inst.ok()) return ReplyError(res, 500, inst.status().message());
                             bool serves = *inst && (*inst)->job_id == job;
                             if (!serves) {  // a job it was given and may still be finishing
                               std::lock_guard<std::mutex> l(mu_);
                               auto g = granted_.find(p.name);
                               serves = g != granted_.end() && g->second.count(job);
                             }
                             if (!serves) return ReplyError(res, 403, "instance " + p.name + " does not serve job " + job);
                             json b = json::object();
                             if (method != "Get") {
                               b = json::parse(req.body, nullptr, false);
                               if (b.is_discarded()) return ReplyError(res, 400, "the request body is not JSON");
                             }
                             Status s = f(req, res, b, p);
                             if (!s.ok()) ReplyError(res, HttpStatusOf(s), s.message());
                           });
    if (method == "Post") {
      http_->Post(pattern, handler);
    } else if (method == "Put") {
      http_->Put(pattern, handler);
    } else {
      http_->Get(pattern, handler);
    }
  }

  // The job if the caller may see it (its owner, an admin or a viewer); otherwise replies 404, the
  // same answer as for a job that does not exist, and returns nothing.
  std::optional<JobRecord> VisibleJob(const Principal& p, const std::string& id, httplib::Response& res) {
    auto j = store_->GetJob(id);
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
    return JoinPath(JoinPath(o_.data_dir, "packages"), sha + ".tar.gz");
  }

  void PostPackage(const httplib::Request& req, httplib::Response& res) {
    const std::string sha = Sha256Hex(req.body);
    if (req.has_header("X-Anneal-Sha256") && req.get_header_value("X-Anneal-Sha256") != sha) {
      return ReplyError(res, 400, "the package arrived damaged: its SHA-256 is " + sha + ", the client sent " +
                                      req.get_header_value("X-Anneal-Sha256") + "; submit again");
    }
    Env& env = Env::Default();
    if (!env.Exists(PackagePath(sha))) {
      Status st = env.WriteFileAtomic(PackagePath(sha), req.body);
      if (!st.ok()) return ReplyError(res, 500, st.message());
    }
    Reply(res, 201, {{"package", "package:" + sha}, {"bytes", req.body.size()}});
  }

  // The user's own instance limit (-1: the server's default).
  int UserLimit(const std::string& user) {
    auto u = store_->GetUser(user);
    return u.ok() && *u ? (*u)->max_instances : -1;
  }

  void PostJob(const httplib::Request& req, httplib::Response& res, const Principal& p) {
    std::string field;
    auto spec = ParseJobSpec(req.body, &field);
    if (!spec.ok()) return ReplyError(res, 400, spec.status().message(), field);
    if (!spec->source.empty()) {
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
    if (Status st = CheckExecutionRole(roles_, *spec, p.name, p.admin(), &field); !st.ok()) {
      return ReplyError(res, 403, st.message(), field);
    }
    if (backend_ && spec->instance_count > backend_->capacity()) {
      return ReplyError(res, 400,
                        "resources.instance_count: " + std::to_string(spec->instance_count) +
                            " instances can never run at once here: the local backend has --max-instances " +
                            std::to_string(backend_->capacity()) + "; ask for fewer or start the server with more",
                        "resources.instance_count");
    }
    if (Status st = CheckQuotaCanFit(o_.quota, {p.name, spec->instance_type, spec->instance_count, UserLimit(p.name)}); !st.ok()) {
      return ReplyError(res, 400, st.message(), "resources.instance_count");
    }
    auto rec = store_->CreateJob(spec->name, p.name, spec->ToJson(), WallSeconds());
    if (!rec.ok()) return ReplyError(res, 500, rec.status().message());
    cv_.notify_all();
    Reply(res, 201, {{"id", rec->id}, {"status", "InProgress"}, {"secondary_status", "Pending"}});
  }

  json Summary(const JobRecord& j) {
    json s = {{"id", j.id},
              {"name", j.name},
              {"owner", j.owner},
              {"status", PrimaryStatus(j.phase)},
              {"secondary_status", PhaseName(j.phase)},
              {"created_at", j.created_at},
              {"started_at", j.started_at},
              {"ended_at", j.ended_at},
              {"attempt", j.attempt},
              {"exit_code", j.exit_code},
              {"failure_reason", j.failure_reason},
              {"instance_count", j.spec["resources"].value("instance_count", 1)}};
    if (j.phase == JobPhase::kPending) {
      std::lock_guard<std::mutex> l(mu_);
      auto it = pending_reason_.find(j.id);
      if (it != pending_reason_.end()) s["pending_reason"] = it->second;
    }
    if (!j.warm_pool.is_null() && !j.warm_pool.empty()) s["warm_pool"] = j.warm_pool;
    return s;
  }

  void ListJobs(const httplib::Request& req, httplib::Response& res, const Principal& p) {
    const int limit = std::clamp(IntParam(req, "limit", 100), 1, 10000);
    const bool active = req.has_param("active") && req.get_param_value("active") != "0";
    auto jobs = store_->ListJobs(limit, active, Int64Param(req, "before", 0), p.reads_all() ? "" : p.name);
    if (!jobs.ok()) return ReplyError(res, 500, jobs.status().message());
    json out = json::array();
    for (const JobRecord& j : *jobs) out.push_back(Summary(j));
    json body = {{"jobs", out}};
    if (static_cast<int>(jobs->size()) == limit) body["next_before"] = jobs->back().seq;
    Reply(res, 200, body);
  }

  Result<json> Describe(const JobRecord& j) {
    json d = Summary(j);
    d["spec"] = j.spec;
    // Secrets are never shown: their names only.
    if (d["spec"].contains("secrets")) {
      for (auto& [k, v] : d["spec"]["secrets"].items()) v = "***";
    }
    ANNEAL_ASSIGN_OR_RETURN(auto hist, store_->History(j.id));
    d["history"] = json::array();
    for (const auto& t : hist) {
      d["history"].push_back({{"at", t.at}, {"status", PrimaryStatus(t.phase)}, {"secondary_status", PhaseName(t.phase)},
                              {"message", t.message}});
    }
    ANNEAL_ASSIGN_OR_RETURN(auto insts, store_->Instances());
    d["instances"] = json::array();
    for (const auto& i : insts) {
      if (i.job_id != j.id) continue;
      d["instances"].push_back({{"id", i.id}, {"node", i.node}, {"address", i.address}, {"state", i.state},
                                {"instance_type", i.instance_type}, {"slots", i.slots}, {"last_heartbeat", i.last_heartbeat}});
    }
    ANNEAL_ASSIGN_OR_RETURN(auto health, store_->Health(j.id, j.attempt));
    d["health_checks"] = json::array();
    for (const auto& h : health) {
      d["health_checks"].push_back({{"instance", h.instance_id}, {"node", h.node}, {"ok", h.ok}, {"at", h.at}, {"result", h.result}});
    }
    ANNEAL_ASSIGN_OR_RETURN(auto reps, store_->NodeReports(j.id, j.attempt));
    d["nodes"] = json::array();
    for (const auto& r : reps) d["nodes"].push_back(ToJson(r));
    ANNEAL_ASSIGN_OR_RETURN(auto means, store_->RankMeans(j.id, "step_time_s"));
    d["slowest_ranks"] = json::array();
    for (size_t i = 0; i < means.size() && i < 8; ++i) {
      d["slowest_ranks"].push_back({{"rank", means[i].rank}, {"mean_step_s", means[i].mean}, {"steps", means[i].count}});
    }
    return d;
  }

  void StopJob(const httplib::Request& req, httplib::Response& res, const Principal& p) {
    const std::string id = req.matches[1];
    std::lock_guard<std::mutex> sl(sched_mu_);  // one writer of job statuses at a time
    auto j = VisibleJob(p, id, res);
    if (!j) return;
    if (!p.admin() && j->owner != p.name) return ReplyError(res, 403, "the " + p.role + " role cannot stop another user's job");
    const JobPhase ph = j->phase;
    Status st;
    if (ph == JobPhase::kPending) {
      st = store_->Transition(id, JobPhase::kStopped, "stopped by request before it started", WallSeconds(), "", 1);
    } else if (!IsTerminal(ph) && ph != JobPhase::kStopping && CanTransition(ph, JobPhase::kStopping)) {
      st = store_->Transition(id, JobPhase::kStopping, "stop requested by " + p.name, WallSeconds());
    }
    if (!st.ok()) return ReplyError(res, 500, st.message());
    cv_.notify_all();
    auto now = store_->GetJob(id);
    Reply(res, 202, now.ok() && *now ? Summary(**now) : json::object());
  }

  void GetLogs(const httplib::Request& req, httplib::Response& res, const Principal& p) {
    const std::string id = req.matches[1];
    auto j = VisibleJob(p, id, res);
    if (!j) return;
    const int rank = req.has_param("rank") ? IntParam(req, "rank", -2) : -2;
    auto lines = store_->Logs(id, Int64Param(req, "after", 0), rank, std::clamp(IntParam(req, "limit", 1000), 1, 10000));
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
    auto pts = store_->Metrics(id, name, Int64Param(req, "after", 0), std::clamp(IntParam(req, "limit", 10000), 1, 100000));
    if (!pts.ok()) return ReplyError(res, 500, pts.status().message());
    json out = json::array();
    int64_t next = Int64Param(req, "after", 0);
    for (const MetricPoint& pt : *pts) {
      out.push_back(ToJson(pt));
      next = pt.id;
    }
    Reply(res, 200, {{"points", out}, {"next", next}});
  }

  template <typename F>
  void WithJson(const httplib::Request& req, httplib::Response& res, F&& f) {
    json b = json::parse(req.body, nullptr, false);
    if (b.is_discarded()) return ReplyError(res, 400, "the request body is not JSON");
    Status st = f(b);
    if (!st.ok()) ReplyError(res, HttpStatusOf(st), st.message());
  }

  void Register(const httplib::Request& req, httplib::Response& res) {
    WithJson(req, res, [&](const json& b) -> Status {
      std::string id = b.value("id", std::string());
      const double now = WallSeconds();
      std::lock_guard<std::mutex> sl(sched_mu_);
      std::optional<InstanceRecord> known;
      if (!id.empty()) {
        ANNEAL_ASSIGN_OR_RETURN(known, store_->GetInstance(id));
      }
      InstanceRecord r;
      if (known) {
        // An instance that is alive (heartbeating) cannot be taken over by another registration: only
        // one the backend requested, or one whose agent went quiet (restarted), may join under its id.
        if (known->state != "requested" && known->state != "unhealthy" &&
            now - std::max(known->last_heartbeat, start_wall_) < o_.heartbeat_timeout_s) {
          ReplyError(res, 409, "instance " + id + " is registered and alive: join under another --instance-id");
          return Status::Ok();
        }
        r = *known;
        if (r.state == "requested") r.state = r.job_id.empty() ? "idle" : "assigned";
        if (r.state == "unhealthy") r.state = "idle";  // its agent joined again: back in the pool
      } else {
        if (id.empty()) id = "agent-" + Sha256Hex(b.dump() + std::to_string(now)).substr(0, 12);
        r.id = id;
        r.backend = "static";
        r.state = "idle";
      }
      r.address = b.value("address", std::string("127.0.0.1"));
      r.instance_type = b.value("instance_type", r.instance_type.empty() ? std::string("local") : r.instance_type);
      r.slots = b.value("slots", r.slots);
      r.registered_at = now;
      r.last_heartbeat = now;
      ANNEAL_RETURN_IF_ERROR(store_->PutInstance(r));
      // A fresh token for the instance; one it held before (an agent re-joining) stops working.
      ANNEAL_RETURN_IF_ERROR(store_->DeleteTokensOf(r.id, "agent"));
      ANNEAL_ASSIGN_OR_RETURN(std::string token, IssueToken(store_.get(), r.id, "agent", "instance token", now));
      cv_.notify_all();
      Reply(res, 200, {{"id", r.id}, {"heartbeat_s", o_.heartbeat_s}, {"token", token}});
      return Status::Ok();
    });
  }

  void Heartbeat(const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    WithJson(req, res, [&](const json& b) -> Status {
      const double now = WallSeconds();
      ANNEAL_ASSIGN_OR_RETURN(std::optional<InstanceRecord> inst, store_->GetInstance(id));
      if (!inst) {
        ReplyError(res, 404, "unknown instance " + id + ": register again");
        return Status::Ok();
      }
      ANNEAL_RETURN_IF_ERROR(store_->Heartbeat(id, now));
      const std::string busy_job = b.value("job", std::string());
      const int busy_attempt = b.value("attempt", -1);
      const json hc = b.value("health", json::object());
      {
        std::lock_guard<std::mutex> l(mu_);
        busy_[id] = {busy_job, busy_attempt, now};
      }
      if (inst->state == "available" && busy_job.empty() && hc.empty()) {
        // A warm pool's agent: its heartbeat waits (long poll, up to heartbeat_s) for a job to take
        // the pool, so the reuse starts at once instead of at the agent's next heartbeat.
        {
          std::unique_lock<std::mutex> l(mu_);
          cv_pool_.wait_for(l, std::chrono::duration<double>(o_.heartbeat_s), [&] { return stopped_ || pool_taken_.count(id); });
          pool_taken_.erase(id);
        }
        ANNEAL_ASSIGN_OR_RETURN(inst, store_->GetInstance(id));
        if (!inst) {
          ReplyError(res, 404, "unknown instance " + id + ": register again");
          return Status::Ok();
        }
        ANNEAL_RETURN_IF_ERROR(store_->Heartbeat(id, WallSeconds()));
      }
      json action = {{"action", "none"}};
      if (inst->state == "released") {
        action["action"] = "exit";
      } else if (inst->state == "available") {
        action["action"] = busy_job.empty() ? "none" : "stop";  // a warm pool: idle until reused
        action["next_s"] = 0;                                   // and polling again at once (above)
      } else if (!inst->job_id.empty()) {
        ANNEAL_ASSIGN_OR_RETURN(std::optional<JobRecord> job, store_->GetJob(inst->job_id));
        if (job && job->phase == JobPhase::kStarting) {
          std::lock_guard<std::mutex> sl(sched_mu_);
          ANNEAL_RETURN_IF_ERROR(StartIfReady(job->id));
          ANNEAL_ASSIGN_OR_RETURN(job, store_->GetJob(inst->job_id));
          if (job && job->phase == JobPhase::kStarting) {
            // Still waiting for the job's other instances or health checks: ask again soon.
            action["next_s"] = 0.1;
            ANNEAL_ASSIGN_OR_RETURN(std::optional<json> check, HealthAssignment(*job, *inst, hc));
            if (check) action = {{"action", "health"}, {"health", *check}, {"next_s", 0.1}};
          }
        }
        if (action["action"] == "health") {
          // answered above
        } else if (!job || IsTerminal(job->phase)) {
          action["action"] = busy_job.empty() ? "none" : "stop";
        } else if (job->phase == JobPhase::kStopping) {
          action["action"] = busy_job.empty() && hc.empty() ? "none" : "stop";
        } else if ((job->phase == JobPhase::kDownloading || job->phase == JobPhase::kTraining ||
                    job->phase == JobPhase::kUploading) &&
                   !(busy_job == job->id && busy_attempt == job->attempt)) {
          ANNEAL_ASSIGN_OR_RETURN(auto reps, store_->NodeReports(job->id, job->attempt));
          bool finished = false;
          for (const auto& r : reps) finished |= r.node == inst->node && r.state == "finished";
          if (!finished && busy_job.empty()) {
            ANNEAL_ASSIGN_OR_RETURN(json a, Assignment(*job, *inst));
            action = {{"action", "run"}, {"assignment", a}};
          } else if (finished) {
            action["next_s"] = 0.1;  // the job ends in a moment: the instance is released or pooled
          }
        }
      } else if (!busy_job.empty() || !hc.empty()) {
        action["action"] = "stop";
      }
      Reply(res, 200, action);
      return Status::Ok();
    });
  }

  // ---- Pre-start health checks (agent/health_check.h, docs/health-checks.md) ----
  // The round of a job attempt's checks: each round that replaced unhealthy instances starts the
  // next, in which every instance checks again (the collective included).
  std::string RoundKey(const JobRecord& j) { return "health_round:" + j.id + ":" + std::to_string(j.attempt); }
  Result<int> HealthRound(const JobRecord& j) {
    ANNEAL_ASSIGN_OR_RETURN(auto v, store_->GetValue(RoundKey(j)));
    return v ? std::stoi(*v) : 0;
  }

  // The job's instances that hold it now (not released), by node.
  Result<std::vector<InstanceRecord>> InstancesOf(const std::string& job) {
    ANNEAL_ASSIGN_OR_RETURN(auto insts, store_->Instances());
    std::vector<InstanceRecord> mine;
    for (const auto& i : insts) {
      if (i.job_id == job && i.state != "released" && i.state != "available") mine.push_back(i);
    }
    std::sort(mine.begin(), mine.end(), [](const auto& a, const auto& b) { return a.node < b.node; });
    return mine;
  }

  // The check an instance of a Starting job runs now, if any: once every instance registered, each
  // runs the round's checks once (hc: what the agent says it is running).
  Result<std::optional<json>> HealthAssignment(const JobRecord& j, const InstanceRecord& inst, const json& hc) {
    if (!o_.health.enabled) return std::optional<json>();
    const int count = j.spec["resources"].value("instance_count", 1);
    ANNEAL_ASSIGN_OR_RETURN(auto mine, InstancesOf(j.id));
    if (static_cast<int>(mine.size()) != count) return std::optional<json>();
    for (const auto& i : mine) {
      if (i.registered_at <= 0) return std::optional<json>();
    }
    ANNEAL_ASSIGN_OR_RETURN(auto recs, store_->Health(j.id, j.attempt));
    ANNEAL_ASSIGN_OR_RETURN(const int round, HealthRound(j));
    for (const auto& r : recs) {
      if (r.instance_id == inst.id && r.result.value("round", -1) == round) return std::optional<json>();
    }
    if (hc.value("job", std::string()) == j.id && hc.value("attempt", -1) == j.attempt && hc.value("round", -1) == round) {
      return std::optional<json>();  // running it
    }
    json addrs = json::array();
    for (const auto& i : mine) addrs.push_back(i.address);
    {
      std::lock_guard<std::mutex> l(mu_);
      granted_[inst.id].insert(j.id);
    }
    return std::optional<json>(json{{"job", j.id},
                                    {"attempt", j.attempt},
                                    {"round", round},
                                    {"node", inst.node},
                                    {"nnodes", count},
                                    {"addresses", addrs},
                                    {"checks",
                                     {{"min_free_memory_gb", o_.health.min_free_memory_gb},
                                      {"min_free_disk_gb", o_.health.min_free_disk_gb},
                                      {"collective_mb", o_.health.collective_mb},
                                      {"collective_timeout_s", o_.health.collective_timeout_s},
                                      {"command", o_.health.command}}}});
  }

  Status PostHealth(const std::string& job, const json& b, const Principal& p, httplib::Response& res) {
    HealthRecord r;
    r.instance_id = p.name;
    r.node = b.value("node", 0);
    r.ok = b.value("ok", false);
    r.result = b.value("result", json::object());
    r.result["round"] = b.value("round", 0);
    r.at = WallSeconds();
    ANNEAL_RETURN_IF_ERROR(store_->PutHealth(job, b.value("attempt", 0), r));
    cv_.notify_all();
    Reply(res, 200, {{"ok", true}});
    return Status::Ok();
  }

  // What failed in a health result, in a line.
  static std::string HealthFailures(const json& result) {
    std::string out;
    for (const auto& c : result.value("checks", json::array())) {
      if (c.value("ok", true)) continue;
      if (!out.empty()) out += "; ";
      out += c.value("name", std::string("?")) + ": " + c.value("detail", std::string());
    }
    return out.empty() ? "unhealthy" : out;
  }

  // Once every instance passed the round's checks: Downloading. An unhealthy instance is replaced
  // (local backend) or the attempt fails as an infrastructure failure (joined instances; the bad one
  // is kept out of the pool). sched_mu_ held.
  Status DecideHealth(const JobRecord& j, const std::vector<InstanceRecord>& mine) {
    const int count = j.spec["resources"].value("instance_count", 1);
    ANNEAL_ASSIGN_OR_RETURN(auto recs, store_->Health(j.id, j.attempt));
    ANNEAL_ASSIGN_OR_RETURN(const int round, HealthRound(j));
    std::vector<std::pair<InstanceRecord, HealthRecord>> bad;
    double busbw = -1;
    for (const auto& i : mine) {
      const HealthRecord* got = nullptr;
      for (const auto& r : recs) {
        if (r.instance_id == i.id && r.result.value("round", -1) == round) got = &r;
      }
      if (!got) return Status::Ok();  // still checking
      if (!got->ok) bad.push_back({i, *got});
      for (const auto& c : got->result.value("checks", json::array())) {
        if (c.value("name", std::string()) == "collective" && c.contains("busbw_gbps")) busbw = c["busbw_gbps"].get<double>();
      }
    }
    const double now = WallSeconds();
    if (bad.empty()) {
      std::string m = "all " + std::to_string(count) + " instances registered and passed their health checks";
      if (busbw >= 0) {
        char buf[64];
        std::snprintf(buf, sizeof(buf), " (allreduce bus bandwidth %.2f GB/s)", busbw);
        m += buf;
      }
      return store_->Transition(j.id, JobPhase::kDownloading, m, now);
    }
    std::string what;
    for (const auto& [i, r] : bad) {
      what += (what.empty() ? "" : "; ") + std::string("instance ") + i.id + " (node " + std::to_string(i.node) + ") failed its health check: " +
              HealthFailures(r.result);
    }
    if (!backend_ || round + 1 > o_.health.max_replacements) {
      ANNEAL_RETURN_IF_ERROR(FailOrRetry(j, ExitCause::kInfrastructure,
                                         what + (backend_ ? " (no replacements left: " + std::to_string(o_.health.max_replacements) + ")" : ""),
                                         3, mine));
      for (auto [i, r] : bad) {
        if (i.backend != "static") continue;
        i.state = "unhealthy";  // out of the pool until its agent registers again
        i.job_id.clear();
        i.node = -1;
        ANNEAL_RETURN_IF_ERROR(store_->PutInstance(i));
      }
      return Status::Ok();
    }
    std::string ids;
    for (const auto& [i, r] : bad) {
      ANNEAL_RETURN_IF_ERROR(Release({i}));
      InstanceRecord n;
      n.id = j.id + "-a" + std::to_string(j.attempt) + "-n" + std::to_string(i.node) + "-h" + std::to_string(round + 1);
      n.job_id = j.id;
      n.node = i.node;
      n.instance_type = i.instance_type;
      n.slots = i.slots;
      n.state = "requested";
      n.backend = "local";
      ANNEAL_RETURN_IF_ERROR(store_->PutInstance(n));
      ANNEAL_RETURN_IF_ERROR(backend_->Launch({n.id, n.instance_type, n.slots, url_}));
      ids += (ids.empty() ? "" : ", ") + n.id;
    }
    ANNEAL_RETURN_IF_ERROR(store_->SetValue(RoundKey(j), std::to_string(round + 1)));
    return store_->Transition(j.id, JobPhase::kStarting, what + "; replaced by " + ids + " before the start", now);
  }

  Result<json> Assignment(const JobRecord& job, const InstanceRecord& inst) {
    {
      std::lock_guard<std::mutex> l(mu_);
      granted_[inst.id].insert(job.id);
    }
    ANNEAL_ASSIGN_OR_RETURN(auto insts, store_->Instances());
    std::vector<std::string> addrs(job.spec["resources"].value("instance_count", 1));
    for (const auto& i : insts) {
      if (i.job_id == job.id && i.state != "released" && i.state != "available" && i.node >= 0 &&
          i.node < static_cast<int>(addrs.size())) {
        addrs[i.node] = i.address;
      }
    }
    json a = {{"job", job.id},
              {"attempt", job.attempt},
              {"node", inst.node},
              {"nnodes", addrs.size()},
              {"addresses", addrs},
              {"spec", job.spec}};
    // The execution role's storage credentials: the agent's own storage calls and the ranks use them.
    auto role = roles_.roles.find(job.spec.value("role", std::string()));
    if (role != roles_.roles.end() && !role->second.access_key_id.empty()) {
      a["credentials"] = {{"AWS_ACCESS_KEY_ID", role->second.access_key_id},
                          {"AWS_SECRET_ACCESS_KEY", role->second.secret_access_key}};
    }
    return a;
  }

  // ---- Scheduler ----
  void SchedulerLoop() {
    std::unique_lock<std::mutex> l(mu_);
    while (!stopped_) {
      l.unlock();
      {
        std::lock_guard<std::mutex> sl(sched_mu_);
        Status st = Tick();
        if (!st.ok()) std::fprintf(stderr, "anneal server: scheduler: %s\n", st.ToString().c_str());
        if (webhooks_) webhooks_->Notify();
      }
      l.lock();
      cv_.wait_for(l, std::chrono::milliseconds(static_cast<int64_t>(o_.tick_s * 1000)));
    }
  }

  // The instance is gone for good: its record and its token.
  Status Forget(const std::string& id) {
    ANNEAL_RETURN_IF_ERROR(store_->DeleteTokensOf(id, "agent"));
    return store_->DeleteInstance(id);
  }

  Status Tick() {
    const double now = WallSeconds();
    if (backend_) {
      for (const std::string& gone : backend_->Poll()) {
        ANNEAL_ASSIGN_OR_RETURN(auto inst, store_->GetInstance(gone));
        if (inst && inst->state == "released") ANNEAL_RETURN_IF_ERROR(Forget(gone));
      }
    }
    ANNEAL_ASSIGN_OR_RETURN(auto insts, store_->Instances());
    // Released instances whose agent went quiet (gone after a server restart, or another backend).
    for (const auto& i : insts) {
      if (i.state == "released" && now - std::max(i.last_heartbeat, start_wall_) > 3 * o_.heartbeat_s + 5) {
        ANNEAL_RETURN_IF_ERROR(Forget(i.id));
      }
    }
    ANNEAL_RETURN_IF_ERROR(ExpireWarmPools(insts, now));
    ANNEAL_ASSIGN_OR_RETURN(insts, store_->Instances());
    ANNEAL_ASSIGN_OR_RETURN(auto jobs, store_->ActiveJobs());
    for (const JobRecord& j : jobs) {
      std::vector<InstanceRecord> mine;
      for (const auto& i : insts) {
        if (i.job_id == j.id && i.state != "released" && i.state != "available") mine.push_back(i);
      }
      std::sort(mine.begin(), mine.end(), [](const auto& a, const auto& b) { return a.node < b.node; });
      const int count = j.spec["resources"].value("instance_count", 1);
      switch (j.phase) {
        case JobPhase::kStarting: {
          int up = 0;
          for (const auto& i : mine) up += i.registered_at > 0 ? 1 : 0;
          if (up == count && static_cast<int>(mine.size()) == count) {
            ANNEAL_RETURN_IF_ERROR(StartIfReady(j.id));
            ANNEAL_ASSIGN_OR_RETURN(auto again, store_->GetJob(j.id));
            if (!again || again->phase != JobPhase::kStarting) break;
          }
          // From entering Starting (or the last replacement of an unhealthy instance).
          const double limit =
              o_.start_timeout_s + (o_.health.enabled && up == count ? o_.health.collective_timeout_s + 60 : 0);
          if (now - std::max(j.updated_at, start_wall_) > limit) {
            const std::string why =
                up < count ? "only " + std::to_string(up) + " of " + std::to_string(count) + " instances registered within " +
                                 std::to_string(static_cast<int>(limit)) + " s (see the agents' logs under " +
                                 JoinPath(o_.data_dir, "instances") + ")"
                           : "the instances' health checks did not all report within " + std::to_string(static_cast<int>(limit)) + " s";
            ANNEAL_RETURN_IF_ERROR(FailOrRetry(j, ExitCause::kInfrastructure, why, 3, mine));
          }
          break;
        }
        case JobPhase::kDownloading:
        case JobPhase::kTraining:
        case JobPhase::kUploading:
        case JobPhase::kStopping:
          ANNEAL_RETURN_IF_ERROR(Progress(j, mine, count, now));
          break;
        default:
          break;
      }
    }
    // Then the queue (after the running jobs, so instances a job just released are reused at once).
    // Strictly first come, first served: the head is placed first and a job that does not fit holds
    // the rest, so only the oldest few Pending jobs need reading.
    // Restarting jobs go first: they held instances a moment ago (re-read: some just got there).
    ANNEAL_ASSIGN_OR_RETURN(insts, store_->Instances());
    ANNEAL_ASSIGN_OR_RETURN(jobs, store_->ActiveJobs());
    for (const JobRecord& j : jobs) {
      if (j.phase != JobPhase::kRestarting) continue;
      ANNEAL_ASSIGN_OR_RETURN(bool placed, Place(j, insts));
      if (!placed) return Status::Ok();
      ANNEAL_ASSIGN_OR_RETURN(insts, store_->Instances());
    }
    // Quotas (control/quota.h) count what the running jobs hold: the jobs just read (placing a
    // Restarting job changes its phase, not what it holds).
    QuotaUsage usage;
    for (const JobRecord& j : jobs) {
      usage.Add(j.owner, j.spec["resources"].value("instance_type", std::string("local")),
                j.spec["resources"].value("instance_count", 1));
    }
    std::map<std::string, std::string> reasons;
    // Users' own limits, read once a pass. Only user and type limits let a job be passed by later
    // ones; without them the head of the queue decides, and 16 jobs are plenty to read.
    std::map<std::string, int> user_limits;
    ANNEAL_ASSIGN_OR_RETURN(auto users, store_->Users());
    bool skips = o_.quota.user_max_instances > 0 || !o_.quota.instance_type_max.empty();
    for (const auto& u : users) {
      user_limits[u.name] = u.max_instances;
      skips = skips || u.max_instances > 0;
    }
    ANNEAL_ASSIGN_OR_RETURN(auto pending, store_->PendingJobs(skips ? 64 : 16));
    std::string blocker;
    for (const JobRecord& j : pending) {
      const double max_pending = j.spec["stopping"].value("max_pending_s", 0.0);
      if (max_pending > 0 && now - j.created_at > max_pending) {
        ANNEAL_RETURN_IF_ERROR(store_->Transition(j.id, JobPhase::kStopped,
                                                  "max_pending_s " + std::to_string(static_cast<int>(max_pending)) +
                                                      " reached before instances were available",
                                                  now, "", 1));
        continue;
      }
      if (!blocker.empty()) {
        reasons[j.id] = "queued behind " + blocker + " (first come, first served)";
        continue;
      }
      const QuotaDemand d{j.owner, j.spec["resources"].value("instance_type", std::string("local")),
                          j.spec["resources"].value("instance_count", 1),
                          user_limits.count(j.owner) ? user_limits[j.owner] : -1};
      bool holds = false;
      const std::string over = QuotaBlock(o_.quota, usage, d, &holds);
      if (!over.empty()) {
        reasons[j.id] = "waiting for the " + over;
        if (holds) blocker = j.id;
        continue;
      }
      ANNEAL_ASSIGN_OR_RETURN(bool placed, Place(j, insts));
      if (!placed) {
        reasons[j.id] = backend_ ? "waiting for instances: the local backend runs at most " +
                                       std::to_string(backend_->capacity()) + " at once"
                                 : "waiting for " + std::to_string(d.count) + " idle joined instance(s) of type " + d.type +
                                       " with " + std::to_string(j.spec["resources"].value("procs_per_instance", 1)) +
                                       " slot(s)";
        blocker = j.id;
        continue;
      }
      usage.Add(d.user, d.type, d.count);
      ANNEAL_ASSIGN_OR_RETURN(insts, store_->Instances());
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      pending_reason_.swap(reasons);
    }
    return Status::Ok();
  }

  // Starting -> Downloading once every instance of the job has registered (from the scheduler, and
  // inline from a heartbeat so the agent gets its assignment in the same answer). sched_mu_ held.
  Status StartIfReady(const std::string& id) {
    ANNEAL_ASSIGN_OR_RETURN(std::optional<JobRecord> j, store_->GetJob(id));
    if (!j || j->phase != JobPhase::kStarting) return Status::Ok();
    const int count = j->spec["resources"].value("instance_count", 1);
    ANNEAL_ASSIGN_OR_RETURN(auto insts, store_->Instances());
    int up = 0;
    for (const auto& i : insts) up += i.job_id == id && i.state != "released" && i.state != "available" && i.registered_at > 0 ? 1 : 0;
    if (up != count) return Status::Ok();
    if (o_.health.enabled) {
      // A warm pool whose job just completed on it proved these instances together: no new checks.
      ANNEAL_ASSIGN_OR_RETURN(auto from, store_->GetValue("pool_from:" + id));
      if (from && j->attempt == 0) {
        ANNEAL_ASSIGN_OR_RETURN(auto prev, store_->GetJob(*from));
        if (prev && prev->phase == JobPhase::kCompleted) {
          return store_->Transition(id, JobPhase::kDownloading,
                                    "all " + std::to_string(count) + " instances of the warm pool of " + *from +
                                        " ready; health checks skipped (" + *from + " completed on them)",
                                    WallSeconds());
        }
      }
      ANNEAL_ASSIGN_OR_RETURN(auto mine, InstancesOf(id));
      return DecideHealth(*j, mine);
    }
    return store_->Transition(id, JobPhase::kDownloading, "all " + std::to_string(count) + " instances registered",
                              WallSeconds());
  }

  // Obtains or assigns instances for a Pending job; false when they are not available yet.
  Result<bool> Place(const JobRecord& j, const std::vector<InstanceRecord>& insts) {
    const int count = j.spec["resources"].value("instance_count", 1);
    const int slots = j.spec["resources"].value("procs_per_instance", 1);
    const std::string type = j.spec["resources"].value("instance_type", std::string("local"));
    const double now = WallSeconds();
    if (backend_) {
      // A warm pool of an ended job with the same instance type, count, slots and execution role.
      const std::string key = PoolKey(j.spec);
      std::map<std::string, std::vector<InstanceRecord>> pools;  // by the job that left it
      for (const auto& i : insts) {
        if (i.state == "available") pools[i.job_id].push_back(i);
      }
      for (const auto& [from, pool] : pools) {
        if (static_cast<int>(pool.size()) == count && pool[0].pool_key == key) {
          ANNEAL_RETURN_IF_ERROR(ReusePool(j, from, pool));
          return true;
        }
      }
      int used = 0;
      // Released agents are idle and about to exit: they no longer count.
      for (const auto& i : insts) used += i.backend == "local" && i.state != "released" ? 1 : 0;
      if (used + count > backend_->capacity()) {
        // Idle warm pools give way to a waiting job, the soonest to expire first.
        int idle = 0;
        for (const auto& [from, pool] : pools) idle += static_cast<int>(pool.size());
        if (used - idle + count > backend_->capacity()) return false;
        std::vector<std::pair<double, std::string>> order;
        for (const auto& [from, pool] : pools) order.push_back({pool[0].keep_until, from});
        std::sort(order.begin(), order.end());
        for (const auto& [until, from] : order) {
          if (used + count <= backend_->capacity()) break;
          ANNEAL_RETURN_IF_ERROR(EndWarmPool(from, pools[from], "Terminated", "made room for " + j.id));
          used -= static_cast<int>(pools[from].size());
        }
      }
      std::string ids;
      for (int n = 0; n < count; ++n) {
        InstanceRecord r;
        r.id = j.id + "-a" + std::to_string(j.attempt) + "-n" + std::to_string(n);
        r.job_id = j.id;
        r.node = n;
        r.instance_type = type;
        r.slots = slots;
        r.state = "requested";
        r.backend = "local";
        ANNEAL_RETURN_IF_ERROR(store_->PutInstance(r));
        ANNEAL_RETURN_IF_ERROR(backend_->Launch({r.id, type, slots, url_}));
        ids += (n ? ", " : "") + r.id;
      }
      ANNEAL_RETURN_IF_ERROR(store_->Transition(
          j.id, JobPhase::kStarting,
          std::string(j.phase == JobPhase::kRestarting ? "attempt " + std::to_string(j.attempt) + ": " : "") + "obtaining " +
              std::to_string(count) + " instance(s) from the local backend: " + ids,
          now));
      return true;
    }
    std::vector<InstanceRecord> free;
    for (const auto& i : insts) {
      if (i.backend == "static" && i.state == "idle" && i.job_id.empty() && i.instance_type == type && i.slots >= slots &&
          now - i.last_heartbeat < o_.heartbeat_timeout_s) {
        free.push_back(i);
      }
    }
    if (static_cast<int>(free.size()) < count) return false;
    std::string ids;
    for (int n = 0; n < count; ++n) {
      InstanceRecord r = free[n];
      r.job_id = j.id;
      r.node = n;
      r.state = "assigned";
      ANNEAL_RETURN_IF_ERROR(store_->PutInstance(r));
      ids += (n ? ", " : "") + r.id;
    }
    ANNEAL_RETURN_IF_ERROR(store_->Transition(
        j.id, JobPhase::kStarting,
        std::string(j.phase == JobPhase::kRestarting ? "attempt " + std::to_string(j.attempt) + ": " : "") + "assigned " +
            std::to_string(count) + " joined instance(s): " + ids,
        now));
    return true;
  }

  // Moves a started job on from its nodes' reports and heartbeats.
  Status Progress(const JobRecord& j, const std::vector<InstanceRecord>& mine, int count, double now) {
    ANNEAL_ASSIGN_OR_RETURN(auto reps, store_->NodeReports(j.id, j.attempt));
    std::map<int, NodeReport> by_node;
    for (const auto& r : reps) by_node[r.node] = r;
    // A lost instance (agent gone, or its heartbeat) is an infrastructure failure.
    for (const auto& i : mine) {
      const double last = std::max(i.last_heartbeat, start_wall_);
      const bool done = by_node.count(i.node) && by_node[i.node].state == "finished";
      if (!done && now - last > o_.heartbeat_timeout_s && j.phase != JobPhase::kStopping) {
        return FailOrRetry(j, ExitCause::kInfrastructure,
                           "instance " + i.id + " (node " + std::to_string(i.node) + ", " + i.address +
                               ") lost: no heartbeat for " + std::to_string(static_cast<int>(now - last)) + " s",
                           3, mine);
      }
    }
    // A failed node ends the attempt: the node where the failure began decides its cause. A node that
    // only saw another's failure waits for that one's report (or for every node's).
    if (j.phase != JobPhase::kStopping) {
      const NodeReport* origin = nullptr;
      int failed = 0, finished_nodes = 0;
      for (const auto& [node, r] : by_node) {
        if (r.state != "finished") continue;
        ++finished_nodes;
        if (r.exit_code == 0) continue;
        ++failed;
        if (r.local && !origin) origin = &r;
      }
      if (failed > 0 && (origin || finished_nodes == count)) {
        const NodeReport& r = origin ? *origin : by_node.begin()->second;
        ExitCause cause = origin ? ParseExitCause(r.cause) : ExitCause::kInfrastructure;
        std::string reason = "node " + std::to_string(r.node) + ": " + r.message;
        if (r.failed_rank >= 0) {
          auto last = store_->LastLogs(j.id, r.failed_rank, 10);
          if (last.ok() && !last->empty()) {
            reason += "\nlast lines of rank " + std::to_string(r.failed_rank) + ":";
            for (const auto& x : *last) reason += "\n  " + x.text;
          }
        }
        return FailOrRetry(j, cause, reason, r.exit_code, mine);
      }
    }
    int finished = 0, least = 3;
    for (int n = 0; n < count; ++n) {
      auto it = by_node.find(n);
      const int s = it == by_node.end() ? -1 : kNodeStateOrder.at(it->second.state);
      least = std::min(least, s);
      finished += s == 3 ? 1 : 0;
    }
    if (j.phase == JobPhase::kStopping) {
      // Every node either reported its end or is not running this attempt.
      int quiet = 0;
      {
        std::lock_guard<std::mutex> l(mu_);
        for (const auto& i : mine) {
          const bool reported = by_node.count(i.node) && by_node[i.node].state == "finished";
          auto b = busy_.find(i.id);
          const bool idle = b != busy_.end() && b->second.at > j.updated_at &&
                            !(b->second.job == j.id && b->second.attempt == j.attempt);
          quiet += reported || idle ? 1 : 0;
        }
      }
      const double grace = j.spec["stopping"].value("grace_period_s", 30.0);
      if (quiet == static_cast<int>(mine.size()) || now - j.updated_at > grace + 3 * o_.heartbeat_s + 30) {
        ANNEAL_ASSIGN_OR_RETURN(auto hist, store_->History(j.id));
        const bool runtime = !hist.empty() && hist.back().message.find("max_runtime_s") != std::string::npos;
        return Finish(j, runtime ? JobPhase::kMaxRuntimeExceeded : JobPhase::kStopped,
                      runtime ? "stopped: max_runtime_s reached" : "stopped by request", 1, mine);
      }
      return Status::Ok();
    }
    const double max_runtime = j.spec["stopping"].value("max_runtime_s", 0.0);
    if (max_runtime > 0 && j.started_at > 0 && now - j.started_at > max_runtime) {
      return store_->Transition(j.id, JobPhase::kStopping,
                                "max_runtime_s " + std::to_string(static_cast<int>(max_runtime)) + " reached", now);
    }
    if (finished == count) {
      return Finish(j, JobPhase::kCompleted, "all " + std::to_string(count) + " instances finished with exit code 0", 0, mine);
    }
    // Forward only: the slowest node sets the phase.
    const JobPhase want = least <= 0 ? JobPhase::kDownloading : least == 1 ? JobPhase::kTraining : JobPhase::kUploading;
    if (static_cast<int>(want) > static_cast<int>(j.phase) && CanTransition(j.phase, want)) {
      // Through Training on the way to Uploading, so the history shows every phase.
      if (want == JobPhase::kUploading && j.phase == JobPhase::kDownloading) {
        ANNEAL_RETURN_IF_ERROR(store_->Transition(j.id, JobPhase::kTraining, "every instance started its ranks", now));
      }
      ANNEAL_RETURN_IF_ERROR(store_->Transition(
          j.id, want, want == JobPhase::kTraining ? "every instance started its ranks" : "every instance's ranks finished; uploading",
          now));
    }
    return Status::Ok();
  }

  // An attempt failed: retried on fresh instances when the cause allows and attempts remain
  // (retry.max_attempts), otherwise the job fails with the cause first in its reason.
  Status FailOrRetry(const JobRecord& j, ExitCause cause, const std::string& reason, int exit_code,
                     const std::vector<InstanceRecord>& mine) {
    const int max_attempts = j.spec["retry"].value("max_attempts", 1);
    const std::string what = std::string(ExitCauseName(cause)) + ": " + reason;
    if (IsRetryable(cause) && j.attempt + 1 < max_attempts) {
      const double now = WallSeconds();
      ANNEAL_RETURN_IF_ERROR(store_->Transition(
          j.id, JobPhase::kRestarting,
          "attempt " + std::to_string(j.attempt) + " failed (" + what + "); restarting on fresh instances as attempt " +
              std::to_string(j.attempt + 1) + " of " + std::to_string(max_attempts) +
              ", resuming from the newest complete checkpoint",
          now));
      ANNEAL_RETURN_IF_ERROR(store_->SetAttempt(j.id, j.attempt + 1, now));
      return Release(mine);
    }
    std::string final_reason = what;
    if (IsRetryable(cause) && max_attempts > 1) final_reason += "\n(no attempts left: retry.max_attempts " + std::to_string(max_attempts) + ")";
    return Finish(j, JobPhase::kFailed, final_reason, exit_code, mine, cause != ExitCause::kInfrastructure);
  }

  // The job no longer needs these instances: local agents are told to exit (their ranks get
  // SIGTERM and the grace period), joined ones go back to the pool.
  Status Release(const std::vector<InstanceRecord>& mine) {
    for (InstanceRecord r : mine) {
      if (r.backend == "local") {
        r.state = "released";
        ANNEAL_RETURN_IF_ERROR(store_->PutInstance(r));
        if (backend_) backend_->Release(r.id);
      } else {
        r.state = "idle";
        r.job_id.clear();
        r.node = -1;
        ANNEAL_RETURN_IF_ERROR(store_->PutInstance(r));
      }
    }
    return Status::Ok();
  }

  // The job ended: its instances are released, or kept as a warm pool (resources.keep_alive_s)
  // when keep_warm (not after an infrastructure failure) and they are local and all alive.
  Status Finish(const JobRecord& j, JobPhase to, const std::string& reason, int exit_code,
                const std::vector<InstanceRecord>& mine, bool keep_warm = true) {
    const double now = WallSeconds();
    JobPhase from = j.phase;
    if (to == JobPhase::kCompleted && from == JobPhase::kDownloading) {
      ANNEAL_RETURN_IF_ERROR(store_->Transition(j.id, JobPhase::kTraining, "every instance started its ranks", now));
    }
    ANNEAL_RETURN_IF_ERROR(store_->Transition(j.id, to, reason, now, to == JobPhase::kFailed ? reason : "", exit_code));
    // A pool this job reused has now been handed on.
    ANNEAL_ASSIGN_OR_RETURN(auto from_pool, store_->GetValue("pool_from:" + j.id));
    if (from_pool) {
      ANNEAL_ASSIGN_OR_RETURN(auto old, store_->GetJob(*from_pool));
      if (old && old->warm_pool.is_object() && old->warm_pool.value("status", std::string()) == "InUse") {
        json wp = old->warm_pool;
        wp["status"] = "Reused";
        ANNEAL_RETURN_IF_ERROR(store_->SetWarmPool(old->id, wp));
      }
    }
    const double keep = j.spec["resources"].value("keep_alive_s", 0.0);
    bool warm = keep_warm && keep > 0 && backend_ && !mine.empty();
    for (const auto& i : mine) warm = warm && i.backend == "local" && now - i.last_heartbeat < o_.heartbeat_timeout_s;
    if (!warm) return Release(mine);
    json ids = json::array();
    for (InstanceRecord r : mine) {
      r.state = "available";
      r.pool_key = PoolKey(j.spec);
      r.keep_until = now + keep;
      ids.push_back(r.id);
      ANNEAL_RETURN_IF_ERROR(store_->PutInstance(r));
    }
    return store_->SetWarmPool(j.id, {{"status", "Available"}, {"keep_alive_s", keep}, {"expires_at", now + keep}, {"instances", ids}});
  }

  // What a job must share with a warm pool to reuse it.
  static std::string PoolKey(const json& spec) {
    const json& r = spec["resources"];
    return r.value("instance_type", std::string("local")) + "|" + std::to_string(r.value("instance_count", 1)) + "|" +
           std::to_string(r.value("procs_per_instance", 1)) + "|" + spec.value("role", std::string());
  }

  // A Pending job takes over the warm pool `from` left (its agents are registered and idle).
  Status ReusePool(const JobRecord& j, const std::string& from, std::vector<InstanceRecord> pool) {
    std::sort(pool.begin(), pool.end(), [](const auto& a, const auto& b) { return a.node < b.node; });
    std::string ids;
    for (size_t n = 0; n < pool.size(); ++n) {
      InstanceRecord r = pool[n];
      r.job_id = j.id;
      r.node = static_cast<int>(n);
      r.state = "assigned";
      r.pool_key.clear();
      r.keep_until = 0;
      ANNEAL_RETURN_IF_ERROR(store_->PutInstance(r));
      ids += (n ? ", " : "") + r.id;
    }
    ANNEAL_RETURN_IF_ERROR(store_->SetValue("pool_from:" + j.id, from));
    {
      std::lock_guard<std::mutex> l(mu_);
      for (const auto& r : pool) pool_taken_.insert(r.id);
    }
    cv_pool_.notify_all();
    ANNEAL_ASSIGN_OR_RETURN(auto old, store_->GetJob(from));
    if (old) {
      json wp = old->warm_pool.is_object() ? old->warm_pool : json::object();
      wp["status"] = "InUse";
      wp["reused_by"] = j.id;
      ANNEAL_RETURN_IF_ERROR(store_->SetWarmPool(from, wp));
    }
    return store_->Transition(j.id, JobPhase::kStarting,
                              std::string(j.phase == JobPhase::kRestarting ? "attempt " + std::to_string(j.attempt) + ": " : "") +
                                  "reusing the warm pool of " + from + ": " + ids,
                              WallSeconds());
  }

  // Releases a warm pool's instances and records how it ended.
  Status EndWarmPool(const std::string& from, const std::vector<InstanceRecord>& pool, const std::string& status,
                     const std::string& why) {
    ANNEAL_RETURN_IF_ERROR(Release(pool));
    ANNEAL_ASSIGN_OR_RETURN(auto old, store_->GetJob(from));
    if (!old) return Status::Ok();
    json wp = old->warm_pool.is_object() ? old->warm_pool : json::object();
    wp["status"] = status;
    wp["ended_because"] = why;
    wp["ended_at"] = WallSeconds();
    return store_->SetWarmPool(from, wp);
  }

  Status ExpireWarmPools(const std::vector<InstanceRecord>& insts, double now) {
    std::map<std::string, std::vector<InstanceRecord>> expired;
    for (const auto& i : insts) {
      if (i.state == "available" && (i.keep_until < now || now - std::max(i.last_heartbeat, start_wall_) > o_.heartbeat_timeout_s)) {
        expired[i.job_id].push_back(i);
      }
    }
    for (const auto& [from, pool] : expired) {
      // Every instance of the pool goes: a pool is reused whole.
      std::vector<InstanceRecord> all;
      for (const auto& i : insts) {
        if (i.state == "available" && i.job_id == from) all.push_back(i);
      }
      const bool lost = pool[0].keep_until >= now;
      ANNEAL_RETURN_IF_ERROR(EndWarmPool(from, all, "Terminated", lost ? "an instance of the pool was lost" : "keep_alive_s expired"));
    }
    return Status::Ok();
  }

  struct Busy {
    std::string job;
    int attempt = -1;
    double at = 0;
  };

  ServerOptions o_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<httplib::Server> http_;
  std::thread listener_, scheduler_;
  std::string url_;
  double start_wall_ = 0;
  std::mutex mu_;        // stopped_, busy_
  std::mutex sched_mu_;  // serializes status writers: the scheduler, stop, register
  std::condition_variable cv_;
  std::condition_variable cv_pool_;         // a warm pool was taken (pool_taken_, mu_)
  std::set<std::string> pool_taken_;
  bool stopped_ = false;
  std::map<std::string, Busy> busy_;
  std::map<std::string, std::string> pending_reason_;  // why a Pending job waits (mu_)
  // The jobs the server handed each instance (run or health assignments), so an agent may finish
  // shipping a job's lines after the instance moved on (mu_). Not what agents claim: what they got.
  std::map<std::string, std::set<std::string>> granted_;
  ExecutionRoles roles_;
  std::unique_ptr<WebhookSender> webhooks_;  // null without --webhook
};

}  // namespace

Result<std::unique_ptr<ControlServer>> ControlServer::Start(const ServerOptions& o) {
  if (o.data_dir.empty()) return InvalidInput("anneal server needs --data-dir DIR (where the job store lives)");
  auto s = std::make_unique<Server>(o);
  ANNEAL_RETURN_IF_ERROR(s->Init());
  return std::unique_ptr<ControlServer>(std::move(s));
}

}  // namespace anneal
