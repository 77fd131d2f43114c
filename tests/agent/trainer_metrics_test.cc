// The built-in trainer's metrics on their way to the server: the trainer's metrics-<RANK> file
// (train/report.h TrainerMetricsFile), the agent's reader of it (agent/node_metrics.h
// TrainerMetricsReader: complete lines only, a user's regex of the same name wins), and the step a
// metric point carries through the wire format and the job store (schema 7).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>

#include <sqlite3.h>

#include "agent/node_metrics.h"
#include "control/job_store.h"
#include "protocol/wire.h"
#include "testing/temp_dir.h"
#include "train/report.h"

namespace anneal {
namespace {

void Append(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::app | std::ios::binary);
  f << data;
}

bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }

TEST(TrainerMetricsLine, ParsesTheStepAndEachNamedValue) {
  int64_t step = -1;
  std::vector<std::pair<std::string, double>> v;
  ASSERT_TRUE(ParseTrainerMetricsLine("12 train_loss=3.5 lr=6e-04 mfu=41.25", &step, &v));
  EXPECT_EQ(step, 12);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].first, "train_loss");
  EXPECT_DOUBLE_EQ(v[0].second, 3.5);
  EXPECT_EQ(v[1].first, "lr");
  EXPECT_DOUBLE_EQ(v[1].second, 6e-4);
  EXPECT_DOUBLE_EQ(v[2].second, 41.25);
}

TEST(TrainerMetricsLine, KeepsNonFiniteValuesAndSkipsBadTokens) {
  int64_t step = -1;
  std::vector<std::pair<std::string, double>> v;
  // nan and inf as printf writes them; then a token without '=', an empty name, a name with a bad
  // character, a value with trailing junk, an empty value: each skipped, the good ones kept.
  ASSERT_TRUE(ParseTrainerMetricsLine("3 a=nan b=-inf junk =1 c-d=2 e=1.5x f= g=7", &step, &v));
  EXPECT_EQ(step, 3);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].first, "a");
  EXPECT_TRUE(std::isnan(v[0].second));
  EXPECT_EQ(v[1].first, "b");
  EXPECT_TRUE(std::isinf(v[1].second) && v[1].second < 0);
  EXPECT_EQ(v[2].first, "g");
  EXPECT_DOUBLE_EQ(v[2].second, 7);
}

TEST(TrainerMetricsLine, RefusesALineWithoutAStep) {
  int64_t step = -1;
  std::vector<std::pair<std::string, double>> v;
  EXPECT_FALSE(ParseTrainerMetricsLine("", &step, &v));
  EXPECT_FALSE(ParseTrainerMetricsLine("loss=3", &step, &v));
  EXPECT_FALSE(ParseTrainerMetricsLine("-1 loss=3", &step, &v));
  EXPECT_FALSE(ParseTrainerMetricsLine("12x loss=3", &step, &v));
  EXPECT_FALSE(ParseTrainerMetricsLine("99999999999999999999 loss=3", &step, &v));
  EXPECT_TRUE(v.empty());
  EXPECT_TRUE(ParseTrainerMetricsLine("7", &step, &v));  // a step and nothing else: no values
  EXPECT_EQ(step, 7);
  EXPECT_TRUE(v.empty());
}

// What the trainer writes, the agent reads back bit for bit (%.17g), at the step it was written for.
TEST(TrainerMetricsFile, RoundTripsThroughTheReaderExactly) {
  testing::TempDir dir;
  const double loss = 10.98765432101234567, lr = 0.1 + 0.2, tiny = 1e-300, tps = 12345.678901234;
  {
    TrainerMetricsFile rank0(dir.path(), 0), rank3(dir.path(), 3);
    rank0.Record(5, {{"train_loss", loss}, {"lr", lr}, {"tokens_per_s", tps}});
    rank3.Record(5, {{"peak_rss_mb", tiny}});
    rank0.Record(10, {{"val_loss", std::nan("")}});
    rank0.Record(11, {});  // nothing to record: no line
  }
  TrainerMetricsFile none("", 0);  // no progress folder: nothing, and no crash
  none.Record(1, {{"x", 1}});
  TrainerMetricsReader r(dir.path(), {});
  auto pts = r.Poll();
  ASSERT_EQ(pts.size(), 5u);
  std::map<std::pair<int, std::string>, StepPoint> by;
  for (const StepPoint& p : pts) by[std::make_pair(p.rank, p.name)] = p;
  auto at = [&](int rank, const char* name) { return by[std::make_pair(rank, std::string(name))]; };
  EXPECT_TRUE(SameBits(at(0, "train_loss").value, loss));
  EXPECT_TRUE(SameBits(at(0, "lr").value, lr));
  EXPECT_TRUE(SameBits(at(0, "tokens_per_s").value, tps));
  EXPECT_TRUE(SameBits(at(3, "peak_rss_mb").value, tiny));
  EXPECT_EQ(at(3, "peak_rss_mb").step, 5);
  EXPECT_EQ(at(0, "val_loss").step, 10);
  EXPECT_TRUE(std::isnan(at(0, "val_loss").value));
  EXPECT_TRUE(r.Poll().empty());  // read once
  std::ifstream f(dir.File("metrics-0"));
  std::string first;
  std::getline(f, first);
  EXPECT_EQ(first.rfind("5 train_loss=", 0), 0u) << first;  // the documented form
}

