// tensor/device_trace.h with timing marks whose "device" clock the test moves by hand: the spans of
// the session's stream come out again on the session's track with the device's times placed from
// the reference mark, nested as issued; other streams, no marks, or no session give host spans only.
#include "tensor/device_trace.h"

#include <gtest/gtest.h>

#include <deque>
#include <nlohmann/json.hpp>

namespace anneal {
namespace {

using nlohmann::json;

class FakeMarks : public TimingMarks {
 public:
  double now_ms = 100;  // the device's clock
  int waits = 0, releases = 0;
  void* Mark(const Stream&) override { return &made_.emplace_back(now_ms); }
  void Wait(const Stream&) override { ++waits; }
  double ElapsedMs(void* from, void* to) override { return *static_cast<double*>(to) - *static_cast<double*>(from); }
  void Release() override {
    ++releases;
    made_.clear();
  }

 private:
  std::deque<double> made_;  // stable addresses
};

TEST(DeviceTraceTest, SpansOfTheSessionStreamGetTheDevicesTimes) {
  FakeMarks m;
  const Stream s{reinterpret_cast<void*>(0x1), Device::Cpu()}, other{reinterpret_cast<void*>(0x2), Device::Cpu()};
  trace::Start();
  device_trace::Begin(&m, s, "fake stream");
  EXPECT_EQ(m.waits, 1);  // idle before the reference mark (device 100 ms)
  m.now_ms = 103;
  {
    device_trace::Span a(&m, s, "forward", "h.", 0);
    m.now_ms += 5;  // 103..108
  }
  {
    device_trace::Span b(&m, s, "backward", "h.", 0);  // 108..111, holding 109..110
    m.now_ms += 1;
    {
      device_trace::Span inner(&m, s, "forward", "h.", 0);
      m.now_ms += 1;
    }
    m.now_ms += 1;
    device_trace::Span elsewhere(&m, other, "forward", "copy");   // another stream: host only
    device_trace::Span unmarked(nullptr, s, "optimizer", "host");  // no marks: host only
  }
  EXPECT_EQ(device_trace::Pending(), 3u);
  device_trace::Flush();
  EXPECT_EQ(device_trace::Pending(), 0u);
  EXPECT_EQ(m.waits, 2);
  EXPECT_EQ(m.releases, 1);
  { device_trace::Span after(&m, s, "forward", "late"); }  // no session: host only
  EXPECT_EQ(device_trace::Pending(), 0u);
  trace::Stop();
  const json d = json::parse(trace::ToJson({0, "rank 0", {}}));
  int track = -1;
  for (const json& e : d["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == "fake stream") track = e["tid"];
  }
  ASSERT_GE(track, 0);
  std::vector<json> dev, host;
  for (const json& e : d["traceEvents"]) {
    if (e["ph"] != "X") continue;
    (e["tid"] == track ? dev : host).push_back(e);
  }
  ASSERT_EQ(dev.size(), 3u);
  EXPECT_EQ(host.size(), 6u);  // every span is a host span too
  std::sort(dev.begin(), dev.end(), [](const json& a, const json& b) { return a["ts"].get<double>() < b["ts"].get<double>(); });
  const double t0 = dev[0]["ts"].get<double>();
  EXPECT_EQ(dev[0]["cat"], "forward");
  EXPECT_NEAR(dev[0]["dur"].get<double>(), 5000, 1e-6);
  EXPECT_EQ(dev[1]["cat"], "backward");
  EXPECT_NEAR(dev[1]["ts"].get<double>() - t0, 5000, 1e-3);
  EXPECT_NEAR(dev[1]["dur"].get<double>(), 3000, 1e-6);
  EXPECT_NEAR(dev[2]["ts"].get<double>() - t0, 6000, 1e-3);  // nested in the backward span
  EXPECT_NEAR(dev[2]["dur"].get<double>(), 1000, 1e-6);
  EXPECT_EQ(dev[2]["args"]["detail"], "device");
  trace::Clear();
}

TEST(DeviceTraceTest, NoSessionWithoutRecordingOrMarks) {
  FakeMarks m;
  const Stream s{reinterpret_cast<void*>(0x1), Device::Cpu()};
  trace::Clear();
  device_trace::Begin(&m, s, "fake stream");  // not recording
  { device_trace::Span a(&m, s, "forward", "h.", 0); }
  EXPECT_EQ(device_trace::Pending(), 0u);
  device_trace::Flush();
  EXPECT_EQ(m.waits, 0);
  EXPECT_EQ(m.releases, 0);
}

}  // namespace
}  // namespace anneal
