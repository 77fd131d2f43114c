// The agent's parts that need no job: metric extraction, per-rank progress files, system sampling,
// checkpoint folder sync (commit markers last, hidden files kept), and the Shipper's lossless delivery across a server
// restart, and the agent refusing an assignment it cannot read.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <thread>

#include <httplib.h>

#include <mutex>

#include "agent/agent.h"
#include "agent/dir_sync.h"
#include "agent/node_metrics.h"
#include "agent/shipper.h"
#include "protocol/spool.h"
#include "protocol/api_client.h"
#include "control/server.h"
#include "core/env.h"
#include "testing/temp_dir.h"
#include "testing/token_file.h"

namespace anneal {
namespace {

TEST(MetricExtractor, FirstGroupOfEachDefinition) {
  MetricExtractor m({{"loss", "loss ([0-9.]+)"}, {"tps", "([0-9]+) tok/s"}});
  auto v = m.Match("step 3/10 | loss 4.25 (0x1p+2) | 1200 tok/s");
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].first, "loss");
  EXPECT_DOUBLE_EQ(v[0].second, 4.25);
  EXPECT_DOUBLE_EQ(v[1].second, 1200);
  EXPECT_TRUE(m.Match("nothing here").empty());
}

TEST(ProgressReader, ReportsEachNewStepOnce) {
  testing::TempDir dir;
  ProgressReader r(dir.path());
  dir.Write("rank-0", "1 0.5\n");
  dir.Write("rank-1", "1 0.7\n");
  auto a = r.Poll();
  EXPECT_EQ(a.size(), 2u);
  EXPECT_TRUE(r.Poll().empty());  // no new step
  dir.Write("rank-1", "2 0.9\n");
  auto b = r.Poll();
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].rank, 1);
  EXPECT_EQ(b[0].step, 2);
  EXPECT_DOUBLE_EQ(b[0].seconds, 0.9);
}

TEST(ProgressReader, MeanOverTheStepsSinceTheLastPoll) {
  testing::TempDir dir;
  ProgressReader r(dir.path());
  dir.Write("rank-0", "2 0.5 1.0\n");
  ASSERT_EQ(r.Poll().size(), 1u);
  dir.Write("rank-0", "6 0.9 3.8\n");  // 4 steps took 2.8 s
  auto p = r.Poll();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].step, 6);
  EXPECT_DOUBLE_EQ(p[0].seconds, 0.7);
}

TEST(SystemSampler, MeasuresThisMachine) {
  testing::TempDir dir;
  SystemSampler s(dir.path());
  (void)s.Sample();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::map<std::string, double> m;
  for (const auto& [k, v] : s.Sample()) m[k] = v;
  ASSERT_TRUE(m.count("memory_used_mb"));
  EXPECT_GT(m["memory_used_mb"], 0);
  ASSERT_TRUE(m.count("disk_used_percent"));
  EXPECT_GE(m["disk_used_percent"], 0);
  EXPECT_LE(m["disk_used_percent"], 100);
}

// Records the order of puts.
class RecordingStore : public FaultObjectStore {
 public:
  using FaultObjectStore::FaultObjectStore;
  Status Put(const std::string& key, std::string_view data) override {
    puts.push_back(key);
    return FaultObjectStore::Put(key, data);
  }
  std::vector<std::string> puts;
};

TEST(DirSync, UploadsChangesWithTheManifestLastAndRestores) {
  testing::TempDir local, remote, restored;
  auto sync = DirSync::Open(local.path(), remote.path());
  ASSERT_TRUE(sync.ok());
  local.Write("step-1/manifest.json", "{}");
  local.Write("step-1/model.safetensors", "weights");
  local.Write("step-1/optim.safetensors", "moments");
  auto n = (*sync)->Upload();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 3);
  EXPECT_EQ(*(*sync)->Upload(), 0);  // nothing changed
  local.Write("step-1/optim.safetensors", "moments, longer");
  EXPECT_EQ(*(*sync)->Upload(), 1);
  EXPECT_EQ(*Env::Default().ReadFile(remote.File("step-1/optim.safetensors")), "moments, longer");
  // Restore into a fresh folder: the same files.
  auto back = DirSync::Open(restored.path(), remote.path());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*(*back)->Restore(), 3);
  EXPECT_EQ(*Env::Default().ReadFile(restored.File("step-1/model.safetensors")), "weights");
  EXPECT_EQ(*(*back)->Upload(), 0);  // what was restored is not sent back
}

