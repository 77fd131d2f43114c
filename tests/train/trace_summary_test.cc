// train/trace_summary.h over hand-made traces whose times are known: exclusive time per category,
// the pipeline's idle fraction of the schedule, the merged document, the reading, bad files named.
#include "train/trace_summary.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace anneal {
namespace {

using nlohmann::json;

json X(int pid, int tid, const char* cat, const char* name, double ts, double dur) {
  return {{"ph", "X"}, {"pid", pid}, {"tid", tid}, {"cat", cat}, {"name", name}, {"ts", ts}, {"dur", dur}, {"args", json::object()}};
}

// One step of 1000 us: data 100, a schedule of 700 holding forward 200, a pipeline wait 300 and
// backward 150 (with a comm wait of 50 inside it), then an optimizer of 150 holding a comm wait of
// 100; 50 us of the step's own.
TraceInput Rank(int r, double scale = 1) {
  json ev = json::array();
  ev.push_back({{"ph", "M"}, {"pid", r}, {"tid", 0}, {"name", "process_name"}, {"args", {{"name", "rank"}}}});
  const double s = scale;
  ev.push_back(X(r, 5, "step", "step 3", 0, 1000 * s));
  ev.push_back(X(r, 5, "data", "fetch", 0, 100 * s));
  ev.push_back(X(r, 5, "schedule", "forward-backward", 100 * s, 700 * s));
  ev.push_back(X(r, 5, "forward", "h.0", 100 * s, 200 * s));
  ev.push_back(X(r, 5, "pipeline", "wait receive", 300 * s, 300 * s));
  ev.push_back(X(r, 5, "backward", "h.0", 600 * s, 150 * s));
  ev.push_back(X(r, 5, "comm", "wait allreduce", 700 * s, 50 * s));
  ev.push_back(X(r, 5, "optimizer", "optimizer", 800 * s, 150 * s));
  ev.push_back(X(r, 5, "comm", "allreduce(f64)", 850 * s, 100 * s));
  ev.push_back(X(r, 1 << 24, "comm", "allreduce", 700 * s, 40 * s));  // the group's track: not the step's time
  ev.push_back(X(r, 9, "checkpoint", "checkpoint write", 0, 5000));   // another thread: not the step's time
  json doc = {{"traceEvents", ev}, {"otherData", {{"rank", std::to_string(r)}, {"pp_rank", "0"}}}};
  return {"rank-" + std::to_string(r), doc.dump()};
}

TEST(TraceSummaryTest, ExclusiveTimePerCategoryOnTheMainThread) {
  TraceSummary s;
  auto merged = MergeTraces({Rank(1), Rank(0, 2)}, &s);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  ASSERT_EQ(s.ranks.size(), 2u);
  const RankTime& r = s.ranks[1];
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.steps, 1);
  EXPECT_NEAR(r.step_s, 1e-3, 1e-12);
  EXPECT_NEAR(r.category_s.at("compute"), (200 + 100 + 50) * 1e-6, 1e-12);  // backward 150-50, optimizer 150-100
  EXPECT_NEAR(r.category_s.at("communication"), 150e-6, 1e-12);
  EXPECT_NEAR(r.category_s.at("pipeline idle"), 300e-6, 1e-12);
  EXPECT_NEAR(r.category_s.at("data"), 100e-6, 1e-12);
  EXPECT_NEAR(r.category_s.at("other"), 100e-6, 1e-12);  // the step's own 50 and the schedule's own 50
  EXPECT_EQ(r.category_s.count("checkpoint"), 0u);
  EXPECT_NEAR(r.schedule_pipeline_s / r.schedule_s, 300.0 / 700, 1e-9);
  EXPECT_NEAR(r.comm_bytes.count("allreduce"), 1, 0);
  EXPECT_NEAR(s.MeanFraction("pipeline idle"), 0.3, 1e-9);  // the same fractions at either scale
  const json m = json::parse(*merged);
  std::set<int> pids;
  for (const json& e : m["traceEvents"]) pids.insert(e["pid"].get<int>());
  EXPECT_EQ(pids, (std::set<int>{0, 1}));
  EXPECT_EQ(m["otherData"]["ranks"].size(), 2u);
  EXPECT_EQ(s.Reading(), "pipeline-bound: 30 % of the step waits on the other stages (the pipeline bubble)");
  EXPECT_NE(s.Table().find("pipeline idle of the schedule 42.9 %"), std::string::npos) << s.Table();
}

TEST(TraceSummaryTest, ReadingNamesTheCollectiveWaitedOnOrCompute) {
  json ev = json::array();
  ev.push_back(X(0, 5, "step", "step 1", 0, 1000));
  ev.push_back(X(0, 5, "forward", "h.0", 0, 400));
  ev.push_back(X(0, 5, "comm", "wait reduce-scatter", 400, 500));
  TraceSummary s;
  ASSERT_TRUE(MergeTraces({{"a", json{{"traceEvents", ev}}.dump()}}, &s).ok());
  EXPECT_EQ(s.Reading(), "communication-bound: 50 % of the step waits on reduce-scatter");
  ev = json::array({X(0, 5, "step", "step 1", 0, 1000), X(0, 5, "backward", "h.0", 0, 950), X(0, 5, "comm", "allreduce", 950, 50)});
  ASSERT_TRUE(MergeTraces({{"a", json{{"traceEvents", ev}}.dump()}}, &s).ok());
  EXPECT_EQ(s.Reading(), "compute-bound: 95 % of the step is forward, backward and the optimizer");
}

TEST(TraceSummaryTest, PackedFormKeepsWhatTheSummaryNeeds) {
  TraceSummary s;
  ASSERT_TRUE(MergeTraces({Rank(3)}, &s).ok());
  const std::vector<double> v = s.ranks[0].Pack();
  ASSERT_EQ(v.size(), RankTime::kPacked);
  TraceSummary back;
  back.ranks.push_back(RankTime::Unpack(v.data()));
  EXPECT_EQ(back.ranks[0].rank, 3);
  EXPECT_EQ(back.ranks[0].labels.at("pp_rank"), "0");
  EXPECT_EQ(back.Reading(), s.Reading());
  for (const std::string& c : TraceCategories()) EXPECT_DOUBLE_EQ(back.MeanFraction(c), s.MeanFraction(c)) << c;
  EXPECT_NEAR(back.ranks[0].wait_s.at("wait allreduce"), 150e-6, 1e-12);  // the f64 one counted as allreduce
}

TEST(TraceSummaryTest, BadFilesAreNamed) {
  TraceSummary s;
  EXPECT_NE(MergeTraces({}, &s).status().message().find("train.profile_steps"), std::string::npos);
  EXPECT_NE(MergeTraces({{"x.json", "{"}}, &s).status().message().find("x.json: not JSON"), std::string::npos);
  EXPECT_NE(MergeTraces({{"y.json", "{\"a\":1}"}}, &s).status().message().find("y.json: no traceEvents"), std::string::npos);
  json ev = json::array({X(0, 5, "forward", "h.0", 0, 10)});
  EXPECT_NE(MergeTraces({{"z.json", json{{"traceEvents", ev}}.dump()}}, &s).status().message().find("no step spans"),
            std::string::npos);
  EXPECT_NE(MergeTraces({Rank(0), Rank(0)}, &s).status().message().find("rank 0 appears twice"), std::string::npos);
}

}  // namespace
}  // namespace anneal
