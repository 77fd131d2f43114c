// The agent routes of `anneal server` (docs/api/openapi.yaml, "agents"): registration with the join
// token; the heartbeat and its answer (protocol/wire.h HeartbeatMsg / HeartbeatReply: run with the
// assignment, health with the round's check, stop, exit); and, with the agent's own token and only
// for the jobs its instance serves, logs, metrics, node reports, health results and rendezvous.
#include "control/agent_routes.h"

#include <algorithm>
#include <regex>

#include "control/auth.h"
#include "control/health_rounds.h"
#include "control/http_util.h"
#include "core/json_fields.h"
#include "protocol/job_definition.h"
#include "protocol/wire.h"
#include "core/bounded_parse.h"
#include "core/crypto.h"

namespace anneal {

namespace {

using nlohmann::json;

bool Running(JobPhase p) { return p == JobPhase::kDownloading || p == JobPhase::kTraining || p == JobPhase::kUploading; }

class AgentRoutes : public RoutePart {
 public:
  explicit AgentRoutes(ServerContext& c) : c_(c) {}

  void Add(httplib::Server& h) {
    JobStore* st = c_.store;
    // Agent-facing: registration with the join token, everything else with the agent's own token and
    // only for the jobs its instance serves.
    h.Post("/v1/agents", Guarded(st, Access::kJoin, [this](const httplib::Request& req, httplib::Response& res, const Principal& p) {
      Register(req, res, p);
    }));
    h.Post(R"(/v1/agents/([^/]+)/heartbeat)", Guarded(st, Access::kAgent, [this](const httplib::Request& req, httplib::Response& res, const Principal& p) {
      if (p.name != req.matches[1]) return ReplyError(res, 403, "an agent's token is valid for its own instance only");
      Heartbeat(req, res);
    }));
    AgentRoute(h, "Post", R"(/v1/jobs/([^/]+)/logs)", [this](const httplib::Request& req, httplib::Response& res, const json& b, const Principal&) -> Status {
      json given = json::array();
      ANNEAL_RETURN_IF_ERROR(JsonFields(b, "the logs").GetArray("lines", &given).status());
      std::vector<LogLine> lines;
      for (const json& x : given) {
        ANNEAL_ASSIGN_OR_RETURN(LogLine line, LogLineFromJson(x));
        lines.push_back(std::move(line));
      }
      ANNEAL_RETURN_IF_ERROR(c_.store->AppendLogs(req.matches[1], lines));
      Reply(res, 200, {{"stored", lines.size()}});
      return Status::Ok();
    });
    AgentRoute(h, "Post", R"(/v1/jobs/([^/]+)/metrics)", [this](const httplib::Request& req, httplib::Response& res, const json& b, const Principal&) -> Status {
      std::vector<MetricPoint> pts;
      // A point without a numeric value (JSON has no NaN: an older agent sent null) is dropped, not the
      // batch: refusing it made the agent retry the batch forever.
      json given = json::array();
      ANNEAL_RETURN_IF_ERROR(JsonFields(b, "the metrics").GetArray("points", &given).status());
      for (const json& x : given) {
        if (!x.is_object() || !x.contains("value") || !x["value"].is_number()) continue;
        ANNEAL_ASSIGN_OR_RETURN(MetricPoint point, MetricPointFromJson(x));
        pts.push_back(std::move(point));
      }
      ANNEAL_RETURN_IF_ERROR(c_.store->AppendMetrics(req.matches[1], pts));
      if (c_.latest) c_.latest->Note(req.matches[1], pts);
      Reply(res, 200, {{"stored", pts.size()}});
      return Status::Ok();
    });
    AgentRoute(h, "Post", R"(/v1/jobs/([^/]+)/reports)", [this](const httplib::Request& req, httplib::Response& res, const json& b, const Principal&) -> Status {
      ANNEAL_ASSIGN_OR_RETURN(NodeReport r, NodeReportFromJson(b));
      r.at = c_.clock->Wall();
      ANNEAL_RETURN_IF_ERROR(c_.store->PutNodeReport(req.matches[1], r));
      c_.scheduler->Wake();
      Reply(res, 200, {{"ok", true}});
      return Status::Ok();
    });
    AgentRoute(h, "Post", R"(/v1/jobs/([^/]+)/health)", [this](const httplib::Request& req, httplib::Response& res, const json& b, const Principal& p) -> Status {
      return PostHealth(req.matches[1], b, p, res);
    });
    // A meeting (protocol/wire.h's MeetingKey): /rendezvous/<attempt>/<round>.
    AgentRoute(h, "Put", R"(/v1/jobs/([^/]+)/rendezvous/([0-9]+)/([0-9]+))", [this](const httplib::Request& req, httplib::Response& res, const json& b, const Principal&) -> Status {
      ANNEAL_ASSIGN_OR_RETURN(std::string v, c_.store->SetMeeting(req.matches[1], std::stoi(req.matches[2]),
                                                                  std::stoi(req.matches[3]), b.dump()));
      Reply(res, 200, json::parse(v));
      return Status::Ok();
    });
    AgentRoute(h, "Get", R"(/v1/jobs/([^/]+)/rendezvous/([0-9]+)/([0-9]+))", [this](const httplib::Request& req, httplib::Response& res, const json&, const Principal&) -> Status {
      ANNEAL_ASSIGN_OR_RETURN(auto v, c_.store->GetMeeting(req.matches[1], std::stoi(req.matches[2]), std::stoi(req.matches[3])));
      if (!v) {
        ReplyError(res, 404, "not yet");
        return Status::Ok();
      }
      Reply(res, 200, json::parse(*v));
      return Status::Ok();
    });
  }

