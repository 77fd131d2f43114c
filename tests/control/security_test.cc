// The defects a security probe of `anneal server` found (issue 38), each held to its fix with a real
// server in process: a YAML alias bomb and deep documents refused while parsing, another user's job
// answering 404 to exec, integers out of range refused instead of wrapped.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/package_unpack.h"
#include "control/job_store.h"
#include "control/server.h"
#include "core/crypto.h"
#include "core/bounded_parse.h"
#include "core/env.h"
#include "testing/temp_dir.h"
#include "testing/token_file.h"
#include "train/config_text.h"

namespace anneal {
namespace {

using nlohmann::json;

// The resident set of this process (the server runs in it), in MiB.
double RssMiB() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * 4096.0 / (1 << 20);
}

// Ten levels, each a list of ten references to the level before: 433 bytes that expand to 10^10.
std::string AliasBomb() {
  std::string s = "name: bomb\nl0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 10; ++i) {
    const std::string n = std::to_string(i);
    s.append("l").append(n).append(": &l").append(n).append(" [");
    for (int k = 0; k < 10; ++k) s.append(k ? ", *l" : "*l").append(std::to_string(i - 1));
    s.append("]\n");
  }
  return s + "entrypoint: {command: [\"true\"]}\n";
}

struct Served {
  testing::TempDir dir;
  std::unique_ptr<ControlServer> server;
  std::unique_ptr<httplib::Client> admin;

  explicit Served(ServerOptions o = {}) {
    o.data_dir = dir.path();
    o.port = 0;
    o.backend = "static";
    o.tick_s = 0.05;
    auto s = ControlServer::Start(o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return;
    server = std::move(*s);
    admin = Client(testing::ReadTokenFile(JoinPath(dir.path(), "admin.token")));
  }
  std::unique_ptr<httplib::Client> Client(const std::string& token) const {
    auto c = std::make_unique<httplib::Client>(server->url());
    c->set_bearer_token_auth(token);
    c->set_read_timeout(30, 0);
    return c;
  }
  // A user of the given role and a client with its token.
  std::unique_ptr<httplib::Client> User(const std::string& name, const std::string& role) const {
    auto r = admin->Post("/v1/users", json({{"name", name}, {"role", role}}).dump(), "application/json");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
    auto t = admin->Post("/v1/tokens", json({{"user", name}}).dump(), "application/json");
    EXPECT_TRUE(t && t->status == 201) << (t ? t->body : "no answer");
    return Client(t ? json::parse(t->body).value("token", "") : "");
  }
};

std::string ErrorOf(const httplib::Result& r) {
  if (!r) return "(no answer)";
  json b = json::parse(r->body, nullptr, false);
  return b.is_object() && b.contains("error") ? b["error"].value("message", r->body) : r->body;
}

TEST(SecurityParse, AliasesDepthAndSizeAreRefusedWhileParsing) {
  auto bomb = ParseYamlBounded(AliasBomb());
  ASSERT_FALSE(bomb.ok());
  EXPECT_NE(bomb.status().message().find("alias"), std::string::npos) << bomb.status().message();
  EXPECT_NE(bomb.status().message().find("line 3"), std::string::npos) << bomb.status().message();
  // The merge key is an alias too.
  EXPECT_FALSE(ParseYamlBounded("a: &a {x: 1}\nb:\n  <<: *a\n").ok());
  // An anchor without an alias is harmless and kept.
  auto anchored = ParseYamlBounded("a: &a {x: 1}\n");
  ASSERT_TRUE(anchored.ok()) << anchored.status().message();
  EXPECT_EQ((*anchored)["a"]["x"], 1);
  // Depth: 64 levels pass, 65 do not; YAML and JSON alike.
  auto nest = [](int n) { return std::string(n, '[') + std::string(n, ']'); };
  EXPECT_TRUE(ParseYamlBounded(nest(64)).ok());
  auto deep = ParseYamlBounded(nest(65));
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("64 deep"), std::string::npos) << deep.status().message();
  EXPECT_TRUE(ParseJsonBounded(nest(64)).ok());
  EXPECT_FALSE(ParseJsonBounded(nest(65)).ok());
  EXPECT_FALSE(ParseJsonBounded(nest(400000)).ok());  // would overflow a recursive reader's stack
  // Node count.
  std::string many = "[";
  for (int i = 0; i < 1000; ++i) many += "1,";
  many += "1]";
  ParseLimits small;
  small.max_nodes = 500;
  EXPECT_FALSE(ParseYamlBounded(many, small).ok());
  EXPECT_TRUE(ParseYamlBounded(many).ok());
  // Scalars keep their YAML meaning (plain numbers and booleans, quoted strings).
  auto doc = ParseYamlBounded("a: 1\nb: '1'\nc: true\nd: 1.5e3\ne: ~\nf: [x, 2]\n");
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ(doc->dump(), R"({"a":1,"b":"1","c":true,"d":1500.0,"e":null,"f":["x",2]})");
  // The trainer's configs: the same limits, every scalar as written.
  std::map<std::string, std::string> flat;
  std::vector<std::string> errors;
  EXPECT_FALSE(FlattenYamlConfig(AliasBomb(), "bomb.yaml", &flat, &errors).ok());
  ASSERT_TRUE(FlattenYamlConfig("optim:\n  lr: 1e-3\n  betas: [0.9, 0.95]\ntrain:\n  x: ~\n", "c.yaml", &flat, &errors).ok());
  EXPECT_EQ(flat["optim.lr"], "1e-3");
  EXPECT_EQ(flat["optim.betas"], "0.9,0.95");
  EXPECT_EQ(flat["train.x"], "");
}

