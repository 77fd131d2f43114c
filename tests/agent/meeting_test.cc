// How node 0 holds its meeting's ports (agent/meeting.h): a held port refuses another process's
// plain bind, while the job's own listeners (SO_REUSEADDR) still bind it; taking ports for another
// meeting ends the others' holds; the start, answered with the health round's ports, keeps those held
// and lets go of the two it took.
#include "agent/meeting.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <thread>
#include <utility>
#include <map>

#include <nlohmann/json.hpp>

#include "comm/store.h"

// `lhs` = the value of a Result `expr`, or the test ends naming its status.
#define MEET_CONCAT_(a, b) a##b
#define MEET_CONCAT(a, b) MEET_CONCAT_(a, b)
#define ASSERT_OK_AND_ASSIGN(lhs, expr)                                        \
  auto MEET_CONCAT(result_, __LINE__) = (expr);                                \
  ASSERT_TRUE(MEET_CONCAT(result_, __LINE__).ok())                             \
      << MEET_CONCAT(result_, __LINE__).status().ToString();                   \
  lhs = std::move(MEET_CONCAT(result_, __LINE__)).value()

namespace anneal {
namespace {

// errno of a plain bind (no SO_REUSEADDR) of `port` on `addr`; 0 when it bound.
int PlainBind(const char* addr, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, addr, &a.sin_addr);
  const int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 ? 0 : errno;
  ::close(fd);
  return rc;
}

TEST(PortHolds, AHeldPortRefusesOtherBindsButNotTheJobsOwnListener) {
  PortHolds& holds = PortHolds::Process();
  const std::string meeting = MeetingKey{0, 1}.Path("hold-a");
  ASSERT_OK_AND_ASSIGN(int port, holds.Take("hold-a", meeting));
  EXPECT_TRUE(holds.Holds(meeting, port));
  EXPECT_EQ(PlainBind("0.0.0.0", port), EADDRINUSE);
  EXPECT_EQ(PlainBind("127.0.0.1", port), EADDRINUSE);
  {
    // The job's own listener (the launcher's store binds with SO_REUSEADDR) binds and serves it.
    ASSERT_OK_AND_ASSIGN(auto server, TcpStoreServer::Start("127.0.0.1", port));
    ASSERT_OK_AND_ASSIGN(auto store, ConnectTcpStore("127.0.0.1", port, std::chrono::seconds(5)));
    ASSERT_TRUE(store->Set("k", "v").ok());
    ASSERT_OK_AND_ASSIGN(std::string v, store->Get("k", std::chrono::seconds(5)));
    EXPECT_EQ(v, "v");
  }
  ASSERT_OK_AND_ASSIGN(int second, holds.Take("hold-a", meeting));
  EXPECT_EQ(holds.Count(meeting), 2);
  holds.Release(meeting, second);
  EXPECT_EQ(holds.Count(meeting), 1);
  EXPECT_EQ(PlainBind("0.0.0.0", second), 0) << "a released port is still held";
  holds.ReleaseJob("hold-a");
  EXPECT_EQ(holds.Count(meeting), 0);
}

TEST(PortHolds, TakingForAnotherMeetingEndsTheOthersHolds) {
  PortHolds& holds = PortHolds::Process();
  const std::string round1 = MeetingKey{0, 1}.Path("hold-b"), round2 = MeetingKey{0, 2}.Path("hold-b");
  const std::string other_job = MeetingKey{0, 1}.Path("hold-c");
  ASSERT_OK_AND_ASSIGN(int first, holds.Take("hold-b", round1));
  // A later round of the same job (a new meeting, perhaps with another node 0): the first goes.
  ASSERT_OK_AND_ASSIGN(int next, holds.Take("hold-b", round2));
  EXPECT_FALSE(holds.Holds(round1, first));
  EXPECT_EQ(PlainBind("0.0.0.0", first), 0);
  EXPECT_TRUE(holds.Holds(round2, next));
  // Another job's: the second goes too.
  ASSERT_OK_AND_ASSIGN(int third, holds.Take("hold-c", other_job));
  EXPECT_FALSE(holds.Holds(round2, next));
  EXPECT_TRUE(holds.Holds(other_job, third));
  holds.ReleaseJob("hold-b");  // not this job's: stays
  EXPECT_TRUE(holds.Holds(other_job, third));
  holds.ReleaseJob("hold-c");
  EXPECT_EQ(holds.Count(other_job), 0);
}

// The server's rendezvous route as the real one answers it: the first PUT's value is kept and is the
// answer to every PUT and GET after it (404 before).
class MeetingRoute {
 public:
  MeetingRoute() {
    http_.Put(R"(/v1/jobs/([^/]+)/rendezvous/(\d+)/(\d+))", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      if (!values_.count(req.path)) values_[req.path] = req.body;
      res.set_content(values_[req.path], "application/json");
    });
    http_.Get(R"(/v1/jobs/([^/]+)/rendezvous/(\d+)/(\d+))", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      if (!values_.count(req.path)) {
        res.status = 404;
        res.set_content(R"({"error": {"message": "no meeting yet"}})", "application/json");
        return;
      }
      res.set_content(values_[req.path], "application/json");
    });
    port_ = http_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { http_.listen_after_bind(); });
    while (!http_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~MeetingRoute() {
    http_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server http_;
  std::mutex mu_;
  std::map<std::string, std::string> values_;
  int port_ = 0;
  std::thread thread_;
};

TEST(MeetThroughServer, NodeZeroHoldsTheMeetingsPortsAndLetsGoOfTheOthers) {
  MeetingRoute route;
  std::atomic<bool> stop{false};
  PortHolds& holds = PortHolds::Process();
  const std::string meeting = MeetingKey{0, 1}.Path("meet-j");
  // The health round: node 0 publishes two ports it holds; node 1 reads them.
  ASSERT_OK_AND_ASSIGN(Meeting round, MeetThroughServer(route.url(), "meet-j", MeetingKey{0, 1}, 0, "127.0.0.1", 5, stop,
                                                        Clock::Real()));
  EXPECT_TRUE(holds.Holds(meeting, round.master_port));
  EXPECT_TRUE(holds.Holds(meeting, round.store_port));
  EXPECT_EQ(holds.Count(meeting), 2);
  EXPECT_EQ(PlainBind("0.0.0.0", round.store_port), EADDRINUSE);
  ASSERT_OK_AND_ASSIGN(Meeting other, MeetThroughServer(route.url(), "meet-j", MeetingKey{0, 1}, 1, "127.0.0.2", 5, stop,
                                                        Clock::Real()));
  EXPECT_EQ(other.master_port, round.master_port);
  EXPECT_EQ(other.store_port, round.store_port);
  // The start meets under the same key: answered with the round's ports, which stay held; the two
  // node 0 took for it are let go.
  ASSERT_OK_AND_ASSIGN(Meeting start, MeetThroughServer(route.url(), "meet-j", MeetingKey{0, 1}, 0, "127.0.0.1", 5, stop,
                                                        Clock::Real()));
  EXPECT_EQ(start.master_port, round.master_port);
  EXPECT_EQ(start.store_port, round.store_port);
  EXPECT_EQ(holds.Count(meeting), 2);
  EXPECT_TRUE(holds.Holds(meeting, round.master_port));
  // The job's run here ended (the heartbeat loop's Reap): the ports are free again.
  holds.ReleaseJob("meet-j");
  EXPECT_EQ(PlainBind("0.0.0.0", round.master_port), 0);
}

}  // namespace
}  // namespace anneal
