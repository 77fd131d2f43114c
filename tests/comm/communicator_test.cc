#include "comm/communicator.h"

#include <gtest/gtest.h>

#include <climits>
#include <filesystem>
#include <numeric>
#include <thread>

#include "comm/store.h"
#include "testing/temp_dir.h"

namespace anneal {
namespace {

using std::chrono::milliseconds;

// Runs fn(rank, comm) on n threads, each a rank with its own store connection and communicator.
// Whether RunGroup's ranks may reduce through shared memory (CommOptions::shared_memory).
bool g_shared_memory = true;

void RunGroup(int n, const std::function<void(int, Communicator&)>& fn, milliseconds timeout = milliseconds(20000)) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status().message();
  const int port = (*server)->port();
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto store = ConnectTcpStore("127.0.0.1", port, milliseconds(5000));
      ASSERT_TRUE(store.ok()) << store.status().message();
      CommOptions o;
      o.group = "test";
      o.global_rank = r;
      o.world_size = n;
      o.timeout = timeout;
      o.heartbeat_interval = milliseconds(200);
      o.shared_memory = g_shared_memory;
      auto comm = ConnectGloo(store->get(), o);
      ASSERT_TRUE(comm.ok()) << comm.status().message();
      fn(r, **comm);
    });
  }
  for (auto& t : threads) t.join();
}

TEST(StoreTest, TcpSetGetAddAndTimeout) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  auto a = ConnectTcpStore("127.0.0.1", (*server)->port(), milliseconds(2000));
  auto b = ConnectTcpStore("127.0.0.1", (*server)->port(), milliseconds(2000));
  ASSERT_TRUE(a.ok() && b.ok());
  std::thread writer([&] {
    std::this_thread::sleep_for(milliseconds(50));
    ASSERT_TRUE((*b)->Set("k", "v1").ok());
  });
  auto v = (*a)->Get("k", milliseconds(5000));  // waits for the writer
  writer.join();
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, "v1");
  EXPECT_EQ(*(*a)->Add("n", 2), 2);
  EXPECT_EQ(*(*b)->Add("n", 3), 5);
  EXPECT_FALSE((*a)->TryGet("absent")->has_value());
  auto late = (*a)->Get("never", milliseconds(100));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), Code::kPeer);
  EXPECT_NE(late.status().message().find("never"), std::string::npos);
  PrefixStore p(a->get(), "attempt/1/");
  ASSERT_TRUE(p.Set("k", "new").ok());
  EXPECT_EQ(*(*b)->Get("attempt/1/k", milliseconds(100)), "new");
  EXPECT_EQ(*(*b)->Get("k", milliseconds(100)), "v1");  // the old attempt's key is untouched
}

size_t OpenDescriptors() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// What fuzzing the store's port found (tests/fuzz/store_fuzz.cc): an Add past int64 was signed
// overflow, and every connection ever made kept its thread and descriptor until the store ended.
TEST(StoreTest, AnAddPastInt64IsRefusedAndConnectionsGoneLeaveNothing) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  auto a = ConnectTcpStore("127.0.0.1", (*server)->port(), milliseconds(2000));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*(*a)->Add("n", INT64_MAX), INT64_MAX);
  auto past = (*a)->Add("n", 1);
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.status().message().find("would pass the int64 range"), std::string::npos);
  EXPECT_EQ(*(*a)->Add("n", 0), INT64_MAX);  // kept, and the connection still serves
  const size_t before = OpenDescriptors();
  for (int i = 0; i < 200; ++i) {
    auto c = ConnectTcpStore("127.0.0.1", (*server)->port(), milliseconds(2000));
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE((*c)->Set("k" + std::to_string(i), "v").ok());
  }
  // The next connection reaps those gone (their threads may take a moment to end).
  size_t after = 0;
  for (int round = 0; round < 50; ++round) {
    std::this_thread::sleep_for(milliseconds(20));
    auto c = ConnectTcpStore("127.0.0.1", (*server)->port(), milliseconds(2000));
    ASSERT_TRUE(c.ok());
    after = OpenDescriptors();
    if (after <= before + 4) break;
  }
  EXPECT_LE(after, before + 4) << "descriptors before " << before << ", after 200 connections came and went " << after;
}

TEST(StoreTest, UnreachableStoreIsAPeerErrorNamingTheAddress) {
  auto s = ConnectTcpStore("127.0.0.1", 1, milliseconds(300));  // port 1: nobody listens
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kPeer);
  EXPECT_NE(s.status().message().find("127.0.0.1:1"), std::string::npos);
}

TEST(StoreTest, FileStore) {
  testing::TempDir dir;
  auto a = OpenStore("file://" + dir.path() + "/store", milliseconds(100));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE((*a)->Set("x/y", "1").ok());
  EXPECT_EQ(*(*a)->Get("x/y", milliseconds(100)), "1");
  EXPECT_EQ(*(*a)->Add("c", 4), 4);
  EXPECT_EQ(*(*a)->Add("c", -1), 3);
  EXPECT_FALSE((*a)->Get("z", milliseconds(30)).ok());
}

