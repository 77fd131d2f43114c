#include "protocol/wire.h"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <chrono>
#include <string_view>
#include <ctime>

#include "core/json_fields.h"
#include "core/utf8.h"

namespace anneal {

nlohmann::json ToJson(const LogLine& x) {
  return {{"id", x.id}, {"attempt", x.attempt}, {"node", x.node}, {"seq", x.seq}, {"rank", x.rank},
          {"stream", x.stream}, {"at", x.at}, {"text", x.text}};
}

Result<LogLine> LogLineFromJson(const nlohmann::json& j) {
  LogLine x;
  JsonFields f(j, "a log line");
  f.Get("id", &x.id).Get("attempt", &x.attempt).Get("node", &x.node).Get("seq", &x.seq).Get("rank", &x.rank);
  f.Get("stream", &x.stream).Get("at", &x.at).Get("text", &x.text);
  ANNEAL_RETURN_IF_ERROR(f.status());
  return x;
}

nlohmann::json ToJson(const MetricPoint& p) {
  return {{"id", p.id}, {"attempt", p.attempt}, {"node", p.node}, {"seq", p.seq}, {"name", p.name},
          {"rank", p.rank}, {"at", p.at}, {"value", p.value}, {"step", p.step}};
}

Result<MetricPoint> MetricPointFromJson(const nlohmann::json& j) {
  MetricPoint p;
  JsonFields f(j, "a metric point");
  f.Get("id", &p.id).Get("attempt", &p.attempt).Get("node", &p.node).Get("seq", &p.seq).Get("name", &p.name);
  f.Get("rank", &p.rank).Get("at", &p.at).Get("value", &p.value).Get("step", &p.step);
  ANNEAL_RETURN_IF_ERROR(f.status());
  return p;
}

const char* NodeStateName(NodeState s) {
  switch (s) {
    case NodeState::kDownloading: return "downloading";
    case NodeState::kTraining: return "training";
    case NodeState::kUploading: return "uploading";
    case NodeState::kFinished: return "finished";
  }
  return "downloading";
}

std::optional<NodeState> ParseNodeState(const std::string& name) {
  for (NodeState s : {NodeState::kDownloading, NodeState::kTraining, NodeState::kUploading, NodeState::kFinished}) {
    if (name == NodeStateName(s)) return s;
  }
  return std::nullopt;
}

nlohmann::json ToJson(const NodeReport& r) {
  nlohmann::json j = {{"attempt", r.attempt}, {"node", r.node}, {"state", NodeStateName(r.state)}, {"exit_code", r.exit_code},
                      {"message", r.message}, {"at", r.at}};
  if (!r.sandbox.empty()) j["sandbox"] = r.sandbox;
  if (r.state == NodeState::kFinished) {
    j["cause"] = r.cause;
    j["local"] = r.local;
    j["failed_rank"] = r.failed_rank;
  }
  return j;
}

Result<NodeReport> NodeReportFromJson(const nlohmann::json& j) {
  NodeReport r;
  std::string state;
  JsonFields f(j, "the node report");
  f.Get("attempt", &r.attempt).Get("node", &r.node).Get("state", &state).Get("exit_code", &r.exit_code);
  f.Get("message", &r.message).Get("at", &r.at).Get("cause", &r.cause).Get("local", &r.local);
  f.Get("failed_rank", &r.failed_rank).Get("sandbox", &r.sandbox);
  ANNEAL_RETURN_IF_ERROR(f.status());
  const std::optional<NodeState> s = ParseNodeState(state);
  if (!s) {
    return InvalidInput("state: must be downloading, training, uploading or finished, got \"" +
                        ReplaceInvalidUtf8(state.substr(0, 40)) + "\"");
  }
  r.state = *s;
  return r;
}

nlohmann::json ToJson(const HeartbeatMsg& m) {
  nlohmann::json j = nlohmann::json::object();
  if (!m.job.empty()) j = {{"job", m.job}, {"attempt", m.attempt}};
  if (m.health.is_object() && !m.health.empty()) j["health"] = m.health;
  return j;
}

Result<HeartbeatMsg> HeartbeatMsgFromJson(const nlohmann::json& j) {
  HeartbeatMsg m;
  JsonFields f(j, "the heartbeat");
  f.Get("job", &m.job).Get("attempt", &m.attempt).GetObject("health", &m.health);
  ANNEAL_RETURN_IF_ERROR(f.status());
  return m;
}

std::string MeetingKey::Path(const std::string& job) const {
  return "/v1/jobs/" + job + "/rendezvous/" + std::to_string(attempt) + "/" + std::to_string(round);
}

nlohmann::json ToJson(const Assignment& a) {
  nlohmann::json j = {{"job", a.job},           {"attempt", a.attempt},     {"node", a.node},
                      {"nnodes", a.addresses.size()}, {"addresses", a.addresses}, {"spec", a.spec.ToJson()},
                      {"meeting_round", a.meeting_round}};
  if (!a.credentials.empty()) j["credentials"] = a.credentials;
  return j;
}

Result<Assignment> AssignmentFromJson(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("job") || !j["job"].is_string() || !j.contains("spec")) {
    return InvalidInput("the server's assignment has no job or spec: " +
                        j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).substr(0, 200));
  }
  Assignment a;
  JsonFields f(j, "the server's assignment");
  f.Get("job", &a.job).Get("attempt", &a.attempt).Get("node", &a.node).Get("addresses", &a.addresses);
  f.Get("credentials", &a.credentials).Get("meeting_round", &a.meeting_round);
  ANNEAL_RETURN_IF_ERROR(f.status());
  std::string field;
  auto spec = JobSpecFromJson(j["spec"], &field);
  if (!spec.ok()) return spec.status().Annotate("the assignment of " + a.job);
  a.spec = std::move(*spec);
  return a;
}