TEST(TrainerMetricsReader, ReadsCompleteLinesOnlyInOrder) {
  testing::TempDir dir;
  const std::string file = dir.File("metrics-2");
  TrainerMetricsReader r(dir.path(), {});
  EXPECT_TRUE(r.Poll().empty());  // no file yet
  Append(file, "1 train_loss=4 lr=1\n2 train_lo");
  auto a = r.Poll();
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].rank, 2);
  EXPECT_EQ(a[0].step, 1);
  EXPECT_EQ(a[1].name, "lr");
  EXPECT_TRUE(r.Poll().empty());  // the half-written line waits
  Append(file, "ss=3.5\n3 train_loss=3\n");
  auto b = r.Poll();
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].step, 2);
  EXPECT_EQ(b[0].name, "train_loss");
  EXPECT_DOUBLE_EQ(b[0].value, 3.5);
  EXPECT_EQ(b[1].step, 3);
  // Other names in the folder are not metrics files.
  dir.Write("rank-2", "3 0.5 1.5\n");
  dir.Write("metrics-x", "1 a=1\n");
  dir.Write("metrics-", "1 a=1\n");
  EXPECT_TRUE(r.Poll().empty());
}

TEST(TrainerMetricsReader, AUserRegexOfTheSameNameReplacesTheTrainersValues) {
  testing::TempDir dir;
  dir.Write("metrics-0", "1 train_loss=4 lr=0.5 mfu=30\n");
  TrainerMetricsReader r(dir.path(), {"train_loss", "accuracy"});
  auto p = r.Poll();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].name, "lr");
  EXPECT_EQ(p[1].name, "mfu");
}

TEST(TrainerMetricsReader, AReplacedFileIsReadFromItsStartAndAnOverlongLineIsDropped) {
  testing::TempDir dir;
  const std::string file = dir.File("metrics-0");
  TrainerMetricsReader r(dir.path(), {});
  dir.Write("metrics-0", "1 a=1\n2 a=2\n");
  ASSERT_EQ(r.Poll().size(), 2u);
  dir.Write("metrics-0", "1 b=9\n");  // shorter: a new file (a restarted rank's)
  auto p = r.Poll();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].name, "b");
  // A line of more than 64 KiB, written in two pieces, is dropped up to its newline; the next is read.
  Append(file, "2 c=" + std::string(70 << 10, '1'));
  EXPECT_TRUE(r.Poll().empty());
  Append(file, std::string(1000, '1') + "\n3 d=4\n");
  p = r.Poll();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].name, "d");
  EXPECT_EQ(p[0].step, 3);
}

TEST(MetricPointWire, CarriesTheStepAndDefaultsToNone) {
  MetricPoint p;
  p.name = "train_loss";
  p.rank = 0;
  p.value = 2.5;
  p.step = 40;
  const nlohmann::json j = ToJson(p);
  EXPECT_EQ(j.at("step"), 40);
  EXPECT_EQ(MetricPointFromJson(j)->step, 40);
  EXPECT_EQ(ToJson(MetricPoint{}).at("step"), -1);  // every GET answer has the field
  EXPECT_EQ(MetricPointFromJson({{"name", "x"}, {"value", 1}})->step, -1);  // an older agent's point
}

TEST(JobStore, MetricPointsKeepTheirStep) {
  testing::TempDir dir;
  auto s = JobStore::Open(dir.File("anneal.db"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::vector<MetricPoint> pts(3);
  for (int i = 0; i < 3; ++i) {
    pts[i].seq = i + 1;
    pts[i].name = "train_loss";
    pts[i].rank = 0;
    pts[i].at = i;
    pts[i].value = 4 - i;
    pts[i].step = i == 2 ? -1 : 10 * (i + 1);
  }
  ASSERT_TRUE((*s)->AppendMetrics("j", pts).ok());
  auto got = (*s)->Metrics("j", "train_loss", 0, 100);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 3u);
  EXPECT_EQ((*got)[0].step, 10);
  EXPECT_EQ((*got)[1].step, 20);
  EXPECT_EQ((*got)[2].step, -1);
  pts = {pts[1]};
  pts[0].seq = 9;
  pts[0].at = 10;
  ASSERT_TRUE((*s)->AppendMetrics("j", pts).ok());
  auto latest = (*s)->LatestMetrics("j");
  ASSERT_TRUE(latest.ok() && latest->size() == 1u);
  EXPECT_EQ((*latest)[0].step, 20);
}

// A store of schema 6 (metrics without a step) gains the column; its points read as step -1.
TEST(JobStore, AVersion6StoreGainsTheMetricStep) {
  testing::TempDir dir;
  const std::string db = dir.File("anneal.db");
  { ASSERT_TRUE(JobStore::Open(db).ok()); }
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw,
                         "ALTER TABLE metrics DROP COLUMN step; ALTER TABLE node_reports DROP COLUMN sandbox;"
                         "INSERT INTO metrics(job_id, attempt, node, seq, name, rank, at, value) "
                         "VALUES('old', 0, 0, 1, 'train_loss', 0, 1.0, 3.0);"
                         "DROP TABLE meetings; CREATE TABLE rendezvous(job_id TEXT, attempt INTEGER, value TEXT); "
                         "ALTER TABLE transitions DROP COLUMN stop_cause; PRAGMA user_version = 6;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  auto s = JobStore::Open(db);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto old = (*s)->Metrics("old", "", 0, 10);
  ASSERT_TRUE(old.ok() && old->size() == 1u);
  EXPECT_EQ((*old)[0].step, -1);
  EXPECT_DOUBLE_EQ((*old)[0].value, 3.0);
  MetricPoint p;
  p.seq = 2;
  p.name = "train_loss";
  p.rank = 0;
  p.step = 7;
  ASSERT_TRUE((*s)->AppendMetrics("old", {p}).ok());
  EXPECT_EQ((*(*s)->Metrics("old", "", 0, 10))[1].step, 7);
}

}  // namespace
}  // namespace anneal