TEST(DirSync, ALinkTheJobPlantedIsNotFollowed) {
  // Root uploads what a sandboxed job wrote: a link to a file or folder outside must not carry it out.
  testing::TempDir local, remote, outside;
  outside.Write("secret", "not the job's");
  outside.Write("dir/also", "not the job's either");
  local.Write("step-1/manifest.json", "{}");
  ASSERT_EQ(::symlink(outside.File("secret").c_str(), local.File("step-1/leak").c_str()), 0);
  ASSERT_EQ(::symlink(outside.File("dir").c_str(), local.File("linked-dir").c_str()), 0);
  auto sync = DirSync::Open(local.path(), remote.path());
  ASSERT_TRUE(sync.ok());
  auto n = (*sync)->Upload();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 1);  // the manifest only
  EXPECT_FALSE(Env::Default().Exists(remote.File("step-1/leak")));
  EXPECT_FALSE(Env::Default().Exists(remote.File("linked-dir/also")));
}

TEST(DirSync, AFolderNamedThroughALinkIsStillUploaded) {
  // The configured folder's own path may hold a link (/data -> /mnt/disk); only what is inside is not followed.
  testing::TempDir real, links, remote;
  real.Write("step-1/manifest.json", "{}");
  ASSERT_EQ(::symlink(real.path().c_str(), links.File("ckpt").c_str()), 0);
  auto sync = DirSync::Open(links.File("ckpt"), remote.path());
  ASSERT_TRUE(sync.ok());
  auto n = (*sync)->Upload();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(*Env::Default().ReadFile(remote.File("step-1/manifest.json")), "{}");
}

TEST(DirSync, CommitMarkersGoLast) {
  // A reader of the URI must never find a manifest whose files are not there yet.
  testing::TempDir local, remote;
  auto base = OpenObjectStore(remote.path());
  ASSERT_TRUE(base.ok());
  auto rec = std::make_unique<RecordingStore>(base->get());
  RecordingStore* seen = rec.get();
  local.Write("step-2/a.bin", "a");
  local.Write("step-2/manifest.json", "{}");
  local.Write("step-2/z.bin", "z");
  local.Write("step-3/b.bin", "b");
  local.Write("step-3/upload.complete", "");
  auto sync = DirSync::Open(local.path(), std::move(rec));
  ASSERT_TRUE(sync.ok());
  ASSERT_TRUE((*sync)->Upload().ok());
  ASSERT_EQ(seen->puts.size(), 5u);
  EXPECT_EQ(seen->puts[3], "step-2/manifest.json");
  EXPECT_EQ(seen->puts[4], "step-3/upload.complete");
}

TEST(DirSync, HiddenFilesTravelBothWaysAndTorchMetadataGoesLast) {
  // torch.distributed.checkpoint writes each rank's shard, then .metadata: a hidden file, and the
  // checkpoint's commit marker. Skipped (as an input folder skips .git), a resumed script found its
  // shards without it and failed.
  testing::TempDir local, remote, restored;
  auto base = OpenObjectStore(remote.path());
  ASSERT_TRUE(base.ok());
  auto rec = std::make_unique<RecordingStore>(base->get());
  RecordingStore* seen = rec.get();
  local.Write("epoch-001/.metadata", "meta");
  local.Write("epoch-001/__0_0.distcp", "shard");
  auto sync = DirSync::Open(local.path(), std::move(rec));
  ASSERT_TRUE(sync.ok());
  auto n = (*sync)->Upload();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 2);
  ASSERT_EQ(seen->puts.size(), 2u);
  EXPECT_EQ(seen->puts[0], "epoch-001/__0_0.distcp");
  EXPECT_EQ(seen->puts[1], "epoch-001/.metadata");
  auto back = DirSync::Open(restored.path(), remote.path());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*(*back)->Restore(), 2);
  EXPECT_EQ(*Env::Default().ReadFile(restored.File("epoch-001/.metadata")), "meta");
  // An input folder still skips hidden names.
  auto inputs = Env::Default().ListFilesRecursive(local.path());
  ASSERT_TRUE(inputs.ok());
  ASSERT_EQ(inputs->size(), 1u);
  EXPECT_EQ(BaseName((*inputs)[0]), "__0_0.distcp");
}