namespace {
constexpr std::pair<HeartbeatAction, const char*> kActions[] = {{HeartbeatAction::kNone, "none"},
                                                                {HeartbeatAction::kRun, "run"},
                                                                {HeartbeatAction::kHealth, "health"},
                                                                {HeartbeatAction::kStop, "stop"},
                                                                {HeartbeatAction::kExit, "exit"}};
}  // namespace

const char* HeartbeatActionName(HeartbeatAction a) {
  for (const auto& [x, name] : kActions) {
    if (x == a) return name;
  }
  return "none";
}

nlohmann::json ToJson(const HeartbeatReply& r) {
  nlohmann::json j = {{"action", HeartbeatActionName(r.action)}};
  if (r.next_s >= 0) j["next_s"] = r.next_s;
  if (r.action == HeartbeatAction::kRun) j["assignment"] = ToJson(r.assignment);
  if (r.action == HeartbeatAction::kHealth) j["health"] = r.health;
  if (!r.execs.empty()) j["execs"] = r.execs;
  return j;
}

Result<HeartbeatReply> HeartbeatReplyFromJson(const nlohmann::json& j) {
  HeartbeatReply r;
  std::string name = "none";
  nlohmann::json assignment;
  JsonFields f(j, "the server's heartbeat answer");
  f.Get("action", &name).Get("next_s", &r.next_s).GetObject("assignment", &assignment);
  f.GetObject("health", &r.health).GetArray("execs", &r.execs);
  ANNEAL_RETURN_IF_ERROR(f.status());
  bool known = false;
  for (const auto& [x, n] : kActions) {
    if (name == n) r.action = x, known = true;
  }
  if (!known) {
    return InvalidInput("action: '" + ReplaceInvalidUtf8(name.substr(0, 40)) +
                        "' is not an action this agent knows (none, run, health, stop, exit)");
  }
  if (r.action == HeartbeatAction::kRun) {
    ANNEAL_ASSIGN_OR_RETURN(r.assignment, AssignmentFromJson(assignment));
  }
  if (r.action != HeartbeatAction::kHealth) r.health = nlohmann::json();  // only a health action carries one
  else if (r.health.is_null()) r.health = nlohmann::json::object();
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

namespace {

// Days from 1970-01-01 to y-m-d (proleptic Gregorian; Howard Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

}  // namespace

Result<double> ParseSince(const std::string& text, double now) {
  const std::string forms = "--since '" + text + "': give a duration before now (90s, 10m, 2h, 1d, 1h30m) or an ISO 8601 "
                            "time (2026-11-30T07:12:03Z, 2026-11-30 07:12, 2026-11-30T09:12:03+02:00; no offset is UTC)";
  // A duration: one or more <number><unit>.
  {
    size_t i = 0;
    double total = 0;
    bool any = false;
    while (i < text.size()) {
      size_t j = i;
      while (j < text.size() && (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.')) ++j;
      if (j == i || j >= text.size()) break;
      const double n = std::strtod(text.substr(i, j - i).c_str(), nullptr);
      const char u = text[j];
      const double mult = u == 's' ? 1 : u == 'm' ? 60 : u == 'h' ? 3600 : u == 'd' ? 86400 : -1;
      if (mult < 0) break;
      total += n * mult;
      i = j + 1;
      any = i == text.size();
    }
    if (any) return now - total;
  }
  // An ISO 8601 time.
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, n = 0;
  double sec = 0;
  const char* p = text.c_str();
  if (std::sscanf(p, "%4d-%2d-%2d%n", &y, &mo, &d, &n) != 3 || n != 10) return InvalidInput(forms);
  p += n;
  if (*p == 'T' || *p == 't' || *p == ' ') {
    ++p;
    if (std::sscanf(p, "%2d:%2d%n", &h, &mi, &n) != 2 || n != 5) return InvalidInput(forms);
    p += n;
    if (*p == ':') {
      char* end = nullptr;
      sec = std::strtod(p + 1, &end);
      if (end == p + 1 || !(sec >= 0 && sec < 61)) return InvalidInput(forms);
      p = end;
    }
  }
  double offset = 0;
  if (*p == 'Z' || *p == 'z') {
    ++p;
  } else if (*p == '+' || *p == '-') {
    int oh = 0, om = 0;
    if (std::sscanf(p + 1, "%2d:%2d%n", &oh, &om, &n) != 2 || n != 5) return InvalidInput(forms);
    offset = (*p == '-' ? -1 : 1) * (oh * 3600.0 + om * 60.0);
    p += 1 + n;
  }
  if (*p != '\0' || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59) return InvalidInput(forms);
  return static_cast<double>(DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d))) * 86400.0 + h * 3600.0 +
         mi * 60.0 + sec - offset;
}

}  // namespace anneal
