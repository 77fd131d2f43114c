#include "agent/heartbeat_loop.h"

#include <algorithm>

#include "agent/agent_signal.h"
#include "agent/meeting.h"
#include "protocol/exit_cause.h"

namespace anneal {

namespace {

using nlohmann::json;

// A run assignment this agent cannot use (a spec it cannot read: a server of another version) ends
// the attempt on this node as a user error, with the reason, instead of being asked again for ever.
void RefuseAssignment(ApiClient& client, const json& reply, const Status& why) {
  const json a = reply.value("assignment", json::object());
  if (reply.value("action", std::string()) != "run" || !a.is_object() || !a.contains("job") || !a["job"].is_string()) return;
  NodeReport r;
  r.attempt = a.value("attempt", 0);
  r.node = a.value("node", 0);
  r.state = NodeState::kFinished;
  r.exit_code = 2;
  r.cause = ExitCauseName(ExitCause::kUserError);
  r.local = true;
  r.message = "this agent cannot run the assignment: " + why.message();
  const json report = ToJson(r);  // (its "at" is the server's to stamp)
  (void)client.Post("/v1/jobs/" + a["job"].get<std::string>() + "/reports", report);
}

// The heartbeat answer's new anneal exec sessions: each runs if this agent runs that job (prepared),
// else it is answered at once with exit 255.
void StartExecs(const AgentOptions& o, const json& sessions, JobRunner* runner,
                std::vector<std::unique_ptr<ExecRunner>>* execs) {
  for (const json& e : sessions) {
    const std::string job = e.value("job", std::string()), id = e.value("id", std::string());
    std::optional<ExecPlace> place = runner && runner->job() == job ? runner->Place() : std::nullopt;
    if (place) {
      AgentSay("exec " + id + " into " + job);
      execs->push_back(std::make_unique<ExecRunner>(o.server_url, e, std::move(*place)));
      continue;
    }
    auto c = ApiClient::Make(o.server_url, 10);
    if (c.ok()) {
      (void)(*c)->Post("/v1/exec/" + id + "/agent-output",
                       {{"exit_code", 255}, {"message", "this instance is not running " + job + "'s ranks now"}});
    }
  }
}

}  // namespace

HeartbeatLoop::HeartbeatLoop(AgentOptions o, std::string address, std::string join, std::unique_ptr<ApiClient> client)
    : o_(std::move(o)), address_(std::move(address)), join_(std::move(join)), id_(o_.instance_id),
      client_(std::move(client)) {}

Status HeartbeatLoop::Run() {
  Status result;
  for (;;) {
    if (AgentSignal()) {
      AgentSay("stopping on signal " + std::to_string(AgentSignal()));
      break;
    }
    Reap();
    double next_s = o_.heartbeat_s;  // the server may ask for the next heartbeat sooner
    Status st;
    if (!registered_) {
      st = Register();
      if (st.code() == Code::kCancelled) {
        result = InvalidInput(st.message());
        break;
      }
      registered_ = st.ok();
    }
    if (registered_) {
      auto reply = Beat();
      st = reply.status();
      if (reply.ok()) {
        unreachable_since_ = -1;
        if (reply->next_s >= 0) next_s = std::min(o_.heartbeat_s, reply->next_s);
        if (!Act(*reply)) break;
      }
    }
    if (!st.ok() && st.code() != Code::kNotFound && !Unreachable(st, &result)) break;
    WaitFor(next_s);
  }
  health_.reset();  // abandons a health check (kills its command and collective) and waits for it
  execs_.clear();   // kills the exec sessions' commands
  runner_.reset();  // stops and waits: ranks get SIGTERM and the grace period, uploads and reports run
  return result;
}

Status HeartbeatLoop::Register() {
  json body = {{"address", address_}, {"slots", o_.slots}, {"instance_type", o_.instance_type}};
  if (!id_.empty()) body["id"] = id_;
  client_->set_token(join_);
  auto r = client_->Post("/v1/agents", body);
  if (!r.ok() && r.status().code() == Code::kInvalidInput) {
    return Status(Code::kCancelled, "the server refused to register this agent: " + r.status().message() +
                                        "; give the server's join token (--join-token-file)");
  }
  ANNEAL_RETURN_IF_ERROR(r.status());
  id_ = (*r)["id"].get<std::string>();
  o_.instance_id = id_;
  // The instance's own token, for every later call of this process (the job runners' too).
  const std::string token = r->value("token", std::string());
  ApiClient::SetProcessToken(token);
  client_->set_token(token);
  AgentSay("registered as " + id_ + " (" + address_ + ", " + std::to_string(o_.slots) + " slot(s), type " +
           o_.instance_type + ") with " + o_.server_url);
  return Status::Ok();
}

// One heartbeat. An answer this agent cannot use is logged (a run it cannot read is refused to the
// server) and taken as none.
Result<HeartbeatReply> HeartbeatLoop::Beat() {
  HeartbeatMsg hb;
  if (runner_) hb.job = runner_->job(), hb.attempt = runner_->attempt();
  if (health_) hb.health = health_->Key();  // so the server does not ask again meanwhile
  auto r = client_->Post("/v1/agents/" + id_ + "/heartbeat", ToJson(hb));
  if (!r.ok()) {
    // A server that lost us (404), or dropped our token with the instance (401): join again.
    if (r.status().code() == Code::kNotFound || r.status().message().find("HTTP 401") != std::string::npos) {
      registered_ = false;
      return NotFound(r.status().message());
    }
    return r.status();
  }
  auto reply = HeartbeatReplyFromJson(*r);
  if (reply.ok()) return reply;
  AgentSay("the server's heartbeat answer is unusable: " + reply.status().message());
  RefuseAssignment(*client_, *r, reply.status());
  return HeartbeatReply();
}

bool HeartbeatLoop::Act(HeartbeatReply& reply) {
  StartExecs(o_, reply.execs, runner_.get(), &execs_);
  switch (reply.action) {
    case HeartbeatAction::kNone:
      return true;
    case HeartbeatAction::kRun:
      if (runner_) return true;
      if (health_) health_->Stop();  // the server has decided without it
      AgentSay("assigned " + reply.assignment.job + " (node " + std::to_string(reply.assignment.node) + ")");
      runner_ = std::make_unique<JobRunner>(o_, address_, std::move(reply.assignment), [this] { Wake(); });
      return true;
    case HeartbeatAction::kHealth: {
      const json& h = reply.health;
      if (health_ && !health_->Is(h)) {
        health_->Stop();  // a different round: abandon this one; the server asks again once it ended
      } else if (!health_ && !runner_ && h.is_object() && h.contains("job") && h["job"].is_string()) {
        health_ = std::make_unique<HealthRunner>(o_, address_, h, [this] { Wake(); });
      }
      return true;
    }
    case HeartbeatAction::kStop:
      if (runner_) runner_->Stop();
      if (health_) health_->Stop();  // kills a running command or collective
      return true;
    case HeartbeatAction::kExit:
      AgentSay("released by the server");
      return false;
  }
  return true;
}

bool HeartbeatLoop::Unreachable(const Status& st, Status* result) {
  if (unreachable_since_ < 0) {
    unreachable_since_ = o_.clock->Monotonic();
    AgentSay("the server is unreachable (" + st.message() + "); retrying");
  }
  const bool past = o_.clock->Monotonic() - unreachable_since_ > o_.orphan_timeout_s;
  if (runner_ && !orphan_stop_ && past) {
    AgentSay("the server at " + o_.server_url + " was unreachable for " +
             std::to_string(static_cast<int>(o_.orphan_timeout_s)) + " s (--orphan-timeout-s): stopping the ranks of " +
             runner_->job() + " (they save a checkpoint) instead of training on unwatched");
    runner_->Orphan();
    orphan_stop_ = true;
  }
  if (!runner_ && past) {
    *result = PeerError("the server at " + o_.server_url + " was unreachable for " +
                        std::to_string(static_cast<int>(o_.orphan_timeout_s)) + " s; exiting");
    return false;
  }
  return true;
}

// Ends what is done: the job runner (and the hold of its meeting's ports), the health check, the exec
// sessions that ended (every one when the job is gone, killing its commands).
void HeartbeatLoop::Reap() {
  if (runner_ && runner_->done()) {
    PortHolds::Process().ReleaseJob(runner_->job());
    runner_.reset(), orphan_stop_ = false;
  }
  if (health_ && health_->done()) health_.reset();
  for (auto it = execs_.begin(); it != execs_.end();) {
    it = (*it)->done() || !runner_ || runner_->job() != (*it)->job() ? execs_.erase(it) : std::next(it);
  }
}

// Until the next heartbeat: woken at once when the job or the health check ends; a signal is seen
// within 250 ms.
void HeartbeatLoop::WaitFor(double seconds) {
  Clock& clock = *o_.clock;
  const double until = clock.Monotonic() + seconds;
  std::unique_lock<std::mutex> l(wake_mu_);
  while (clock.Monotonic() < until && !AgentSignal() && !(runner_ && runner_->done()) &&
         !(health_ && health_->done())) {
    clock.WaitFor(wake_, l, std::min(0.25, std::max(0.0, until - clock.Monotonic())));
  }
}

void HeartbeatLoop::Wake() {
  std::lock_guard<std::mutex> l(wake_mu_);
  wake_.notify_all();
}

}  // namespace anneal