TEST(Shipper, DeliversEverythingAcrossAServerRestart) {
  testing::TempDir dir;
  ServerOptions o;
  o.data_dir = dir.path();
  o.port = 0;
  o.backend = "static";
  o.health.enabled = false;
  auto server = ControlServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string url = (*server)->url();
  // An agent (join token -> its own token) assigned the job job-0001: the shipper's identity.
  auto admin = ApiClient::Make(url);
  (*admin)->set_token(testing::ReadTokenFile(dir.File("admin.token")));
  auto joiner = ApiClient::Make(url);
  (*joiner)->set_token(testing::ReadTokenFile(dir.File("join.token")));
  auto reg = (*joiner)->Post("/v1/agents", {{"address", "127.0.0.1"}, {"slots", 1}});
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  ApiClient::SetProcessToken((*reg)["token"].get<std::string>());
  ASSERT_TRUE((*admin)->Post("/v1/jobs", {{"name", "job"}, {"entrypoint", {{"command", "true"}}}}).ok());
  bool placed = false;
  for (int i = 0; i < 500 && !placed; ++i) {
    auto inst = (*admin)->Get("/v1/jobs/job-0001");
    placed = inst.ok() && !(*inst)["instances"].empty();
    if (!placed) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(placed) << "job-0001 was never placed on the joined agent within 10 s";
  const std::string spool = SpoolPath(dir.File("agent"), "job-0001", 0, 0);
  Shipper ship(url, "job-0001", 0, 0, spool);
  for (int i = 0; i < 100; ++i) ship.AddLine(0, "stdout", "line " + std::to_string(i));
  ASSERT_TRUE(ship.Flush(10));
  (*server)->Stop();
  server->reset();
  // The server is away: lines wait.
  for (int i = 100; i < 200; ++i) ship.AddLine(0, "stdout", "line " + std::to_string(i));
  ship.AddMetric("loss", 0, 1.5);
  EXPECT_FALSE(ship.Flush(0.5));
  EXPECT_GT(ship.pending(), 0u);
  o.port = std::stoi(url.substr(url.rfind(':') + 1));
  auto again = ControlServer::Start(o);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_TRUE(ship.Flush(20));
  EXPECT_EQ(ReadSpool(dir.File("agent"))["job-0001"].lines.size(), 200u);  // every record, delivered or not
  ship.RemoveSpool();  // all delivered: the spool goes
  EXPECT_FALSE(std::filesystem::exists(spool));
  ApiClient::SetProcessToken("");
  auto logs = (*admin)->Get("/v1/jobs/job-0001/logs?limit=1000");
  ASSERT_TRUE(logs.ok()) << logs.status().ToString();
  EXPECT_EQ((*logs)["lines"].size(), 200u);
  again->reset();
  auto store = JobStore::Open(dir.File("anneal.db"));
  ASSERT_TRUE(store.ok());
  auto lines = (*store)->Logs("job-0001", 0, -2, 1000);
  ASSERT_TRUE(lines.ok());
  ASSERT_EQ(lines->size(), 200u);
  for (int i = 0; i < 200; ++i) EXPECT_EQ((*lines)[i].text, "line " + std::to_string(i));
  auto pts = (*store)->Metrics("job-0001", "loss", 0, 10);
  ASSERT_TRUE(pts.ok());
  EXPECT_EQ(pts->size(), 1u);
}

// What an agent had not delivered when it died is in its spool, whole and numbered as it would have
// been sent; a record cut by the death is skipped, counted; RemoveSpool keeps what is undelivered.
TEST(Shipper, EveryRecordIsInTheSpoolBeforeItIsSent) {
  testing::TempDir dir;
  const std::string spool = SpoolPath(dir.path(), "job-0007", 2, 1);
  EXPECT_EQ(spool, dir.File("spool/job-0007.2.1.jsonl"));
  {
    Shipper ship("http://127.0.0.1:1", "job-0007", 2, 1, spool);  // no server: nothing is delivered
    ship.AddLine(0, "stdout", "step 1");
    ship.AddLine(-1, "agent", "a line of the agent's own");
    ship.AddMetric("loss", 0, 2.5, 1);
    ship.AddLine(1, "stderr", "caf\xc3\xa9 \xff");  // not UTF-8: kept, replaced
    EXPECT_FALSE(ship.Flush(0.2));
    ship.RemoveSpool();
    ASSERT_TRUE(std::filesystem::exists(spool));
  }
  std::ofstream(spool, std::ios::app) << "{\"job\": \"job-0007\", \"line\": {\"seq\": 9";  // cut by a death
  int bad = 0;
  auto got = ReadSpool(dir.path(), &bad);
  EXPECT_EQ(bad, 1);
  ASSERT_EQ(got.size(), 1u);
  const SpoolRecords& r = got["job-0007"];
  ASSERT_EQ(r.lines.size(), 3u);
  EXPECT_EQ(r.lines[0].text, "step 1");
  EXPECT_EQ(r.lines[0].seq, 1);
  EXPECT_EQ(r.lines[0].attempt, 2);
  EXPECT_EQ(r.lines[0].node, 1);
  EXPECT_EQ(r.lines[1].rank, -1);
  EXPECT_EQ(r.lines[1].stream, "agent");
  EXPECT_EQ(r.lines[2].seq, 3);
  EXPECT_EQ(r.lines[2].stream, "stderr");
  ASSERT_EQ(r.points.size(), 1u);
  EXPECT_EQ(r.points[0].name, "loss");
  EXPECT_EQ(r.points[0].value, 2.5);
  EXPECT_EQ(r.points[0].step, 1);
  EXPECT_TRUE(ReadSpool(dir.File("nothing-here")).empty());
}

}  // namespace
}  // namespace anneal