TEST(SecurityServer, AnAliasBombIsRefusedFastWithoutMemory) {
  Served s;
  ASSERT_TRUE(s.server);
  const double rss = RssMiB();
  const auto t0 = std::chrono::steady_clock::now();
  auto r = s.admin->Post("/v1/jobs", AliasBomb(), "application/yaml");
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(ErrorOf(r).find("alias"), std::string::npos) << r->body;
  EXPECT_LT(ms, 50) << "the refusal took " << ms << " ms";
  EXPECT_LT(RssMiB() - rss, 16) << "the server's memory grew while refusing";
  // A deep JSON body on a JSON route: 400, and the server is still up.
  auto deep = s.admin->Post("/v1/users", std::string(100000, '[') + std::string(100000, ']'), "application/json");
  ASSERT_TRUE(deep);
  EXPECT_EQ(deep->status, 400) << deep->body;
  auto h = s.admin->Get("/v1/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
}

TEST(SecurityServer, IntegersOutOfRangeAreRefusedNotWrapped) {
  Served s;
  ASSERT_TRUE(s.server);
  auto r = s.admin->Post("/v1/users", json({{"name", "wrap"}, {"role", "user"}, {"max_instances", 4294967297LL}}).dump(),
                         "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(ErrorOf(r).find("4294967297"), std::string::npos) << r->body;
  auto spec = json({{"name", "wrap"}, {"entrypoint", {{"command", "true"}}},
                    {"resources", {{"instance_count", 18446744073709551615ULL}}}});
  auto j = s.admin->Post("/v1/jobs", spec.dump(), "application/json");
  ASSERT_TRUE(j);
  EXPECT_EQ(j->status, 400) << j->body;
  EXPECT_NE(ErrorOf(j).find("resources.instance_count"), std::string::npos) << j->body;
}

TEST(SecurityServer, ExecOnAnotherUsersJobAnswersAsAMissingOne) {
  Served s;
  ASSERT_TRUE(s.server);
  auto alice = s.User("alice", "user");
  auto bob = s.User("bob", "user");
  auto sub = alice->Post("/v1/jobs", json({{"name", "mine"}, {"entrypoint", {{"command", "true"}}}}).dump(), "application/json");
  ASSERT_TRUE(sub && sub->status == 201) << (sub ? sub->body : "");
  const std::string id = json::parse(sub->body)["id"];
  const std::string cmd = json({{"command", {"id"}}}).dump();
  auto other = bob->Post("/v1/jobs/" + id + "/exec", cmd, "application/json");
  auto missing = bob->Post("/v1/jobs/no-such-job/exec", cmd, "application/json");
  ASSERT_TRUE(other && missing);
  EXPECT_EQ(other->status, 404) << other->body;
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(ErrorOf(other).find("alice"), std::string::npos) << "names the owner: " << other->body;
}

// A viewer reads every job, not what its owner typed into it: describe shows an exec's command line
// to the owner and admins only.
TEST(SecurityServer, AViewerSeesNoExecCommandLines) {
  Served s;
  ASSERT_TRUE(s.server);
  auto alice = s.User("alice", "user");
  auto watcher = s.User("watcher", "viewer");
  auto sub = alice->Post("/v1/jobs", json({{"name", "mine"}, {"entrypoint", {{"command", "true"}}}}).dump(), "application/json");
  ASSERT_TRUE(sub && sub->status == 201) << (sub ? sub->body : "");
  const std::string id = json::parse(sub->body)["id"];
  {
    // The record exec_routes.cc keeps of each use, written beside the server as it would write it.
    auto store = JobStore::Open(JoinPath(s.dir.path(), "anneal.db"));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    const json uses = json::array({{{"id", "exec-1"}, {"user", "alice"}, {"command", {"cat", "/run/secret.txt"}}}});
    ASSERT_TRUE((*store)->SetValue("execs:" + id, uses.dump()).ok());
  }
  auto command_seen_by = [&](httplib::Client& c) {
    auto r = c.Get("/v1/jobs/" + id);
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    const json d = r ? json::parse(r->body, nullptr, false) : json();
    return d.is_object() && d["execs"].is_array() && d["execs"].size() == 1 ? d["execs"][0]["command"].dump() : std::string("?");
  };
  EXPECT_EQ(command_seen_by(*watcher), "\"***\"");
  EXPECT_EQ(command_seen_by(*alice), R"(["cat","/run/secret.txt"])");
  EXPECT_EQ(command_seen_by(*s.admin), R"(["cat","/run/secret.txt"])");
}

TEST(SecurityTokens, UserTokensExpireAndShowTheirLastUse) {
  Served s;
  ASSERT_TRUE(s.server);
  auto r = s.admin->Post("/v1/users", json({{"name", "carol"}, {"role", "user"}}).dump(), "application/json");
  ASSERT_TRUE(r && r->status == 201);
  auto shortlived = s.admin->Post("/v1/tokens", json({{"user", "carol"}, {"ttl_s", 0.5}}).dump(), "application/json");
  auto dflt = s.admin->Post("/v1/tokens", json({{"user", "carol"}}).dump(), "application/json");
  auto service = s.admin->Post("/v1/tokens", json({{"user", "carol"}, {"service", true}}).dump(), "application/json");
  ASSERT_TRUE(shortlived && shortlived->status == 201 && dflt && dflt->status == 201 && service && service->status == 201);
  const json d = json::parse(dflt->body);
  EXPECT_NEAR(d["expires_at"].get<double>() - d["created_at"].get<double>(), 90 * 24 * 3600.0, 1);
  EXPECT_EQ(json::parse(service->body)["expires_at"], 0.0);
  auto carol = s.Client(json::parse(shortlived->body)["token"]);
  auto ok = carol->Get("/v1/jobs");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  auto late = carol->Get("/v1/jobs");
  ASSERT_TRUE(late);
  EXPECT_EQ(late->status, 401) << late->body;
  EXPECT_NE(ErrorOf(late).find("expired"), std::string::npos) << late->body;
  // The list shows when each was last used (the expired one: at its first request).
  auto list = s.admin->Get("/v1/tokens?user=carol");
  ASSERT_TRUE(list && list->status == 200);
  int used = 0;
  const json tokens = json::parse(list->body)["tokens"];
  for (const auto& t : tokens) used += t["last_used_at"].get<double>() > 0 ? 1 : 0;
  EXPECT_EQ(used, 1) << list->body;
  auto bad = s.admin->Post("/v1/tokens", json({{"user", "carol"}, {"ttl_s", -1}}).dump(), "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
}

TEST(SecurityPackages, APackageIsCheckedAndUnpackedWithinLimits) {
  testing::TempDir t;
  const std::string d = t.path();
  // 20 MB of zeros: a tar.gz of about 20 KB.
  ASSERT_EQ(std::system(("mkdir -p " + d + "/src && head -c 20000000 /dev/zero > " + d + "/src/zeros && echo hi > " + d +
                         "/src/a.txt && tar -czf " + d + "/p.tgz -C " + d + "/src .").c_str()), 0);
  auto bytes = Env::Default().ReadFile(d + "/p.tgz");
  ASSERT_TRUE(bytes.ok());
  EXPECT_LT(bytes->size(), 100000u);
  const std::string sha = Sha256Hex(*bytes);
  auto dest = [&](const std::string& n) {
    EXPECT_TRUE(Env::Default().CreateDirs(d + "/" + n).ok());
    return d + "/" + n;
  };
  UnpackLimits small;
  small.max_bytes = 10 << 20;
  Status big = UnpackPackage(*bytes, sha, d + "/k1.tgz", dest("out1"), small);
  EXPECT_EQ(big.code(), Code::kInvalidInput) << big.ToString();
  EXPECT_NE(big.message().find("--max-unpacked-bytes"), std::string::npos) << big.message();
  EXPECT_FALSE(Env::Default().Exists(d + "/out1/zeros"));  // nothing written
  UnpackLimits few;
  few.max_files = 2;  // ".", zeros, a.txt
  EXPECT_EQ(UnpackPackage(*bytes, sha, d + "/k2.tgz", dest("out2"), few).code(), Code::kInvalidInput);
  // A damaged download is the transfer's fault (retried), not the user's.
  EXPECT_EQ(UnpackPackage(*bytes + "x", sha, d + "/k3.tgz", dest("out3")).code(), Code::kPeer);
  EXPECT_EQ(UnpackPackage("not gzip", Sha256Hex("not gzip"), d + "/k4.tgz", dest("out4")).code(), Code::kInvalidInput);
  const std::string broken = bytes->substr(0, bytes->size() / 2);
  EXPECT_EQ(UnpackPackage(broken, Sha256Hex(broken), d + "/k5.tgz", dest("out5")).code(), Code::kInvalidInput);
  // A good package this instance cannot write out (here: its folder is a file; in the chaos soak: a
  // full disk) is the instance's failure, retried elsewhere, not the user's.
  ASSERT_TRUE(Env::Default().WriteFileAtomic(d + "/not_a_dir", "x").ok());
  EXPECT_EQ(UnpackPackage(*bytes, sha, d + "/k7.tgz", d + "/not_a_dir/out7").code(), Code::kPeer);
  ASSERT_TRUE(UnpackPackage(*bytes, sha, d + "/k6.tgz", dest("out6")).ok());
  EXPECT_TRUE(Env::Default().Exists(d + "/out6/a.txt"));
}

TEST(SecurityPackages, UploadsAreCappedCheckedAndSourcesArePackageIdsOnly) {
  ServerOptions o;
  o.max_package_bytes = 64 << 10;
  Served s(o);
  ASSERT_TRUE(s.server);
  auto big = s.admin->Post("/v1/packages", std::string(200 << 10, '\x1f'), "application/gzip");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413) << big->body;
  EXPECT_NE(ErrorOf(big).find("--max-package-bytes"), std::string::npos) << big->body;
  auto plain = s.admin->Post("/v1/packages", std::string(1000, 'a'), "application/gzip");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->status, 400) << plain->body;
  const std::string gz = std::string("\x1f\x8b", 2) + std::string(1000, 'b');
  auto ok = s.admin->Post("/v1/packages", gz, "application/gzip");
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->status, 201) << ok->body;
  EXPECT_EQ(json::parse(ok->body)["package"], "package:" + Sha256Hex(gz));
  // Nothing but whole packages under packages/ (no temporary file left by the refusals).
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(s.dir.path() + "/packages")) files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 1);
  for (const std::string src : {"package:../../../../etc/passwd", "package:ABC"}) {
    auto j = s.admin->Post("/v1/jobs", json({{"name", "p"}, {"entrypoint", {{"command", "true"}}}, {"source", src}}).dump(),
                           "application/json");
    ASSERT_TRUE(j);
    EXPECT_EQ(j->status, 400) << j->body;
    EXPECT_NE(ErrorOf(j).find("64 hex"), std::string::npos) << j->body;
  }
}