TEST(CommunicatorTest, CollectivesOnThreeRanks) {
 for (const char* shm : {"1", "0"}) {  // shared memory (all on this host), then TCP
  g_shared_memory = std::string(shm) == "1";
  const int n = 3;
  RunGroup(n, [&](int r, Communicator& c) {
    EXPECT_EQ(c.rank(), r);
    // allreduce
    std::vector<float> x(1000);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(r * 1000 + i);
    ASSERT_TRUE(c.AllReduceSum(x.data(), x.size()).ok());
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], 3000.0f + 3 * i) << i;
    double d = r + 0.5;
    ASSERT_TRUE(c.AllReduceSum(&d, 1).ok());
    EXPECT_EQ(d, 4.5);
    // uneven reduce-scatter (an empty piece included), into place
    const std::vector<size_t> counts = {5, 0, 7};
    std::vector<float> g(12);
    for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>((r + 1) * (i + 1));
    const size_t off = r == 0 ? 0 : r == 1 ? 5 : 5;
    ASSERT_TRUE(c.ReduceScatterSum(g.data(), counts, g.data() + off).ok());
    for (size_t i = 0; i < counts[r]; ++i) EXPECT_EQ(g[off + i], 6.0f * (off + i + 1)) << r << " " << i;
    // all-gather the pieces back
    std::vector<float> h(12, -1.0f);
    for (size_t i = 0; i < counts[r]; ++i) h[off + i] = 100.0f * r + i;
    ASSERT_TRUE(c.AllGatherV(h.data(), counts).ok());
    for (size_t i = 0; i < 5; ++i) EXPECT_EQ(h[i], static_cast<float>(i));
    for (size_t i = 0; i < 7; ++i) EXPECT_EQ(h[5 + i], 200.0f + i);
    // broadcast, all-gather of bytes, point to point, barrier
    int64_t b = r == 2 ? 42 : 0;
    ASSERT_TRUE(c.Broadcast(&b, sizeof(b), 2).ok());
    EXPECT_EQ(b, 42);
    int32_t mine = 10 + r, all[3] = {0, 0, 0};
    ASSERT_TRUE(c.AllGatherBytes(&mine, sizeof(mine), all).ok());
    EXPECT_EQ(all[0], 10);
    EXPECT_EQ(all[2], 12);
    if (r == 0) {
      float v = 3.5f;
      ASSERT_TRUE(c.StartSend(&v, sizeof(v), 1)->Wait().ok());
    } else if (r == 1) {
      float v = 0;
      ASSERT_TRUE(c.StartRecv(&v, sizeof(v), 0)->Wait().ok());
      EXPECT_EQ(v, 3.5f);
    }
    auto bs = c.Barrier();
    ASSERT_TRUE(bs.ok()) << bs.message();
    // A reduce-scatter and all-gather spanning several shared-memory chunks, uneven.
    const std::vector<size_t> big = {300000, 0, 500001};
    std::vector<float> z(800001);
    for (size_t i = 0; i < z.size(); ++i) z[i] = static_cast<float>((i % 13) * (r + 1));
    const size_t zoff = r == 0 ? 0 : 300000;
    ASSERT_TRUE(c.ReduceScatterSum(z.data(), big, z.data() + zoff).ok());
    for (size_t i = 0; i < big[r]; ++i) ASSERT_EQ(z[zoff + i], 6.0f * ((zoff + i) % 13)) << "shm=" << shm << " " << i;
    for (size_t i = 0; i < big[r]; ++i) z[zoff + i] = static_cast<float>(r * 1000 + (i % 7));
    ASSERT_TRUE(c.AllGatherV(z.data(), big).ok());
    for (size_t i = 0; i < 300000; ++i) ASSERT_EQ(z[i], static_cast<float>(i % 7)) << "shm=" << shm << " " << i;
    for (size_t i = 0; i < 500001; ++i) ASSERT_EQ(z[300000 + i], static_cast<float>(2000 + i % 7)) << "shm=" << shm;
    // bf16 pieces (two bytes a value, odd counts: pieces that start mid-float), through the view form.
    const std::vector<size_t> halves = {3, 0, 1000003};
    std::vector<uint16_t> w(1000006, 0xffff);
    const size_t woff = r == 0 ? 0 : 3;
    for (size_t i = 0; i < halves[r]; ++i) w[woff + i] = static_cast<uint16_t>(r * 10000 + i % 9);
    const TensorView wv(w.data(), DType::kBF16, {static_cast<int64_t>(w.size())}, Device::Cpu());
    ASSERT_TRUE(c.StartAllGatherV(wv, halves, Event{})->Wait().ok());
    for (size_t i = 0; i < 3; ++i) ASSERT_EQ(w[i], i % 9) << "shm=" << shm << " " << i;
    for (size_t i = 0; i < 1000003; ++i) ASSERT_EQ(w[3 + i], 20000 + i % 9) << "shm=" << shm << " " << i;
    // bf16 sums: the three ranks' values added in fp32 in rank order and rounded once, as a
    // reduce-scatter (uneven, a piece spanning shared-memory chunks) and as an allreduce.
    const std::vector<size_t> pieces = {7, 700001, 2};
    std::vector<uint16_t> q(700010);
    const float term = 1.0f / 3.0f + static_cast<float>(r) * 0.001953125f;  // differs per rank
    for (auto& v : q) v = FloatToBf16(term);
    const float expect = RoundToBf16(RoundToBf16(1.0f / 3.0f) + RoundToBf16(1.0f / 3.0f + 0.001953125f) +
                                     RoundToBf16(1.0f / 3.0f + 2 * 0.001953125f));
    const size_t qoff = r == 0 ? 0 : r == 1 ? 7 : 700008;
    const TensorView qv(q.data(), DType::kBF16, {static_cast<int64_t>(q.size())}, Device::Cpu());
    const TensorView qy(q.data() + qoff, DType::kBF16, {static_cast<int64_t>(pieces[r])}, Device::Cpu());
    ASSERT_TRUE(c.StartReduceScatterSum(qv, pieces, qy, Event{})->Wait().ok());
    for (size_t i = 0; i < pieces[r]; ++i) ASSERT_EQ(Bf16ToFloat(q[qoff + i]), expect) << "shm=" << shm << " " << i;
    for (auto& v : q) v = FloatToBf16(term);
    ASSERT_TRUE(c.StartAllReduceSum(qv, Event{})->Wait().ok());
    for (size_t i = 0; i < q.size(); ++i) ASSERT_EQ(Bf16ToFloat(q[i]), expect) << "shm=" << shm << " " << i;
  });
 }
  g_shared_memory = true;
}

