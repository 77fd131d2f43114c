// The job policies in process: tokens and roles (401 / 403 / 404), secrets hidden in describe,
// execution-role prefixes refused at submit, quotas' arithmetic, and the pre-start health checks
// driven by hand-made agents on the static backend (all pass -> Downloading; one fails -> the
// attempt fails as an infrastructure failure and the instance leaves the pool).
#include <gtest/gtest.h>

#include <thread>

#include "protocol/api_client.h"
#include "control/execution_roles.h"
#include "control/quota.h"
#include "control/server.h"
#include "core/env.h"
#include "testing/temp_dir.h"
#include "testing/token_file.h"

namespace anneal {
namespace {

using nlohmann::json;

std::unique_ptr<ApiClient> Client(const ControlServer& s, const std::string& token) {
  auto c = ApiClient::Make(s.url());
  EXPECT_TRUE(c.ok());
  if (!token.empty()) (*c)->set_token(token);
  return std::move(*c);
}

std::unique_ptr<ControlServer> Start(const std::string& dir, const std::string& roles_file = "", bool health = false) {
  ServerOptions o;
  o.data_dir = dir;
  o.port = 0;
  o.backend = "static";
  o.tick_s = 0.02;
  o.health.enabled = health;
  o.health.collective_mb = 8;
  o.execution_roles_file = roles_file;
  auto s = ControlServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

bool Has(const Status& st, const std::string& text) { return st.message().find(text) != std::string::npos; }

const json kJob = {{"name", "j"}, {"entrypoint", {{"command", "true"}}}};

TEST(Auth, TokensRolesAndOwnership) {
  testing::TempDir dir;
  auto server = Start(dir.path());
  ASSERT_TRUE(server);
  const std::string admin_token = testing::ReadTokenFile(JoinPath(dir.path(), "admin.token"));
  auto admin = Client(*server, admin_token);

  // No token, a wrong one: 401. The health check needs none.
  auto none = Client(*server, "");
  EXPECT_TRUE(none->Get("/v1/health").ok());
  auto r = none->Get("/v1/jobs");
  EXPECT_TRUE(Has(r.status(), "HTTP 401")) << r.status().ToString();
  EXPECT_TRUE(Has(Client(*server, "ann_0123")->Get("/v1/jobs").status(), "HTTP 401"));

  // Users and their first tokens.
  std::map<std::string, std::string> tok;
  for (const auto& [name, role] : std::vector<std::pair<std::string, std::string>>{{"alice", "user"}, {"bob", "user"}, {"vera", "viewer"}}) {
    auto u = admin->Post("/v1/users", {{"name", name}, {"role", role}});
    ASSERT_TRUE(u.ok()) << u.status().ToString();
    tok[name] = (*u)["token"];
  }
  EXPECT_TRUE(Has(admin->Post("/v1/users", {{"name", "alice"}}).status(), "HTTP 409"));
  EXPECT_TRUE(Has(admin->Post("/v1/users", {{"name", "Bad Name"}}).status(), "name:"));
  auto alice = Client(*server, tok["alice"]), bob = Client(*server, tok["bob"]), vera = Client(*server, tok["vera"]);
  // Only admins manage users.
  EXPECT_TRUE(Has(alice->Get("/v1/users").status(), "HTTP 403"));

  auto sub = alice->Post("/v1/jobs", kJob);
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  const std::string id = (*sub)["id"];
  EXPECT_EQ((*alice->Get("/v1/jobs/" + id))["owner"], "alice");
  // Another user's job does not exist for bob: 404 on describe, logs, metrics and stop; not listed.
  EXPECT_EQ(bob->Get("/v1/jobs/" + id).status().code(), Code::kNotFound);
  EXPECT_EQ(bob->Get("/v1/jobs/" + id + "/logs").status().code(), Code::kNotFound);
  EXPECT_EQ(bob->Get("/v1/jobs/" + id + "/metrics").status().code(), Code::kNotFound);
  EXPECT_EQ(bob->Post("/v1/jobs/" + id + "/stop", json::object()).status().code(), Code::kNotFound);
  EXPECT_EQ((*bob->Get("/v1/jobs"))["jobs"].size(), 0u);
  // A viewer reads every job and changes none.
  EXPECT_EQ((*vera->Get("/v1/jobs"))["jobs"].size(), 1u);
  EXPECT_TRUE(Has(vera->Post("/v1/jobs", kJob).status(), "HTTP 403"));
  EXPECT_TRUE(Has(vera->Post("/v1/jobs/" + id + "/stop", json::object()).status(), "HTTP 403"));
  // The admin sees and stops it.
  EXPECT_EQ((*admin->Get("/v1/jobs"))["jobs"].size(), 1u);
  ASSERT_TRUE(admin->Post("/v1/jobs/" + id + "/stop", json::object()).ok());

  // Tokens: listed without secrets; a revoked one is refused; only the hash is stored.
  auto made = alice->Post("/v1/tokens", {{"description", "ci"}});
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const std::string second = (*made)["token"], second_id = (*made)["id"];
  auto listed = alice->Get("/v1/tokens");
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ((*listed)["tokens"].size(), 2u);
  EXPECT_EQ(listed->dump().find(second), std::string::npos);
  EXPECT_TRUE(Has(alice->Post("/v1/tokens", {{"user", "bob"}}).status(), "HTTP 403"));
  EXPECT_EQ(bob->Delete("/v1/tokens/" + second_id).status().code(), Code::kNotFound);
  ASSERT_TRUE(alice->Delete("/v1/tokens/" + second_id).ok());
  EXPECT_TRUE(Has(Client(*server, second)->Get("/v1/jobs").status(), "HTTP 401"));
  server->Stop();
  for (const char* f : {"anneal.db", "anneal.db-wal"}) {
    auto bytes = Env::Default().ReadFile(JoinPath(dir.path(), f));
    if (!bytes.ok()) continue;
    for (const auto& [n, t] : tok) EXPECT_EQ(bytes->find(t), std::string::npos) << n << "'s token is in " << f;
    EXPECT_EQ(bytes->find(admin_token), std::string::npos);
  }
}

TEST(Auth, AgentsNeedTheJoinTokenAndReachOnlyTheirOwnEndpoints) {
  testing::TempDir dir;
  auto server = Start(dir.path());
  ASSERT_TRUE(server);
  auto admin = Client(*server, testing::ReadTokenFile(JoinPath(dir.path(), "admin.token")));
  // Without the join token (or with a user's token) an agent cannot register.
  EXPECT_TRUE(Has(Client(*server, "")->Post("/v1/agents", {{"slots", 1}}).status(), "HTTP 401"));
  EXPECT_TRUE(Has(admin->Post("/v1/agents", {{"slots", 1}}).status(), "HTTP 403"));
  auto joiner = Client(*server, testing::ReadTokenFile(JoinPath(dir.path(), "join.token")));
  auto reg = joiner->Post("/v1/agents", {{"address", "127.0.0.1"}, {"slots", 1}});
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  // The join token registers agents and does nothing else.
  EXPECT_TRUE(Has(joiner->Get("/v1/jobs").status(), "HTTP 403"));
  auto agent = Client(*server, (*reg)["token"]);
  const std::string me = (*reg)["id"];
  EXPECT_TRUE(agent->Post("/v1/agents/" + me + "/heartbeat", json::object()).ok());
  EXPECT_TRUE(Has(agent->Get("/v1/jobs").status(), "HTTP 403"));
  // Another job's logs: refused (it does not serve that job).
  auto sub = admin->Post("/v1/jobs", {{"name", "other"}, {"entrypoint", {{"command", "true"}}}, {"resources", {{"instance_type", "gpu"}}}});
  ASSERT_TRUE(sub.ok());
  EXPECT_TRUE(Has(agent->Post("/v1/jobs/" + (*sub)["id"].get<std::string>() + "/logs", {{"lines", json::array()}}).status(), "HTTP 403"));
}

TEST(Policies, SecretsAreHiddenAndRolesLimitStoragePrefixes) {
  testing::TempDir dir;
  const std::string roles = JoinPath(dir.path(), "roles.yaml");
  ASSERT_TRUE(Env::Default()
                  .WriteFileAtomic(roles, "roles:\n  team-a:\n    prefixes: [s3://data/team-a/, /srv/team-a]\n    users: [alice]\n")
                  .ok());
  auto server = Start(JoinPath(dir.path(), "srv"), roles);
  ASSERT_TRUE(server);
  auto admin = Client(*server, testing::ReadTokenFile(JoinPath(JoinPath(dir.path(), "srv"), "admin.token")));
  auto u = admin->Post("/v1/users", {{"name", "alice"}});
  auto b = admin->Post("/v1/users", {{"name", "bob"}});
  ASSERT_TRUE(u.ok() && b.ok());
  auto alice = Client(*server, (*u)["token"]), bob = Client(*server, (*b)["token"]);
  json job = {{"name", "r"}, {"role", "team-a"}, {"entrypoint", {{"command", "true"}}},
              {"channels", json::array({{{"name", "train"}, {"uri", "s3://data/team-a/kjv"}}})},
              {"checkpoint", {{"uri", "/srv/team-a/ckpt"}}},
              {"secrets", {{"HF_TOKEN", "hf_s3cr3t_value"}}}};
  auto ok = alice->Post("/v1/jobs", job);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  auto d = alice->Get("/v1/jobs/" + (*ok)["id"].get<std::string>());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->dump().find("hf_s3cr3t_value"), std::string::npos);
  EXPECT_EQ((*d)["spec"]["secrets"]["HF_TOKEN"], "***");
  // Outside the prefixes: 403 naming the field; a '..' escape too; another user may not use the role.
  json out = job;
  out["channels"][0]["uri"] = "s3://data/team-b/kjv";
  auto r = alice->Post("/v1/jobs", out);
  EXPECT_TRUE(Has(r.status(), "HTTP 403") && Has(r.status(), "channels[0].uri")) << r.status().ToString();
  out = job;
  out["checkpoint"]["uri"] = "/srv/team-a/../team-b/ckpt";
  EXPECT_TRUE(Has(alice->Post("/v1/jobs", out).status(), "checkpoint.uri"));
  EXPECT_TRUE(Has(bob->Post("/v1/jobs", job).status(), "may not use the execution role"));
  out = job;
  out.erase("role");
  EXPECT_TRUE(Has(alice->Post("/v1/jobs", out).status(), "requires an execution role"));
}

TEST(Policies, PrefixMatching) {
  EXPECT_TRUE(UriUnderPrefix("s3://b/team-a/x", "s3://b/team-a/"));
  EXPECT_TRUE(UriUnderPrefix("s3://b/team-a/x", "s3://b/team-a"));
  EXPECT_FALSE(UriUnderPrefix("s3://b/team-ab/x", "s3://b/team-a"));
  EXPECT_FALSE(UriUnderPrefix("s3://b/team-a/../x", "s3://b/team-a/"));
  EXPECT_TRUE(UriUnderPrefix("file:///srv/a/b", "/srv/a"));
  EXPECT_FALSE(UriUnderPrefix("/srv/ab", "/srv/a"));
}

TEST(Policies, QuotaArithmetic) {
  QuotaOptions q;
  q.max_running_instances = 4;
  q.user_max_instances = 2;
  q.instance_type_max["gpu"] = 3;
  QuotaUsage used;
  used.Add("alice", "cpu", 2);
  bool holds = false;
  // alice is at her limit: she waits, others may pass.
  EXPECT_NE(QuotaBlock(q, used, {"alice", "cpu", 1, -1}, &holds).find("quota of user alice"), std::string::npos);
  EXPECT_FALSE(holds);
  // Her own limit raised: fits.
  EXPECT_EQ(QuotaBlock(q, used, {"alice", "cpu", 1, 4}, &holds), "");
  used.Add("bob", "gpu", 2);
  EXPECT_NE(QuotaBlock(q, used, {"carol", "gpu", 2, -1}, &holds).find("instance type gpu"), std::string::npos);
  EXPECT_FALSE(holds);
  // The overall limit holds the queue.
  EXPECT_NE(QuotaBlock(q, used, {"carol", "cpu", 1, -1}, &holds).find("overall quota"), std::string::npos);
  EXPECT_TRUE(holds);
  // Never fits: refused at submit, naming the field.
  EXPECT_TRUE(Has(CheckQuotaCanFit(q, {"carol", "cpu", 5, -1}), "resources.instance_count"));
  EXPECT_TRUE(Has(CheckQuotaCanFit(q, {"carol", "cpu", 3, -1}), "quota of user carol"));
  EXPECT_TRUE(CheckQuotaCanFit(q, {"carol", "cpu", 3, 0}).ok());
  std::map<std::string, int> types;
  EXPECT_TRUE(ParseTypeQuota("h200=8", &types).ok());
  EXPECT_EQ(types["h200"], 8);
  EXPECT_FALSE(ParseTypeQuota("h200", &types).ok());
}

json Beat(ApiClient* c, const std::string& id, const json& body = json::object()) {
  auto r = c->Post("/v1/agents/" + id + "/heartbeat", body);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : json();
}

json WaitStatus(ApiClient* c, const std::string& id, const std::string& want) {
  json j;
  for (int i = 0; i < 500; ++i) {
    auto r = c->Get("/v1/jobs/" + id);
    if (r.ok() && (j = *r)["secondary_status"] == want) return j;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << id << " never reached " << want << ": " << j.dump();
  return j;
}

TEST(HealthChecks, AllPassThenStartOneFailsThenItLeavesThePool) {
  testing::TempDir dir;
  auto server = Start(dir.path(), "", /*health=*/true);
  ASSERT_TRUE(server);
  auto admin = Client(*server, testing::ReadTokenFile(JoinPath(dir.path(), "admin.token")));
  auto joiner = Client(*server, testing::ReadTokenFile(JoinPath(dir.path(), "join.token")));
  std::vector<std::unique_ptr<ApiClient>> agents;
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    auto reg = joiner->Post("/v1/agents", {{"address", "127.0.0.1"}, {"slots", 1}});
    ASSERT_TRUE(reg.ok());
    agents.push_back(Client(*server, (*reg)["token"]));
    ids.push_back((*reg)["id"]);
  }
  auto sub = admin->Post("/v1/jobs", {{"name", "h"}, {"entrypoint", {{"command", "true"}}}, {"resources", {{"instance_count", 2}}}});
  ASSERT_TRUE(sub.ok());
  const std::string job = (*sub)["id"];
  WaitStatus(admin.get(), job, "Starting");
  // The assigned two are asked for the round-0 checks, with the job's addresses; nothing starts yet.
  std::vector<int> mine;
  for (int i = 0; i < 3; ++i) {
    json a = Beat(agents[i].get(), ids[i]);
    if (a["action"] == "health") {
      EXPECT_EQ(a["health"]["round"], 0);
      EXPECT_EQ(a["health"]["nnodes"], 2);
      EXPECT_EQ(a["health"]["checks"]["collective_mb"], 8);
      mine.push_back(i);
    }
  }
  ASSERT_EQ(mine.size(), 2u);
  // While running them, not asked again.
  json busy = {{"health", {{"job", job}, {"attempt", 0}, {"round", 0}}}};
  EXPECT_EQ(Beat(agents[mine[0]].get(), ids[mine[0]], busy)["action"], "none");
  for (int i : mine) {
    json checks = json::array({{{"name", "collective"}, {"ok", true}, {"busbw_gbps", 1.5}}});
    ASSERT_TRUE(agents[i]->Post("/v1/jobs/" + job + "/health",
                                {{"attempt", 0}, {"round", 0}, {"node", i}, {"ok", true}, {"result", {{"ok", true}, {"checks", checks}}}})
                    .ok());
  }
  json j = WaitStatus(admin.get(), job, "Downloading");
  EXPECT_NE(j["history"].back()["message"].get<std::string>().find("passed their health checks (allreduce bus bandwidth 1.50 GB/s)"),
            std::string::npos)
      << j.dump();
  EXPECT_EQ(j["health_checks"].size(), 2u);
  ASSERT_TRUE(admin->Post("/v1/jobs/" + job + "/stop", json::object()).ok());
  for (int i : mine) Beat(agents[i].get(), ids[i]);
  WaitStatus(admin.get(), job, "Stopped");

  // A second job: one instance fails its check. Joined instances cannot be replaced by the server,
  // so the attempt fails (infrastructure) and the bad instance is kept out of the pool.
  auto sub2 = admin->Post("/v1/jobs", {{"name", "h"}, {"entrypoint", {{"command", "true"}}}, {"resources", {{"instance_count", 2}}}});
  ASSERT_TRUE(sub2.ok());
  const std::string job2 = (*sub2)["id"];
  WaitStatus(admin.get(), job2, "Starting");
  std::vector<int> got;
  for (int i = 0; i < 3; ++i) {
    if (Beat(agents[i].get(), ids[i])["action"] == "health") got.push_back(i);
  }
  ASSERT_EQ(got.size(), 2u);
  json bad = {{"ok", false}, {"checks", json::array({{{"name", "disk"}, {"ok", false}, {"detail", "0.1 GB free, 0.5 needed"}}})}};
  ASSERT_TRUE(agents[got[0]]->Post("/v1/jobs/" + job2 + "/health", {{"attempt", 0}, {"round", 0}, {"node", 0}, {"ok", false}, {"result", bad}}).ok());
  ASSERT_TRUE(agents[got[1]]->Post("/v1/jobs/" + job2 + "/health", {{"attempt", 0}, {"round", 0}, {"node", 1}, {"ok", true}, {"result", {{"ok", true}}}}).ok());
  j = WaitStatus(admin.get(), job2, "Failed");
  const std::string reason = j["failure_reason"];
  EXPECT_EQ(reason.rfind("infrastructure: instance " + ids[got[0]], 0), 0u) << reason;
  EXPECT_NE(reason.find("disk: 0.1 GB free"), std::string::npos) << reason;
}

}  // namespace
}  // namespace anneal