 private:
  // An agent route on a job: the agent's token, its instance serving that job (assigned to it now,
  // or still running it by its last heartbeat), and a JSON body (GET: none).
  void AgentRoute(httplib::Server& h, const std::string& method, const std::string& pattern,
                  std::function<Status(const httplib::Request&, httplib::Response&, const json&, const Principal&)> f) {
    auto handler = Guarded(c_.store, Access::kAgent,
                           [this, method, f](const httplib::Request& req, httplib::Response& res, const Principal& p) {
                             const std::string job = req.matches[1];
                             auto inst = c_.store->GetInstance(p.name);
                             if (!inst.ok()) return ReplyError(res, 500, inst.status().message());
                             bool serves = *inst && (*inst)->job_id == job;
                             // A job it was given and may still be finishing.
                             serves = serves || c_.agents->Granted(p.name, job);
                             if (!serves) return ReplyError(res, 403, "instance " + p.name + " does not serve job " + job);
                             json b = json::object();
                             if (method != "Get") {
                               auto body = JsonBody(req, res);
                               if (!body) return;
                               b = std::move(*body);
                             }
                             Status s = f(req, res, b, p);
                             if (!s.ok()) ReplyError(res, HttpStatusOf(s), s.message());
                           });
    if (method == "Post") {
      h.Post(pattern, handler);
    } else if (method == "Put") {
      h.Put(pattern, handler);
    } else {
      h.Get(pattern, handler);
    }
  }

  template <typename F>
  void WithJson(const httplib::Request& req, httplib::Response& res, F&& f) {
    auto b = JsonBody(req, res);
    if (!b) return;
    Status st = f(*b);
    if (!st.ok()) ReplyError(res, HttpStatusOf(st), st.message());
  }