namespace anneal {
namespace {

// A run assignment the agent cannot read (a spec with a field it does not know: a server of another
// version) ends the node's attempt as a user error naming the field, instead of being asked again
// for ever. A stand-in server answers the protocol (cpp-httplib).
TEST(Agent, RefusesAnAssignmentItCannotReadWithANodeReport) {
  testing::TempDir dir;
  ASSERT_TRUE(Env::Default().WriteFileAtomic(dir.File("join"), "join-token").ok());
  httplib::Server fake;
  std::mutex mu;
  nlohmann::json report;
  fake.Post("/v1/agents", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"id":"i-1","heartbeat_s":0.05,"token":"agent-token"})", "application/json");
  });
  int beats = 0;  // (without the refusal the agent would be asked again for ever: 100 tries, then exit)
  fake.Post("/v1/agents/i-1/heartbeat", [&](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> l(mu);
    if (!report.is_null() || ++beats > 100) return res.set_content(R"({"action":"exit"})", "application/json");
    res.set_content(R"({"action":"run","assignment":{"job":"j-0001","attempt":1,"node":0,"nnodes":1,)"
                    R"("addresses":["127.0.0.1"],"spec":{"name":"j","entrypoint":{"command":"true"},"bogus":1}}})",
                    "application/json");
  });
  fake.Post("/v1/jobs/j-0001/reports", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> l(mu);
    report = nlohmann::json::parse(req.body);
    res.set_content(R"({"ok":true})", "application/json");
  });
  const int port = fake.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { fake.listen_after_bind(); });
  AgentOptions o;
  o.server_url = "http://127.0.0.1:" + std::to_string(port);
  o.instance_id = "i-1";
  o.work_dir = dir.File("work");
  o.address = "127.0.0.1";
  o.heartbeat_s = 0.05;
  o.orphan_timeout_s = 20;
  o.join_token_file = dir.File("join");
  const Status st = RunAgent(o);  // ends when the stand-in says exit (after the report)
  fake.stop();
  serving.join();
  ApiClient::SetProcessToken("");
  EXPECT_TRUE(st.ok()) << st.ToString();
  ASSERT_FALSE(report.is_null()) << "no node report";
  EXPECT_EQ(report["state"], "finished");
  EXPECT_EQ(report["attempt"], 1);
  EXPECT_EQ(report["cause"], "user_error");
  EXPECT_NE(report["message"].get<std::string>().find("bogus"), std::string::npos) << report.dump();
}

}  // namespace
}  // namespace anneal