TEST(SecurityPackages, EachUserHasAQuotaAndUnusedPackagesAreCleanedUp) {
  ServerOptions o;
  o.package_quota_bytes = 3000;
  o.package_keep_s = 0.3;
  Served s(o);
  ASSERT_TRUE(s.server);
  auto gz = [](char c) { return std::string("\x1f\x8b", 2) + std::string(2000, c); };
  auto a = s.admin->Post("/v1/packages", gz('a'), "application/gzip");
  ASSERT_TRUE(a && a->status == 201) << (a ? a->body : "");
  auto b = s.admin->Post("/v1/packages", gz('b'), "application/gzip");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->status, 413) << b->body;
  EXPECT_NE(ErrorOf(b).find("--package-quota-bytes"), std::string::npos) << b->body;
  // Another user has a quota of their own.
  auto dave = s.User("dave", "user");
  auto d = dave->Post("/v1/packages", gz('d'), "application/gzip");
  ASSERT_TRUE(d && d->status == 201) << (d ? d->body : "");
  // A package no unfinished job uses goes once --package-keep-s has passed: room again.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  auto again = s.admin->Post("/v1/packages", gz('b'), "application/gzip");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 201) << again->body;
  EXPECT_FALSE(Env::Default().Exists(s.dir.path() + "/packages/" + Sha256Hex(gz('a')) + ".tar.gz"));
  EXPECT_TRUE(Env::Default().Exists(s.dir.path() + "/packages/" + Sha256Hex(gz('b')) + ".tar.gz"));
}

