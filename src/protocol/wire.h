// The JSON shapes of records that cross the API (docs/api/openapi.yaml, components/schemas): log
// lines, metric points, node reports and the agent protocol's messages, shared by the server and
// the agents: each shape's JSON is written and read here only.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "protocol/job_definition.h"
#include "protocol/records.h"

namespace anneal {

nlohmann::json ToJson(const LogLine& x);
Result<LogLine> LogLineFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const MetricPoint& p);
Result<MetricPoint> MetricPointFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const NodeReport& r);
// A state other than NodeState's names is InvalidInput naming the field.
Result<NodeReport> NodeReportFromJson(const nlohmann::json& j);
// The agent protocol (docs/api/openapi.yaml: HeartbeatRequest, HeartbeatResponse, Assignment).
// What an agent runs, sent with every heartbeat: a job attempt ("" = none) and the health check in
// progress ({"job", "attempt", "round"}, empty = none), so the server does not ask again.
struct HeartbeatMsg {
  std::string job;
  int attempt = -1;
  nlohmann::json health = nlohmann::json::object();
};
// A job attempt handed to one instance: its node among the job's instances (their addresses, by
// node), the job's spec, the execution role's storage credentials (none: empty), and the health
// round whose meeting its start reuses (MeetingKey).
struct Assignment {
  std::string job;
  int attempt = 0, node = 0;
  std::vector<std::string> addresses;
  JobSpec spec;
  std::map<std::string, std::string> credentials;
  int meeting_round = 0;
};

// Where a multi-instance job attempt's instances meet at the server
// (/v1/jobs/<job>/rendezvous/<attempt>/<round>): the attempt's pre-start health round `round` meets
// there for its collective, and once that round passed, the attempt's start meets there again (its
// value is already there: node 0's address and ports, which the collective's launcher has released).
// Without health checks, round 0. One meeting per (attempt, round): a round that replaced an
// instance (node 0, perhaps) meets afresh.
struct MeetingKey {
  int attempt = 0;
  int round = 0;
  // "/v1/jobs/<job>/rendezvous/<attempt>/<round>"
  std::string Path(const std::string& job) const;
};
// The heartbeat's answer: none, run (the assignment), health (the check to run: health_rounds.h),
// stop (what runs), exit (the instance was released). next_s >= 0: heartbeat again that soon.
enum class HeartbeatAction { kNone, kRun, kHealth, kStop, kExit };
// Its name on the wire: "none", "run", "health", "stop", "exit".
const char* HeartbeatActionName(HeartbeatAction a);
struct HeartbeatReply {
  HeartbeatAction action = HeartbeatAction::kNone;
  double next_s = -1;
  Assignment assignment;  // action run
  nlohmann::json health;  // action health
  nlohmann::json execs = nlohmann::json::array();  // anneal exec sessions for this instance (control/exec_sessions.h)
};
nlohmann::json ToJson(const HeartbeatMsg& m);
// Every reader of the wire: a field of another type is InvalidInput naming it (core/json_fields.h).
Result<HeartbeatMsg> HeartbeatMsgFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const Assignment& a);
// The spec is validated as a submit's is (InvalidInput naming the field).
Result<Assignment> AssignmentFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const HeartbeatReply& r);
// An action this agent does not know is InvalidInput naming it.
Result<HeartbeatReply> HeartbeatReplyFromJson(const nlohmann::json& j);

// "2026-11-30T07:12:03.120Z"
std::string FormatTime(double wall_s);
// A point in time as `anneal logs --since` takes it, in wall seconds: a duration before now ("90s",
// "10m", "2h", "1d", "1h30m") or an ISO 8601 time ("2026-11-30T07:12:03Z", with an optional fraction
// and a +HH:MM / -HH:MM offset; no offset is UTC, as anneal prints times; a date alone is its midnight).
// Bad input names the forms it takes.
Result<double> ParseSince(const std::string& text, double now);

}  // namespace anneal
