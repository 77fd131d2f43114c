#include "control/wire.h"

#include <chrono>
#include <ctime>

namespace anneal {

nlohmann::json ToJson(const LogLine& x) {
  return {{"id", x.id}, {"attempt", x.attempt}, {"node", x.node}, {"seq", x.seq}, {"rank", x.rank},
          {"stream", x.stream}, {"at", x.at}, {"text", x.text}};
}

LogLine LogLineFromJson(const nlohmann::json& j) {
  LogLine x;
  x.id = j.value("id", int64_t{0});
  x.attempt = j.value("attempt", 0);
  x.node = j.value("node", 0);
  x.seq = j.value("seq", int64_t{0});
  x.rank = j.value("rank", -1);
  x.stream = j.value("stream", std::string("stdout"));
  x.at = j.value("at", 0.0);
  x.text = j.value("text", std::string());
  return x;
}

nlohmann::json ToJson(const MetricPoint& p) {
  return {{"id", p.id}, {"attempt", p.attempt}, {"node", p.node}, {"seq", p.seq}, {"name", p.name},
          {"rank", p.rank}, {"at", p.at}, {"value", p.value}};
}

MetricPoint MetricPointFromJson(const nlohmann::json& j) {
  MetricPoint p;
  p.id = j.value("id", int64_t{0});
  p.attempt = j.value("attempt", 0);
  p.node = j.value("node", 0);
  p.seq = j.value("seq", int64_t{0});
  p.name = j.value("name", std::string());
  p.rank = j.value("rank", -1);
  p.at = j.value("at", 0.0);
  p.value = j.value("value", 0.0);
  return p;
}

nlohmann::json ToJson(const NodeReport& r) {
  nlohmann::json j = {{"attempt", r.attempt}, {"node", r.node}, {"state", r.state}, {"exit_code", r.exit_code},
                      {"message", r.message}, {"at", r.at}};
  if (r.state == "finished") {
    j["cause"] = r.cause;
    j["local"] = r.local;
    j["failed_rank"] = r.failed_rank;
  }
  return j;
}

NodeReport NodeReportFromJson(const nlohmann::json& j) {
  NodeReport r;
  r.attempt = j.value("attempt", 0);
  r.node = j.value("node", 0);
  r.state = j.value("state", std::string());
  r.exit_code = j.value("exit_code", -1);
  r.message = j.value("message", std::string());
  r.at = j.value("at", 0.0);
  r.cause = j.value("cause", std::string());
  r.local = j.value("local", false);
  r.failed_rank = j.value("failed_rank", -1);
  return r;
}

std::string FormatTime(double wall_s) {
  const time_t t = static_cast<time_t>(wall_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  const int ms = static_cast<int>((wall_s - static_cast<double>(t)) * 1000);
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

}  // namespace anneal