// Registers with the join token: the answer.
httplib::Result JoinAs(const Served& s, const json& body) {
  auto c = s.Client(testing::ReadTokenFile(JoinPath(s.dir.path(), "join.token")));
  return c->Post("/v1/agents", body.dump(), "application/json");
}

TEST(SecurityAgents, TheJoinTokenCannotTakeTheIdsOfRequestedInstances) {
  Served s;
  ASSERT_TRUE(s.server);
  // The ids the scheduler gives the instances it requests (the next job's are predictable).
  for (const char* id : {"train-3-a0-n0", "train-3-a1-n2-h1"}) {
    auto r = JoinAs(s, {{"id", id}, {"slots", 1}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 409) << id << ": " << r->body;
    EXPECT_EQ(json::parse(r->body).value("token", ""), "") << r->body;
  }
  // An operator's own id is fine; slots out of range are not wrapped.
  auto ok = JoinAs(s, {{"id", "rack1-gpu7"}, {"slots", 2}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  auto big = JoinAs(s, {{"id", "rack1-gpu8"}, {"slots", 4294967297LL}});
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 400) << big->body;
}

TEST(SecurityAgents, AQuietInstanceHoldingAJobIsNotHandedToANewRegistration) {
  ServerOptions o;
  o.heartbeat_timeout_s = 0.5;
  o.health.enabled = false;
  Served s(o);
  ASSERT_TRUE(s.server);
  auto joined = JoinAs(s, {{"id", "node-a"}, {"slots", 1}, {"instance_type", "cpu"}});
  ASSERT_TRUE(joined && joined->status == 200) << (joined ? joined->body : "");
  auto agent = s.Client(json::parse(joined->body)["token"]);
  auto sub = s.admin->Post("/v1/jobs", json({{"name", "held"}, {"entrypoint", {{"command", "sleep 100"}}},
                                             {"secrets", {{"KEY", "s3cr3t"}}},
                                             {"resources", {{"instance_type", "cpu"}}}}).dump(), "application/json");
  ASSERT_TRUE(sub && sub->status == 201) << (sub ? sub->body : "");
  const std::string id = json::parse(sub->body)["id"];
  // The agent takes the job, then goes quiet.
  json a = json::object();
  for (int i = 0; i < 100 && a.value("action", "") != "run"; ++i) {
    auto hb = agent->Post("/v1/agents/node-a/heartbeat", "{}", "application/json");
    ASSERT_TRUE(hb && hb->status == 200);
    a = json::parse(hb->body);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(a.value("action", ""), "run") << a.dump();
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  // Past the heartbeat timeout: a registration under its id is refused, with no token and so no
  // assignment (nor the job's secrets).
  auto take = JoinAs(s, {{"id", "node-a"}, {"slots", 1}, {"instance_type", "cpu"}});
  ASSERT_TRUE(take);
  const bool still_held = take->status == 409;
  if (still_held) {
    EXPECT_EQ(json::parse(take->body).value("token", ""), "");
    EXPECT_NE(take->body.find("lost"), std::string::npos) << take->body;
  }
  // The job is handled as lost (an infrastructure failure; one attempt: Failed), whichever came first.
  std::string status;
  for (int i = 0; i < 200 && status != "Failed"; ++i) {
    auto d = s.admin->Get("/v1/jobs/" + id);
    ASSERT_TRUE(d);
    status = json::parse(d->body).value("status", "");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(status, "Failed");
  // Once released (the same pass, applied just after the status), the operator's agent joins again as
  // an idle instance: never with the old job.
  auto again = JoinAs(s, {{"id", "node-a"}, {"slots", 1}, {"instance_type", "cpu"}});
  for (int i = 0; i < 100 && again && again->status == 409; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    again = JoinAs(s, {{"id", "node-a"}, {"slots", 1}, {"instance_type", "cpu"}});
  }
  ASSERT_TRUE(again);
  ASSERT_EQ(again->status, 200) << again->body;
  auto fresh = s.Client(json::parse(again->body)["token"]);
  auto hb = fresh->Post("/v1/agents/node-a/heartbeat", "{}", "application/json");
  ASSERT_TRUE(hb && hb->status == 200);
  EXPECT_NE(json::parse(hb->body).value("action", ""), "run") << hb->body;
  EXPECT_EQ(hb->body.find("s3cr3t"), std::string::npos);
}

}  // namespace
}  // namespace anneal
