// core/trace.h: off, nothing is recorded; on, spans nest on their thread, virtual tracks are named,
// counters kept, and the file is the Trace Event Format (checked by parsing it back).
#include "core/trace.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

namespace anneal {
namespace {

using nlohmann::json;

json Doc() { return json::parse(trace::ToJson({7, "rank 7", {{"pp_rank", "1"}}})); }

std::vector<json> Events(const json& d, const std::string& ph) {
  std::vector<json> out;
  for (const json& e : d["traceEvents"]) {
    if (e["ph"] == ph) out.push_back(e);
  }
  return out;
}

TEST(TraceTest, OffRecordsNothing) {
  trace::Clear();
  {
    trace::Span s("forward", "h.", 0);
    trace::Counter("memory", {{"resident_mb", 1}});
  }
  EXPECT_EQ(trace::EventCount(), 0u);
  EXPECT_FALSE(trace::Enabled());
}

TEST(TraceTest, SpansNestOnTheirThreadWithNamesArgsAndCounters) {
  trace::Start();
  trace::NameThisThread("main");
  {
    trace::Span step("step", "step ", 3);
    {
      trace::Span f("forward", "h.", 1);
    }
    trace::Span w("comm", std::string("wait allreduce"), {{"bytes", 4096}});
  }
  trace::Counter("memory", {{"resident_mb", 12.5}});
  const int track = trace::Track("comm dp-0-1");
  EXPECT_EQ(trace::Track("comm dp-0-1"), track);
  trace::Complete(track, "comm", "allreduce", trace::NowUs(), 5, {{"bytes", 64}}, "dp-0-1");
  std::thread([] {
    trace::NameThisThread("checkpoint writer");
    trace::Span s("checkpoint", "checkpoint write");
  }).join();
  trace::Stop();
  { trace::Span after("step", "step ", 4); }  // after Stop: not recorded
  const json d = Doc();
  const auto x = Events(d, "X");
  ASSERT_EQ(x.size(), 5u);
  std::map<std::string, json> by;
  for (const json& e : x) by[e["name"]] = e;
  const json &step = by.at("step 3"), &f = by.at("h.1"), &w = by.at("wait allreduce");
  EXPECT_EQ(step["tid"], f["tid"]);
  EXPECT_GE(f["ts"].get<double>(), step["ts"].get<double>());
  EXPECT_LE(f["ts"].get<double>() + f["dur"].get<double>(), step["ts"].get<double>() + step["dur"].get<double>() + 1e-3);
  EXPECT_GE(w["ts"].get<double>(), f["ts"].get<double>() + f["dur"].get<double>() - 1e-3);
  EXPECT_EQ(w["args"]["bytes"], 4096.0);
  EXPECT_EQ(w["cat"], "comm");
  EXPECT_EQ(by.at("allreduce")["tid"], track);
  EXPECT_EQ(by.at("allreduce")["args"]["detail"], "dp-0-1");
  EXPECT_NE(by.at("checkpoint write")["tid"], step["tid"]);
  for (const json& e : d["traceEvents"]) EXPECT_EQ(e["pid"], 7);
  const auto c = Events(d, "C");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0]["args"]["resident_mb"], 12.5);
  std::map<std::string, std::string> names;
  for (const json& m : Events(d, "M")) names[m["name"].get<std::string>() + ":" + m["args"].dump()] = "";
  EXPECT_TRUE(names.count("process_name:{\"name\":\"rank 7\"}"));
  EXPECT_TRUE(names.count("thread_name:{\"name\":\"comm dp-0-1\"}"));
  EXPECT_TRUE(names.count("thread_name:{\"name\":\"checkpoint writer\"}"));
  EXPECT_EQ(d["otherData"]["pp_rank"], "1");
  // Start again: the earlier window is dropped.
  trace::Start();
  trace::Stop();
  EXPECT_EQ(trace::EventCount(), 0u);
  trace::Clear();
}

}  // namespace
}  // namespace anneal