  // POST /v1/agents. A requested instance registers with its one-time secret, once, under its own id;
  // the join token admits operators' agents under ids of their own, never one a backend was asked for
  // (`<job>-a<attempt>-n<node>`), nor one held by an instance that is alive, nor one still holding a
  // job: a quiet instance's job is handled as lost (scheduler), never handed to a new registration.
  void Register(const httplib::Request& req, httplib::Response& res, const Principal& p) {
    WithJson(req, res, [&](const json& b) -> Status {
      std::string id = b.value("id", std::string());
      const double now = c_.clock->Wall();
      std::lock_guard<std::mutex> sl(c_.scheduler->writers());
      std::optional<InstanceRecord> known;
      if (!id.empty()) {
        ANNEAL_ASSIGN_OR_RETURN(known, c_.store->GetInstance(id));
      }
      const bool secret = p.kind == "register";
      InstanceRecord r;
      if (std::string why = Refusal(p, id, known, now); !why.empty()) {
        ReplyError(res, 409, why);
        return Status::Ok();
      }
      if (known && known->state == InstanceState::kReleased) {  // an operator's agent back after its release
        ANNEAL_RETURN_IF_ERROR(c_.store->DeleteInstance(id));
        known.reset();
      }
      if (known) {
        r = *known;
        if (r.state == InstanceState::kRequested) r.state = r.job_id.empty() ? InstanceState::kIdle : InstanceState::kAssigned;
        if (r.state == InstanceState::kUnhealthy) r.state = InstanceState::kIdle;  // its agent joined again: back in the pool
      } else {
        if (id.empty()) id = "agent-" + Sha256Hex(b.dump() + std::to_string(now)).substr(0, 12);
        r.id = id;
        r.backend = kJoinedBackend;  // an agent that joined by itself
        r.state = InstanceState::kIdle;
      }
      r.address = b.value("address", std::string("127.0.0.1"));
      r.instance_type = b.value("instance_type", r.instance_type.empty() ? std::string("local") : r.instance_type);
      int64_t slots = r.slots;
      if (b.contains("slots") && !JsonIntIn(b["slots"], 1, 4096, &slots)) {
        ReplyError(res, 400, "slots: must be a whole number from 1 to 4096, got " + b["slots"].dump(), "slots");
        return Status::Ok();
      }
      r.slots = static_cast<int>(slots);
      r.registered_at = now;
      r.last_heartbeat = now;
      ANNEAL_RETURN_IF_ERROR(c_.store->PutInstance(r));
      // The secret is spent; a fresh token for the instance, and one it held before (an operator's
      // agent re-joining) stops working.
      if (secret) ANNEAL_RETURN_IF_ERROR(c_.store->DeleteTokensOf(r.id, "register"));
      ANNEAL_RETURN_IF_ERROR(c_.store->DeleteTokensOf(r.id, "agent"));
      ANNEAL_ASSIGN_OR_RETURN(std::string token, IssueToken(c_.store, r.id, "agent", "instance token", now));
      c_.scheduler->Wake();
      Reply(res, 200, {{"id", r.id}, {"heartbeat_s", c_.o.heartbeat_s}, {"token", token}});
      return Status::Ok();
    });
  }

  // Why this registration may not take the id ("" when it may).
  std::string Refusal(const Principal& p, const std::string& id, const std::optional<InstanceRecord>& known,
                      double now) const {
    if (p.kind == "register") {
      if (id != p.name) return "this registration secret is for instance " + p.name + ", not '" + id + "'";
      if (!known || known->state != InstanceState::kRequested) {
        return "instance " + id + " is not waiting for its agent (" +
               (known ? std::string(InstanceStateName(known->state)) : std::string("unknown")) + ")";
      }
      return "";
    }
    if (LooksRequested(id)) {
      return "instance id " + id + " has the form the server gives the instances it requests (<job>-a<attempt>-n<node>), "
             "which register with their own secret: join under another --instance-id";
    }
    if (!known) return "";
    if (known->backend != kJoinedBackend) {
      return "instance " + id + " was requested from the " + known->backend + " backend: join under another --instance-id";
    }
    const double quiet = now - std::max(known->last_heartbeat, c_.start_wall);
    if (quiet < c_.o.heartbeat_timeout_s && known->state != InstanceState::kUnhealthy) {
      return "instance " + id + " is registered and alive: join under another --instance-id";
    }
    if (!known->job_id.empty() && known->state != InstanceState::kIdle && known->state != InstanceState::kUnhealthy &&
        known->state != InstanceState::kReleased) {
      return "instance " + id + " went quiet while holding job " + known->job_id + ", which handles it as lost; join again "
             "once the server has released it (within a few seconds), or under another --instance-id";
    }
    return "";
  }

