// The server's scheduler and API, in process, with the static backend and a hand-driven "agent"
// (ApiClient calls): placement, the run/stop/exit answers, node reports driving the statuses, a
// failure reason with the failing rank's last lines, stopping, and a restart that keeps everything.
#include "control/server.h"

#include <gtest/gtest.h>

#include <thread>

#include "protocol/api_client.h"
#include "protocol/wire.h"
#include "core/env.h"
#include "testing/temp_dir.h"
#include "testing/token_file.h"

namespace anneal {
namespace {

using nlohmann::json;

std::unique_ptr<ControlServer> StartStatic(const std::string& dir, int port = 0, bool health = false) {
  ServerOptions o;
  o.data_dir = dir;
  o.port = port;
  o.backend = "static";
  o.tick_s = 0.02;
  o.health.enabled = health;
  auto s = ControlServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

// Polls the job until its secondary status is `want` (or 10 s pass).
json WaitFor(ApiClient* c, const std::string& id, const std::string& want) {
  json j;
  for (int i = 0; i < 500; ++i) {
    auto r = c->Get("/v1/jobs/" + id);
    if (r.ok()) {
      j = *r;
      if (j["secondary_status"] == want) return j;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << id << " never reached " << want << ": " << j.dump();
  return j;
}

// A client with the admin token the server created.
std::unique_ptr<ApiClient> Admin(const ControlServer& s, const std::string& dir) {
  auto c = ApiClient::Make(s.url());
  EXPECT_TRUE(c.ok());
  (*c)->set_token(testing::ReadTokenFile(JoinPath(dir, "admin.token")));
  return std::move(*c);
}

// Registers a hand-driven agent with the join token; returns its id and a client with its token.
std::string Join(const ControlServer& s, const std::string& dir, const json& body, std::unique_ptr<ApiClient>* agent) {
  auto c = ApiClient::Make(s.url());
  EXPECT_TRUE(c.ok());
  (*c)->set_token(testing::ReadTokenFile(JoinPath(dir, "join.token")));
  auto r = (*c)->Post("/v1/agents", body);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return "";
  (*c)->set_token((*r)["token"].get<std::string>());
  *agent = std::move(*c);
  return (*r)["id"];
}

json Heartbeat(ApiClient* c, const std::string& agent, const json& busy = json::object()) {
  auto r = c->Post("/v1/agents/" + agent + "/heartbeat", busy);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : json::object();
}

void Report(ApiClient* c, const std::string& job, const std::string& state, int exit_code = -1, int failed_rank = -1,
            const std::string& cause = "", int attempt = 0) {
  json b = {{"attempt", attempt}, {"node", 0}, {"state", state}, {"exit_code", exit_code}, {"message", state}};
  if (failed_rank >= 0) b["failed_rank"] = failed_rank;
  if (!cause.empty()) {
    b["cause"] = cause;
    b["local"] = true;
  }
  ASSERT_TRUE(c->Post("/v1/jobs/" + job + "/reports", b).ok());
}

TEST(ControlServer, RunsAJobOnAJoinedAgentAndSurvivesARestart) {
  testing::TempDir dir;
  auto server = StartStatic(dir.path());
  ASSERT_TRUE(server);
  auto admin = Admin(*server, dir.path());
  ApiClient* api = admin.get();
  std::unique_ptr<ApiClient> agent_client;
  const std::string agent = Join(*server, dir.path(), {{"address", "127.0.0.1"}, {"slots", 2}, {"instance_type", "cpu"}}, &agent_client);
  ApiClient* ag = agent_client.get();

  auto sub = api->Post("/v1/jobs", {{"name", "ok"},
                                    {"entrypoint", {{"command", "true"}}},
                                    {"resources", {{"instance_type", "cpu"}, {"procs_per_instance", 2}}}});
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  const std::string id = (*sub)["id"];
  WaitFor(api, id, "Downloading");
  // The heartbeat that finds every instance registered starts the job and hands out the assignment.
  json a = Heartbeat(ag, agent);
  ASSERT_EQ(a["action"], "run") << a.dump();
  EXPECT_EQ(a["assignment"]["job"], id);
  EXPECT_EQ(a["assignment"]["nnodes"], 1);
  // While the agent runs it, no second assignment.
  EXPECT_EQ(Heartbeat(ag, agent, {{"job", id}, {"attempt", 0}})["action"], "none");
  Report(ag, id, "downloading");
  // A state no agent sends is refused naming the field (before NodeState, it was stored, and the
  // scheduler's next pass threw looking it up).
  auto odd = ag->Post("/v1/jobs/" + id + "/reports", {{"attempt", 0}, {"node", 0}, {"state", "sleeping"}});
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().code(), Code::kInvalidInput) << odd.status().ToString();
  EXPECT_NE(odd.status().message().find("state: must be downloading, training, uploading or finished"), std::string::npos)
      << odd.status().message();
  Report(ag, id, "training");
  WaitFor(api, id, "Training");
  ASSERT_TRUE(ag->Post("/v1/jobs/" + id + "/logs",
                        {{"lines", json::array({ToJson(LogLine{0, 0, 0, 1, 0, "stdout", 1.0, "hello"})})}})
                  .ok());
  // A batch with a point whose value is null (JSON's NaN) is taken without that point, not refused:
  // a refused batch is retried by its agent forever.
  json bad = {{"attempt", 0}, {"node", 0}, {"seq", 2}, {"name", "train_loss"}, {"rank", 0}, {"at", 1.0}, {"value", nullptr}};
  json good = {{"attempt", 0}, {"node", 0}, {"seq", 3}, {"name", "train_loss"}, {"rank", 0}, {"at", 1.0}, {"value", 2.5}};
  ASSERT_TRUE(ag->Post("/v1/jobs/" + id + "/metrics", {{"points", json::array({bad, good})}}).ok());
  auto pts = api->Get("/v1/jobs/" + id + "/metrics");
  ASSERT_TRUE(pts.ok());
  ASSERT_EQ((*pts)["points"].size(), 1u) << pts->dump();
  EXPECT_EQ((*pts)["points"][0]["value"], 2.5);
  Report(ag, id, "finished", 0);
  json done = WaitFor(api, id, "Completed");
  EXPECT_EQ(done["status"], "Completed");
  EXPECT_EQ(done["exit_code"], 0);
  std::vector<std::string> phases;
  for (const auto& h : done["history"]) phases.push_back(h["secondary_status"]);
  EXPECT_EQ(phases, (std::vector<std::string>{"Pending", "Starting", "Downloading", "Training", "Completed"}));

  // A failing job: the reason names the node's message and the failing rank's last lines.
  auto fail = api->Post("/v1/jobs", {{"name", "bad"}, {"entrypoint", {{"command", "false"}}}, {"resources", {{"instance_type", "cpu"}}}});
  ASSERT_TRUE(fail.ok());
  const std::string fid = (*fail)["id"];
  WaitFor(api, fid, "Downloading");
  ASSERT_EQ(Heartbeat(ag, agent)["action"], "run");
  ASSERT_TRUE(ag->Post("/v1/jobs/" + fid + "/logs",
                        {{"lines", json::array({ToJson(LogLine{0, 0, 0, 1, 3, "stderr", 1.0, "Traceback: out of cheese"})})}})
                  .ok());
  Report(ag, fid, "finished", 2, 3, "user_error");
  json failed = WaitFor(api, fid, "Failed");
  EXPECT_EQ(failed["exit_code"], 2);
  EXPECT_EQ(failed["failure_reason"].get<std::string>().rfind("user_error: node 0", 0), 0u) << failed.dump();
  EXPECT_NE(failed["failure_reason"].get<std::string>().find("out of cheese"), std::string::npos) << failed.dump();

  // A job no agent can take stays Pending (and holds the queue), and a stop ends it at once.
  auto gpu = api->Post("/v1/jobs", {{"name", "gpu"}, {"entrypoint", {{"command", "true"}}}, {"resources", {{"instance_type", "h200"}}}});
  ASSERT_TRUE(gpu.ok());
  const std::string gid = (*gpu)["id"];
  // A scheduler pass has considered it once it carries a pending reason (no sleep-then-assert).
  json pend;
  for (int i = 0; i < 500; ++i) {
    pend = *api->Get("/v1/jobs/" + gid);
    if (pend.contains("pending_reason")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(pend.contains("pending_reason")) << "no scheduler pass considered the job in 5 s: " << pend.dump();
  EXPECT_EQ(pend["secondary_status"], "Pending") << pend.dump();
  ASSERT_TRUE(api->Post("/v1/jobs/" + gid + "/stop", json::object()).ok());
  EXPECT_EQ((*api->Get("/v1/jobs/" + gid))["status"], "Stopped");

  // Errors: an unknown agent is told to register again; a missing job is 404.
  auto hb = ag->Post("/v1/agents/nobody/heartbeat", json::object());
  EXPECT_EQ(hb.status().code(), Code::kInvalidInput);  // 403: not its own instance
  EXPECT_EQ(api->Get("/v1/jobs/none-0001").status().code(), Code::kNotFound);

  // Restart on the same data dir: every job, its history and its logs are still there.
  const std::string url = server->url();
  server->Stop();
  server.reset();
  auto again = StartStatic(dir.path(), std::stoi(url.substr(url.rfind(':') + 1)));
  ASSERT_TRUE(again);
  auto c2 = Admin(*again, dir.path());
  auto listed = c2->Get("/v1/jobs");
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ((*listed)["jobs"].size(), 3u);
  auto logs = c2->Get("/v1/jobs/" + id + "/logs");
  ASSERT_TRUE(logs.ok());
  ASSERT_EQ((*logs)["lines"].size(), 1u);
  EXPECT_EQ((*logs)["lines"][0]["text"], "hello");
  EXPECT_EQ(c2->Get("/v1/jobs/" + id)->value("history", json::array()).size(), 5u);
}

TEST(ControlServer, StopsARunningJobThroughTheHeartbeat) {
  testing::TempDir dir;
  auto server = StartStatic(dir.path());
  ASSERT_TRUE(server);
  auto admin = Admin(*server, dir.path());
  ApiClient* api = admin.get();
  std::unique_ptr<ApiClient> agent_client;
  const std::string agent = Join(*server, dir.path(), {{"address", "127.0.0.1"}, {"slots", 1}}, &agent_client);
  ApiClient* ag = agent_client.get();
  const std::string id = (*api->Post("/v1/jobs", {{"name", "s"}, {"entrypoint", {{"command", "sleep 100"}}}}))["id"];
  WaitFor(api, id, "Downloading");
  ASSERT_EQ(Heartbeat(ag, agent)["action"], "run");
  Report(ag, id, "training");
  WaitFor(api, id, "Training");
  ASSERT_TRUE(api->Post("/v1/jobs/" + id + "/stop", json::object()).ok());
  EXPECT_EQ(Heartbeat(ag, agent, {{"job", id}, {"attempt", 0}})["action"], "stop");
  Report(ag, id, "finished", 1);
  json j = WaitFor(api, id, "Stopped");
  EXPECT_EQ(j["status"], "Stopped");
  // The agent is free again (static backend): no action once idle.
  EXPECT_EQ(Heartbeat(ag, agent)["action"], "none");
}

TEST(ControlServer, RetriesAnInfrastructureFailureButNotAUserError) {
  testing::TempDir dir;
  auto server = StartStatic(dir.path());
  ASSERT_TRUE(server);
  auto admin = Admin(*server, dir.path());
  ApiClient* api = admin.get();
  std::unique_ptr<ApiClient> agent_client;
  const std::string agent = Join(*server, dir.path(), {{"address", "127.0.0.1"}, {"slots", 1}}, &agent_client);
  ApiClient* ag = agent_client.get();
  const std::string id =
      (*api->Post("/v1/jobs", {{"name", "r"}, {"entrypoint", {{"command", "train"}}}, {"retry", {{"max_attempts", 2}}}}))["id"];
  WaitFor(api, id, "Downloading");
  ASSERT_EQ(Heartbeat(ag, agent)["action"], "run");
  Report(ag, id, "training");
  WaitFor(api, id, "Training");  // (the scheduler moves it; a report alone does not)
  Report(ag, id, "finished", 3, 0, "infrastructure");
  // Restarting, then placed again (the joined agent is free): attempt 1 is handed out.
  json j;
  for (int i = 0; i < 500; ++i) {
    j = WaitFor(api, id, "Downloading");
    if (j["attempt"] == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(j["attempt"], 1) << j.dump();
  json a = Heartbeat(ag, agent);
  ASSERT_EQ(a["action"], "run") << a.dump();
  EXPECT_EQ(a["assignment"]["attempt"], 1);
  // The second attempt fails too: no attempts left.
  Report(ag, id, "finished", 3, 0, "infrastructure", 1);
  j = WaitFor(api, id, "Failed");
  EXPECT_NE(j["failure_reason"].get<std::string>().find("no attempts left"), std::string::npos) << j.dump();
  std::string phases;
  for (const auto& h : j["history"]) phases += h["secondary_status"].get<std::string>() + " ";
  EXPECT_EQ(phases, "Pending Starting Downloading Training Restarting Starting Downloading Failed ");

  // A user error with attempts left is not retried.
  const std::string uid =
      (*api->Post("/v1/jobs", {{"name", "u"}, {"entrypoint", {{"command", "train"}}}, {"retry", {{"max_attempts", 3}}}}))["id"];
  WaitFor(api, uid, "Downloading");
  ASSERT_EQ(Heartbeat(ag, agent)["action"], "run");
  Report(ag, uid, "finished", 1, 0, "user_error");
  j = WaitFor(api, uid, "Failed");
  EXPECT_EQ(j["attempt"], 0);
}

// One scheduling server per data folder and per address: the second is refused naming the first;
// an API-only server (the CLI's read-only --local commands) runs beside it and leaves its
// server.json alone.
TEST(ControlServer, ASecondServerOnTheSameDataFolderOrAddressIsRefused) {
  testing::TempDir a, b;
  ServerOptions o;
  o.data_dir = a.path();
  o.port = 0;
  o.backend = "static";
  auto first = ControlServer::Start(o);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const std::string url = (*first)->url();
  const std::string port = url.substr(url.rfind(':') + 1);
  auto same_dir = ControlServer::Start(o);
  ASSERT_FALSE(same_dir.ok()) << "two schedulers on " << a.path();
  EXPECT_EQ(same_dir.status().code(), Code::kInvalidInput);
  EXPECT_NE(same_dir.status().message().find("pid " + std::to_string(::getpid()) + ", " + url), std::string::npos)
      << same_dir.status().message();
  {
    ServerOptions ro = o;
    ro.schedule = false;
    auto reader = ControlServer::Start(ro);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    auto text = Env::Default().ReadFile(a.File("server.json"));
    ASSERT_TRUE(text.ok());
    EXPECT_NE(text->find(url), std::string::npos) << "the API-only server rewrote server.json: " << *text;
  }  // gone again, the folder's server untouched
  auto health = ApiClient::Make(url, 5);
  ASSERT_TRUE(health.ok());
  EXPECT_TRUE((*health)->Get("/v1/health").ok());
  ServerOptions other = o;
  other.data_dir = b.path();
  other.port = std::stoi(port);
  auto same_port = ControlServer::Start(other);
  ASSERT_FALSE(same_port.ok()) << "two servers listen on " << url;
  EXPECT_NE(same_port.status().message().find("pid " + std::to_string(::getpid())), std::string::npos)
      << same_port.status().message();
  // Once the first is gone, its folder and its port serve again (SO_REUSEADDR: its closed connections
  // may linger in TIME_WAIT).
  first->reset();
  o.port = std::stoi(port);
  auto again = ControlServer::Start(o);
  EXPECT_TRUE(again.ok()) << again.status().ToString();
}

}  // namespace
}  // namespace anneal