// Ranks on one host reduce through shared memory (comm/shm_group.h): a buffer of several chunks with a
// partial last one, and a small one, give exact sums, the same on every rank; without shared memory
// (ANNEAL_SHM=0: CommOptions::shared_memory false) the same sums come over TCP.
TEST(CommunicatorTest, SharedMemoryAndTcpAllReduceAgree) {
  for (const char* shm : {"1", "0"}) {
    g_shared_memory = std::string(shm) == "1";
    RunGroup(3, [&](int r, Communicator& c) {
      const size_t n = 1300000;  // about 5 slots of 256 Ki floats (ShmGroup::SlotBytes(3) = 1 MB), the last partial
      std::vector<float> x(n);
      for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>((i % 97) + 100 * r);
      ASSERT_TRUE(c.AllReduceSum(x.data(), n).ok());
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(x[i], static_cast<float>(3 * (i % 97) + 300)) << "shm=" << shm << " i=" << i;
      std::vector<double> d(10, 0.25 * (r + 1));
      ASSERT_TRUE(c.AllReduceSum(d.data(), d.size()).ok());
      EXPECT_EQ(d[9], 1.5);
    });
  }
  g_shared_memory = true;
}

TEST(CommunicatorTest, AsyncOperationsCompleteInOrder) {
  RunGroup(2, [&](int r, Communicator& c) {
    std::vector<std::vector<float>> bufs(8, std::vector<float>(10000, static_cast<float>(r + 1)));
    std::vector<std::unique_ptr<Work>> works;
    for (auto& b : bufs) works.push_back(c.StartAllReduceSum(b.data(), b.size()));
    for (auto& w : works) ASSERT_TRUE(w->Wait().ok());
    for (auto& b : bufs) EXPECT_EQ(b[9999], 3.0f);
  });
}

// A rank that never arrives at a collective: the other fails within the timeout (plus diagnosis),
// with a PeerError naming the group, the operation and the silent rank — and later calls fail fast.
TEST(CommunicatorTest, ASilentRankIsNamedAfterTheTimeout) {
  std::atomic<bool> done{false};
  RunGroup(
      2,
      [&](int r, Communicator& c) {
        if (r == 1) {
          while (!done) std::this_thread::sleep_for(milliseconds(10));  // alive (heartbeats) but silent
          return;
        }
        float x = 1;
        auto s = c.AllReduceSum(&x, 1);
        done = true;
        ASSERT_FALSE(s.ok());
        EXPECT_EQ(s.code(), Code::kPeer);
        EXPECT_NE(s.message().find("group 'test'"), std::string::npos) << s.message();
        EXPECT_NE(s.message().find("allreduce"), std::string::npos) << s.message();
        auto again = c.Barrier();
        EXPECT_EQ(again.message(), s.message());
      },
      milliseconds(700));
}

}  // namespace
}  // namespace anneal