  // The ids the scheduler gives requested instances: <job>-a<attempt>-n<node>, and -h<round> for a
  // health check's replacement (control/scheduler.cc).
  static bool LooksRequested(const std::string& id) {
    static const std::regex re(".+-a[0-9]+-n[0-9]+(-h[0-9]+)?");
    return std::regex_match(id, re);
  }

  void Heartbeat(const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    WithJson(req, res, [&](const json& b) -> Status {
      ANNEAL_ASSIGN_OR_RETURN(const HeartbeatMsg hb, HeartbeatMsgFromJson(b));
      ANNEAL_ASSIGN_OR_RETURN(std::optional<InstanceRecord> inst, c_.store->GetInstance(id));
      if (inst) {
        const double now = c_.clock->Wall();
        ANNEAL_RETURN_IF_ERROR(c_.store->Heartbeat(id, now));
        c_.agents->Claim(id, {hb.job, hb.attempt, now});
      }
      if (inst && inst->state == InstanceState::kAvailable && hb.job.empty() && hb.health.empty()) {
        // A warm pool's agent: its heartbeat waits (long poll, up to heartbeat_s) for a job to take
        // the pool, so the reuse starts at once instead of at the agent's next heartbeat.
        c_.agents->HoldUntilTaken(id, c_.o.heartbeat_s);
        ANNEAL_ASSIGN_OR_RETURN(inst, c_.store->GetInstance(id));
        if (inst) ANNEAL_RETURN_IF_ERROR(c_.store->Heartbeat(id, c_.clock->Wall()));
      }
      if (!inst) {
        ReplyError(res, 404, "unknown instance " + id + ": register again");
        return Status::Ok();
      }
      ANNEAL_ASSIGN_OR_RETURN(HeartbeatReply reply, Answer(*inst, hb));
      if (c_.execs && !hb.job.empty()) reply.execs = c_.execs->TakeFor(id);  // anneal exec, for the job it runs
      Reply(res, 200, ToJson(reply));
      return Status::Ok();
    });
  }

  // What the instance does next, from its record, its job's status and what it says it runs.
  Result<HeartbeatReply> Answer(const InstanceRecord& inst, const HeartbeatMsg& hb) {
    HeartbeatReply r;
    const bool busy = !hb.job.empty(), checking = !hb.health.empty();
    if (inst.state == InstanceState::kReleased) {
      r.action = HeartbeatAction::kExit;
    } else if (inst.state == InstanceState::kAvailable) {
      r.action = busy ? HeartbeatAction::kStop : HeartbeatAction::kNone;  // a warm pool: idle until reused,
      r.next_s = 0;                       // and polling again at once (the hold above)
    } else if (inst.job_id.empty()) {
      r.action = busy || checking ? HeartbeatAction::kStop : HeartbeatAction::kNone;
    } else {
      ANNEAL_ASSIGN_OR_RETURN(std::optional<JobRecord> job, c_.store->GetJob(inst.job_id));
      if (job && job->phase == JobPhase::kStarting) {
        ANNEAL_RETURN_IF_ERROR(c_.scheduler->StartIfReady(job->id));
        ANNEAL_ASSIGN_OR_RETURN(job, c_.store->GetJob(inst.job_id));
        if (job && job->phase == JobPhase::kStarting) return WhileStarting(*job, inst, hb);
      }
      if (!job || IsTerminal(job->phase)) {
        r.action = busy ? HeartbeatAction::kStop : HeartbeatAction::kNone;
      } else if (job->phase == JobPhase::kStopping) {
        r.action = busy || checking ? HeartbeatAction::kStop : HeartbeatAction::kNone;
      } else if (Running(job->phase) && !(hb.job == job->id && hb.attempt == job->attempt)) {
        return ToRun(*job, inst, busy);
      }
    }
    return r;
  }

