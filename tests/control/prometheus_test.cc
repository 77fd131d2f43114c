// The exposition writer and the request statistics behind GET /metrics (control/prometheus_text.h,
// control/request_stats.h); tests/peers/prometheus_test.sh scrapes the real thing with Prometheus.
#include "control/prometheus_text.h"

#include <gtest/gtest.h>

#include <cmath>

#include "control/latest_points.h"
#include "control/request_stats.h"

namespace anneal {
namespace {

TEST(PromText, EscapesLabelValuesAndNamesFamilies) {
  PromText t;
  t.Family("anneal_x", "gauge", "two\nlines");
  t.Sample("anneal_x", {{"anneal_job", "a\"b\\c\nd"}, {"bad-name", "v"}}, 1.5);
  t.Sample("anneal_x", {}, std::nan(""));
  t.Sample("anneal_x", {}, -INFINITY);
  t.Sample("anneal_x", {}, 0.1);
  EXPECT_EQ(t.text(),
            "# HELP anneal_x two lines\n# TYPE anneal_x gauge\n"
            "anneal_x{anneal_job=\"a\\\"b\\\\c\\nd\",bad_name=\"v\"} 1.5\n"
            "anneal_x NaN\nanneal_x -Inf\nanneal_x 0.1\n");
  EXPECT_EQ(PromName("loss/val 2"), "loss_val_2");
  EXPECT_EQ(PromName("2x"), "_x");
}

TEST(PromText, HistogramBucketsAreCumulative) {
  PromHistogram h({0.1, 1});
  for (double v : {0.05, 0.1, 0.5, 3.0}) h.Observe(v);
  PromText t;
  h.Write(&t, "lat", {{"route", "/v1/jobs"}});
  EXPECT_EQ(t.text(),
            "lat_bucket{route=\"/v1/jobs\",le=\"0.1\"} 2\n"
            "lat_bucket{route=\"/v1/jobs\",le=\"1\"} 3\n"
            "lat_bucket{route=\"/v1/jobs\",le=\"+Inf\"} 4\n"
            "lat_sum{route=\"/v1/jobs\"} 3.65\n"
            "lat_count{route=\"/v1/jobs\"} 4\n");
}

TEST(RequestStats, RoutesKeepTheirShapeNotTheirIds) {
  EXPECT_EQ(RouteLabel("/v1/jobs"), "/v1/jobs");
  EXPECT_EQ(RouteLabel("/v1/jobs/kjv-tiny-0007/logs?after=3"), "/v1/jobs/{id}/logs");
  EXPECT_EQ(RouteLabel("/v1/users/alice"), "/v1/users/{id}");
  EXPECT_EQ(RouteLabel("/v1/agents/kjv-0001-a0-n1/heartbeat"), "/v1/agents/{id}/heartbeat");
  EXPECT_EQ(RouteLabel("/metrics"), "/metrics");
  EXPECT_EQ(RouteLabel("/etc/passwd"), "other");
  RequestStats s;
  s.Observe("GET", "/v1/jobs/a-0001", 200, 0.002);
  s.Observe("GET", "/v1/jobs/b-0002", 404, 0.004);
  PromText t;
  s.Write(&t);
  EXPECT_NE(t.text().find("anneal_http_request_duration_seconds_count{method=\"GET\",route=\"/v1/jobs/{id}\"} 2\n"),
            std::string::npos) << t.text();
  EXPECT_NE(t.text().find("anneal_http_requests_total{method=\"GET\",route=\"/v1/jobs/{id}\",code=\"404\"} 1\n"),
            std::string::npos) << t.text();
}

TEST(LatestPoints, KeepsEachSeriesNewestAndForgetsEndedJobs) {
  auto point = [](const std::string& name, int rank, double at, double v) {
    MetricPoint p;
    p.name = name;
    p.rank = rank;
    p.at = at;
    p.value = v;
    return p;
  };
  LatestPoints l;
  EXPECT_FALSE(l.Of("a"));  // never seen: /metrics reads the store once
  l.Note("a", {point("train_loss", 0, 1, 3.0), point("train_loss", 1, 1, 3.1), point("train_loss", 0, 2, 2.9)});
  l.Note("a", {point("train_loss", 0, 1.5, 9.9)});  // a retried, older batch
  l.Note("b", {point("step_time_s", 0, 1, 0.2)});
  auto a = l.Of("a");
  ASSERT_TRUE(a);
  ASSERT_EQ(a->size(), 2u);
  EXPECT_EQ((*a)[0].value, 2.9);
  EXPECT_EQ((*a)[1].value, 3.1);
  l.KeepOnly({"b"});
  EXPECT_FALSE(l.Of("a"));
  EXPECT_TRUE(l.Of("b"));
}

}  // namespace
}  // namespace anneal
