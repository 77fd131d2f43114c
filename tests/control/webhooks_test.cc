// The webhook sender against an in-process receiver: retries after 5xx, the body and the signature,
// order; a stop in the middle and a new sender resuming from the stored cursor (nothing lost, nothing
// delivered twice); a dead receiver that drops its events without holding up a live one; and a first
// start that does not replay history.
#include "control/webhooks.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <mutex>
#include <thread>

#include "core/crypto.h"
#include "testing/temp_dir.h"

namespace anneal {
namespace {

// A valid spec named `name` (the store parses what it reads back).
JobSpec Spec(const std::string& name, const std::string& command = "true") {
  JobSpec s;
  s.name = name;
  s.command = {command};
  return s;
}

using nlohmann::json;

struct Received {
  std::string path, event_id, timestamp, signature, content_type, body;
  int answered = 0;
};

// An HTTP server on a free port that records every POST and answers what answer(request, index)
// says (index: the number of requests before this one).
class Receiver {
 public:
  explicit Receiver(std::function<int(const Received&, int)> answer) : answer_(std::move(answer)) {
    server_.Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
      Received r;
      r.path = req.path;
      r.event_id = req.get_header_value("X-Anneal-Event-Id");
      r.timestamp = req.get_header_value("X-Anneal-Timestamp");
      r.signature = req.get_header_value("X-Anneal-Signature");
      r.content_type = req.get_header_value("Content-Type");
      r.body = req.body;
      std::lock_guard<std::mutex> l(mu_);
      r.answered = answer_(r, static_cast<int>(got_.size()));
      res.status = r.answered;
      res.set_content("{}", "application/json");
      got_.push_back(std::move(r));
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    for (int i = 0; i < 500 && !server_.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ~Receiver() {
    server_.stop();
    thread_.join();
  }
  std::string url() const {
    std::string u("http://127.0.0.1:");
    u.append(std::to_string(port_)).append("/hooks/anneal");
    return u;
  }
  std::vector<Received> got() {
    std::lock_guard<std::mutex> l(mu_);
    return got_;
  }
  // The requests answered 2xx.
  std::vector<Received> delivered() {
    std::vector<Received> out;
    for (auto& r : got()) {
      if (r.answered >= 200 && r.answered < 300) out.push_back(r);
    }
    return out;
  }

 private:
  std::function<int(const Received&, int)> answer_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<Received> got_;
};

// A port nothing listens on (bound then released).
int DeadPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t n = sizeof(a);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n), 0);
  close(fd);
  return ntohs(a.sin_port);
}

std::string Hex(const std::string& raw) {
  std::string out;
  char b[3];
  for (unsigned char c : raw) {
    std::snprintf(b, sizeof(b), "%02x", c);
    out.append(b);
  }
  return out;
}

// Waits (up to 10 s) until pred holds.
bool WaitUntil(const std::function<bool()>& pred) {
  for (int i = 0; i < 1000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

std::unique_ptr<JobStore> OpenStore(const testing::TempDir& dir) {
  auto s = JobStore::Open(dir.File("anneal.db"));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

// A job through Pending -> Starting -> Downloading -> Training -> Completed: five events.
std::string RunJob(JobStore* store, const std::string& name, double t0) {
  auto j = store->CreateJob({name, "alice", Spec(name)}, t0);
  EXPECT_TRUE(j.ok()) << j.status().ToString();
  if (!j.ok()) return "";
  EXPECT_TRUE(store->Transition(j->job.id, JobPhase::kStarting, "obtaining instances", t0 + 1).ok());
  EXPECT_TRUE(store->Transition(j->job.id, JobPhase::kDownloading, "downloading", t0 + 2).ok());
  EXPECT_TRUE(store->Transition(j->job.id, JobPhase::kTraining, "training", t0 + 3).ok());
  EXPECT_TRUE(store->Transition(j->job.id, JobPhase::kCompleted, "done", t0 + 4.5).ok());
  return j->job.id;
}

std::vector<EventRecord> AllEvents(JobStore* store) {
  auto e = store->EventsAfter(0, 1000);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? *e : std::vector<EventRecord>();
}

std::vector<std::string> EventIds(const std::vector<Received>& rs) {
  std::vector<std::string> out;
  for (const auto& r : rs) out.push_back(r.event_id);
  return out;
}

std::vector<std::string> EventIds(const std::vector<EventRecord>& es) {
  std::vector<std::string> out;
  for (const auto& e : es) out.push_back(std::to_string(e.id));
  return out;
}

TEST(WebhookSender, RetriesAfter5xxAndDeliversSignedEventsInOrder) {
  testing::TempDir dir;
  auto store = OpenStore(dir);
  ASSERT_TRUE(store);
  const std::string job = RunJob(store.get(), "hook", 100.0);
  const std::vector<EventRecord> events = AllEvents(store.get());
  ASSERT_EQ(events.size(), 5u);

  Receiver rx([](const Received&, int index) { return index < 2 ? 500 : 200; });
  WebhookOptions o;
  o.urls = {rx.url()};
  o.secret = "s3cret";
  o.from_start = true;
  o.backoff_initial_s = 0.05;
  auto s = WebhookSender::Start(store.get(), o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE(WaitUntil([&] { return (*s)->stats().delivered == 5; })) << (*s)->stats().delivered;

  const auto got = rx.got();
  ASSERT_EQ(got.size(), 7u);
  // The first event was tried three times (500, 500, 200), with the same body each time.
  EXPECT_EQ(got[0].event_id, got[1].event_id);
  EXPECT_EQ(got[1].event_id, got[2].event_id);
  EXPECT_EQ(got[0].body, got[2].body);
  const auto ok = rx.delivered();
  ASSERT_EQ(EventIds(ok), EventIds(events));
  const char* phases[] = {"Pending", "Starting", "Downloading", "Training", "Completed"};
  const char* primaries[] = {"InProgress", "InProgress", "InProgress", "InProgress", "Completed"};
  for (size_t i = 0; i < ok.size(); ++i) {
    SCOPED_TRACE(i);
    const Received& r = ok[i];
    EXPECT_EQ(r.path, "/hooks/anneal");
    EXPECT_EQ(r.content_type, "application/json");
    json b = json::parse(r.body);
    EXPECT_EQ(b["id"], std::to_string(events[i].id));
    EXPECT_EQ(b["type"], "job.status");
    EXPECT_EQ(b["job"], job);
    EXPECT_EQ(b["owner"], "alice");
    EXPECT_EQ(b["attempt"], 0);
    EXPECT_EQ(b["status"], primaries[i]);
    EXPECT_EQ(b["secondary_status"], phases[i]);
    EXPECT_EQ(b["message"], events[i].message);
    EXPECT_DOUBLE_EQ(b["at"].get<double>(), events[i].at);
    // The receiver's check: HMAC-SHA256(secret, timestamp + "." + body), and a recent timestamp.
    std::string signed_text = r.timestamp;
    signed_text.append(".").append(r.body);
    EXPECT_EQ(r.signature, std::string("sha256=").append(Hex(HmacSha256("s3cret", signed_text))));
    EXPECT_NEAR(std::stod(r.timestamp), static_cast<double>(std::time(nullptr)), 60);
  }
  EXPECT_DOUBLE_EQ(json::parse(ok[4].body)["at"].get<double>(), 104.5);
  const auto st = (*s)->stats();
  EXPECT_EQ(st.failed_tries, 2);
  EXPECT_EQ(st.dropped, 0);
  // The cursor is the last event.
  (*s)->Stop();
  auto cursor = store->GetValue(o.cursor_key);
  ASSERT_TRUE(cursor.ok() && cursor->has_value());
  EXPECT_EQ(**cursor, std::to_string(events.back().id));
}

TEST(WebhookSender, ResumesFromTheCursorAfterAStopWithoutLosingOrRepeating) {
  testing::TempDir dir;
  auto store = OpenStore(dir);
  ASSERT_TRUE(store);
  RunJob(store.get(), "first", 100.0);
  std::vector<EventRecord> events = AllEvents(store.get());
  ASSERT_EQ(events.size(), 5u);
  const std::string third = std::to_string(events[2].id);

  // While `refuse` holds the receiver answers 503 to the third event: the first sender delivers two
  // events and is stopped while it backs off before retrying the third.
  std::atomic<bool> refuse{true};
  Receiver rx([&](const Received& r, int) { return refuse && r.event_id == third ? 503 : 200; });
  WebhookOptions o;
  o.urls = {rx.url()};
  o.from_start = true;
  o.max_tries = 1000;
  o.backoff_initial_s = 4;  // after the first refusal the sender sleeps 4 s or more before retrying
  o.backoff_max_s = 8;
  {
    auto s = WebhookSender::Start(store.get(), o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_TRUE(WaitUntil([&] { return (*s)->stats().failed_tries >= 1; }));
    // Stop must not wait for the backoff: a bound of half the configured backoff, so a Stop that
    // waited fails it whatever the machine's load, and one that does not has seconds to spare.
    const auto t0 = std::chrono::steady_clock::now();
    (*s)->Stop();
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), o.backoff_initial_s / 2);
    EXPECT_EQ((*s)->stats().delivered, 2);
    EXPECT_EQ((*s)->stats().dropped, 0);
  }
  auto cursor = store->GetValue(o.cursor_key);
  ASSERT_TRUE(cursor.ok() && cursor->has_value());
  EXPECT_EQ(**cursor, std::to_string(events[1].id));

  // More events while no sender runs, then a new sender (from_start is ignored: a cursor exists).
  RunJob(store.get(), "second", 200.0);
  events = AllEvents(store.get());
  ASSERT_EQ(events.size(), 10u);
  refuse = false;
  const size_t before = rx.got().size();
  auto s = WebhookSender::Start(store.get(), o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE(WaitUntil([&] { return (*s)->stats().delivered == 8; })) << (*s)->stats().delivered;
  (*s)->Stop();

  // Every event answered 2xx exactly once, in order; the new sender began at the third.
  EXPECT_EQ(EventIds(rx.delivered()), EventIds(events));
  const auto got = rx.got();
  ASSERT_GT(got.size(), before);
  EXPECT_EQ(got[before].event_id, third);
  EXPECT_EQ(got.size(), before + 8);
  EXPECT_TRUE(got[before].signature.empty());  // no secret, no signature
}

TEST(WebhookSender, DropsEventsForADeadReceiverWithoutBlockingALiveOne) {
  testing::TempDir dir;
  auto store = OpenStore(dir);
  ASSERT_TRUE(store);
  RunJob(store.get(), "dead", 100.0);
  const std::vector<EventRecord> events = AllEvents(store.get());

  Receiver live([](const Received&, int) { return 204; });
  WebhookOptions o;
  std::string dead("http://127.0.0.1:");
  dead.append(std::to_string(DeadPort())).append("/x");
  o.urls = {dead, live.url()};  // the dead one first: each event waits for its tries there
  o.from_start = true;
  o.max_tries = 2;
  o.backoff_initial_s = 0.05;
  o.timeout_s = 1;
  auto s = WebhookSender::Start(store.get(), o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE(WaitUntil([&] { return (*s)->stats().delivered == 5 && (*s)->stats().dropped == 5; }))
      << (*s)->stats().delivered << " delivered, " << (*s)->stats().dropped << " dropped";
  EXPECT_EQ((*s)->stats().failed_tries, 10);
  EXPECT_EQ(EventIds(live.delivered()), EventIds(events));
  EXPECT_EQ(live.got().size(), 5u);
}

TEST(WebhookSender, StopAbortsARequestInFlight) {
  testing::TempDir dir;
  auto store = OpenStore(dir);
  ASSERT_TRUE(store);
  RunJob(store.get(), "slow", 100.0);

  // The receiver holds every request until released (or 10 s pass).
  std::atomic<bool> release{false};
  std::atomic<int> arrived{0};
  Receiver rx([&](const Received&, int) {
    ++arrived;
    for (int i = 0; i < 1000 && !release; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return 200;
  });
  WebhookOptions o;
  o.urls = {rx.url()};
  o.from_start = true;
  o.timeout_s = 30;
  auto s = WebhookSender::Start(store.get(), o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE(WaitUntil([&] { return arrived > 0; }));
  const auto t0 = std::chrono::steady_clock::now();
  (*s)->Stop();
  // Half the receiver's 10 s hold: a Stop that waited for the answer fails it.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  release = true;
  // Cut short: not delivered, not counted as a failure, and the cursor did not move.
  EXPECT_EQ((*s)->stats().delivered, 0);
  EXPECT_EQ((*s)->stats().failed_tries, 0);
  auto cursor = store->GetValue(o.cursor_key);
  ASSERT_TRUE(cursor.ok());
  EXPECT_FALSE(cursor->has_value());
}

TEST(WebhookSender, FirstStartSkipsHistoryAndNotifyWakesIt) {
  testing::TempDir dir;
  auto store = OpenStore(dir);
  ASSERT_TRUE(store);
  RunJob(store.get(), "old", 100.0);

  WebhookOptions bad;
  bad.urls = {"ftp://127.0.0.1/x"};
  auto b = WebhookSender::Start(store.get(), bad);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), Code::kInvalidInput);
  bad.urls = {"http:///x"};
  EXPECT_FALSE(WebhookSender::Start(store.get(), bad).ok());

  Receiver rx([](const Received&, int) { return 200; });
  WebhookOptions o;
  o.urls = {rx.url()};
  o.poll_s = 60;  // only Notify() can wake it in time
  auto s = WebhookSender::Start(store.get(), o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto j = store->CreateJob({"new", "bob", Spec("new")}, 300.0);
  ASSERT_TRUE(j.ok());
  (*s)->Notify();
  ASSERT_TRUE(WaitUntil([&] { return (*s)->stats().delivered == 1; }));
  const auto got = rx.got();
  ASSERT_EQ(got.size(), 1u);
  json body = json::parse(got[0].body);
  EXPECT_EQ(body["job"], j->job.id);
  EXPECT_EQ(body["owner"], "bob");
  EXPECT_EQ(body["secondary_status"], "Pending");
}

}  // namespace
}  // namespace anneal