  // A Starting job's instance: the round's health check if it is its turn; either way, ask again
  // soon (the job starts once its other instances registered and passed).
  Result<HeartbeatReply> WhileStarting(const JobRecord& job, const InstanceRecord& inst, const HeartbeatMsg& hb) {
    HeartbeatReply r;
    r.next_s = 0.1;
    if (!c_.o.health.enabled) return r;
    // Under the writers' lock: a pass replacing an unhealthy instance writes the release, the new
    // instance and the next round one after another; read between them, the check would name the
    // instance being replaced among its peers.
    std::lock_guard<std::mutex> w(c_.scheduler->writers());
    ANNEAL_ASSIGN_OR_RETURN(auto mine, InstancesOf(job.id));
    ANNEAL_ASSIGN_OR_RETURN(auto results, c_.store->Health(job.id, job.attempt));
    ANNEAL_ASSIGN_OR_RETURN(int round, CurrentHealthRound(*c_.store, job.id, job.attempt));
    auto check = HealthCheckFor(c_.o.health, job, mine, results, round, inst, hb.health);
    if (check) {
      c_.agents->Grant(inst.id, job.id);
      r.action = HeartbeatAction::kHealth;
      r.health = std::move(*check);
    }
    return r;
  }

  // A running job's instance that is not running this attempt: run it, unless its node already
  // finished it (the job ends in a moment: the instance is released or pooled).
  Result<HeartbeatReply> ToRun(const JobRecord& job, const InstanceRecord& inst, bool busy) {
    HeartbeatReply r;
    ANNEAL_ASSIGN_OR_RETURN(auto reps, c_.store->NodeReports(job.id, job.attempt));
    bool finished = false;
    for (const auto& x : reps) finished |= x.node == inst.node && x.state == NodeState::kFinished;
    if (finished) {
      r.next_s = 0.1;
    } else if (!busy) {
      r.action = HeartbeatAction::kRun;
      ANNEAL_ASSIGN_OR_RETURN(r.assignment, AssignmentFor(job, inst));
    }
    return r;
  }

  // The job's instances that hold it now (not released), by node.
  Result<std::vector<InstanceRecord>> InstancesOf(const std::string& job) {
    ANNEAL_ASSIGN_OR_RETURN(auto insts, c_.store->Instances());
    return InstancesHolding(insts, job);
  }

  Result<Assignment> AssignmentFor(const JobRecord& job, const InstanceRecord& inst) {
    c_.agents->Grant(inst.id, job.id);
    Assignment a;
    a.job = job.id;
    a.attempt = job.attempt;
    a.node = inst.node;
    a.addresses.resize(job.spec.instance_count);
    ANNEAL_ASSIGN_OR_RETURN(auto insts, InstancesOf(job.id));
    for (const auto& i : insts) {
      if (i.node >= 0 && i.node < static_cast<int>(a.addresses.size())) a.addresses[i.node] = i.address;
    }
    a.spec = job.spec;
    // The start meets where the attempt's last health round met (protocol/wire.h's MeetingKey).
    ANNEAL_ASSIGN_OR_RETURN(a.meeting_round, CurrentHealthRound(*c_.store, job.id, job.attempt));
    // The execution role's storage credentials: the agent's own storage calls and the ranks use them.
    auto role = c_.roles.roles.find(a.spec.role);
    if (role != c_.roles.roles.end() && !role->second.access_key_id.empty()) {
      a.credentials = {{"AWS_ACCESS_KEY_ID", role->second.access_key_id},
                       {"AWS_SECRET_ACCESS_KEY", role->second.secret_access_key}};
    }
    return a;
  }

  Status PostHealth(const std::string& job, const json& b, const Principal& p, httplib::Response& res) {
    ANNEAL_RETURN_IF_ERROR(c_.store->PutHealth(job, b.value("attempt", 0), HealthResultFrom(p.name, b, c_.clock->Wall())));
    c_.scheduler->Wake();
    Reply(res, 200, {{"ok", true}});
    return Status::Ok();
  }

  ServerContext& c_;
};

}  // namespace

std::unique_ptr<RoutePart> AddAgentRoutes(httplib::Server& h, ServerContext& c) {
  auto r = std::make_unique<AgentRoutes>(c);
  r->Add(h);
  return r;
}

}  // namespace anneal
