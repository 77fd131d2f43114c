#include "control/exec_routes.h"

#include "control/http_util.h"
#include "core/clock.h"
#include "core/crypto.h"

namespace anneal {

namespace {

using nlohmann::json;

class ExecRoutes : public RoutePart {
 public:
  explicit ExecRoutes(ServerContext& c) : c_(c) {}

  void Add(httplib::Server& h) {
    JobStore* st = c_.store;
    h.Post(R"(/v1/jobs/([^/]+)/exec)", Guarded(st, Access::kSubmit, [this](const httplib::Request& req, httplib::Response& res, const Principal& p) {
      Start(req, res, p);
    }));
    h.Get(R"(/v1/exec/([^/]+)/output)", Guarded(st, Access::kUser, [this](const httplib::Request& req, httplib::Response& res, const Principal& p) {
      if (!Mine(req.matches[1], p, res)) return;
      Reply(res, 200, c_.execs->Output(req.matches[1], Int64Param(req, "after", 0), std::min(5, IntParam(req, "wait_s", 1))));
    }));
    h.Post(R"(/v1/exec/([^/]+)/input)", Guarded(st, Access::kUser, [this](const httplib::Request& req, httplib::Response& res, const Principal& p) {
      if (!Mine(req.matches[1], p, res)) return;
      const auto body = JsonBody(req, res);
      if (!body) return;
      const json& b = *body;
      bool ok = true;
      const std::string bytes = Base64Decode(b.value("data", std::string()), &ok);
      if (!ok) return ReplyError(res, 400, "data: not base64", "data");
      c_.execs->AddInput(req.matches[1], bytes, b.value("eof", false));
      Reply(res, 200, {{"ok", true}});
    }));
    h.Post(R"(/v1/exec/([^/]+)/agent-output)", Guarded(st, Access::kAgent, [this](const httplib::Request& req, httplib::Response& res, const Principal& p) {
      if (!Agents(req.matches[1], p, res)) return;
      const auto body = JsonBody(req, res);
      if (!body) return;
      const json& b = *body;
      for (const json& c : b.value("chunks", json::array())) {
        c_.execs->AddOutput(req.matches[1], c.value("stream", 1), Base64Decode(c.value("data", std::string())));
      }
      if (b.contains("exit_code")) {
        const int code = b["exit_code"].get<int>();
        c_.execs->Finish(req.matches[1], code, b.value("message", ""), c_.clock->Wall());
        Finished(req.matches[1], code);
      }
      Reply(res, 200, {{"ok", true}});
    }));
    h.Get(R"(/v1/exec/([^/]+)/agent-input)", Guarded(st, Access::kAgent, [this](const httplib::Request& req, httplib::Response& res, const Principal& p) {
      if (!Agents(req.matches[1], p, res)) return;
      Reply(res, 200, c_.execs->Input(req.matches[1], Int64Param(req, "after", 0), std::min(5, IntParam(req, "wait_s", 1))));
    }));
  }

 private:
  // POST /v1/jobs/{id}/exec: checks, the session, and its record in the job.
  void Start(const httplib::Request& req, httplib::Response& res, const Principal& p) {
    const std::string id = req.matches[1];
    auto j = c_.store->GetJob(id);
    if (!j.ok()) return ReplyError(res, 500, j.status().message());
    // Another user's job answers as a missing one does (describe's 404): its existence and owner stay theirs.
    if (!*j || ((*j)->owner != p.name && !p.admin())) return ReplyError(res, 404, "no job " + id + " (list yours with anneal jobs)");
    const JobPhase ph = (*j)->phase;
    if (ph != JobPhase::kDownloading && ph != JobPhase::kTraining && ph != JobPhase::kUploading) {
      return ReplyError(res, 409, "job " + id + " is " + PhaseName(ph) + ": anneal exec needs it running (Training)");
    }
    const auto body = JsonBody(req, res);
    if (!body) return;
    const json& b = *body;
    ExecSessions::Request r;
    r.job = id;
    r.user = p.name;
    r.node = b.value("node", 0);
    r.input = b.value("stdin", false);
    r.tty = b.value("tty", false);
    if (!b.contains("command") || !b["command"].is_array() || b["command"].empty()) {
      return ReplyError(res, 400, "command: give the program and its arguments as a non-empty list", "command");
    }
    for (const json& a : b["command"]) r.argv.push_back(a.is_string() ? a.get<std::string>() : a.dump());
    auto all = c_.store->Instances();
    if (!all.ok()) return ReplyError(res, 500, all.status().message());
    const auto mine = InstancesHolding(*all, id);
    for (const InstanceRecord& i : mine) {
      if (i.node == r.node) r.instance = i.id;
    }
    if (r.instance.empty()) {
      return ReplyError(res, 400, "node: " + std::to_string(r.node) + " is not a node of " + id + " (it has " +
                                      std::to_string(mine.size()) + ", from 0)", "node");
    }
    const std::string sid = c_.execs->Create(r, c_.clock->Wall());
    Record(id, {{"id", sid}, {"user", p.name}, {"node", r.node}, {"command", r.argv}, {"at", c_.clock->Wall()},
                {"instance", r.instance}});
    Reply(res, 201, {{"id", sid}, {"instance", r.instance}});
  }

  // The job's exec record (store value "execs:<job>", shown by describe): one entry per use.
  void Record(const std::string& job, const json& entry) {
    std::lock_guard<std::mutex> l(record_mu_);
    auto v = c_.store->GetValue("execs:" + job);
    json list = v.ok() && *v ? json::parse(**v, nullptr, false) : json::array();
    if (!list.is_array()) list = json::array();
    bool found = false;
    for (json& e : list) {
      if (e.value("id", "") == entry.value("id", "")) e.update(entry), found = true;
    }
    if (!found) list.push_back(entry);
    (void)c_.store->SetValue("execs:" + job, list.dump());
  }

  void Finished(const std::string& sid, int exit_code) {
    auto r = c_.execs->Find(sid);
    if (r) Record(r->job, {{"id", sid}, {"exit_code", exit_code}});
  }

  bool Mine(const std::string& sid, const Principal& p, httplib::Response& res) {
    auto r = c_.execs->Find(sid);
    if (!r || (r->user != p.name && !p.admin())) {
      ReplyError(res, 404, "no exec session " + sid);
      return false;
    }
    return true;
  }

  bool Agents(const std::string& sid, const Principal& p, httplib::Response& res) {
    auto r = c_.execs->Find(sid);
    if (!r || r->instance != p.name) {
      ReplyError(res, 404, "no exec session " + sid + " for this instance");
      return false;
    }
    return true;
  }

  ServerContext& c_;
  std::mutex record_mu_;
};

}  // namespace

std::unique_ptr<RoutePart> AddExecRoutes(httplib::Server& h, ServerContext& c) {
  auto r = std::make_unique<ExecRoutes>(c);
  r->Add(h);
  return r;
}

}  // namespace anneal
