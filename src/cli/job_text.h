// How the job commands print what the API answers: clock times, durations, log-line prefixes, and
// the text of describe, jobs, logs and metrics. Whatever a reply holds (a field missing, null or of
// another type; an older or a hostile server), these print what they can and never throw: a field
// they cannot use prints as its default (tests/fuzz/cli_replies_fuzz.cc feeds them any JSON).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace anneal::cli {

// HH:MM:SS of a wall time (UTC), "-" for none.
std::string Clock(double wall);
// 12.3s, 4m05s, 2h03m; "-" for a negative one.
std::string Duration(double s);
// "[rank R] " or, for an agent's own line (rank -1), "[agent node N] ".
std::string LinePrefix(const nlohmann::json& line);

// j[key] when j is an object holding key with a value of that kind, else def (an integer field
// takes a whole number in range; a double any number).
std::string Field(const nlohmann::json& j, const char* key, const std::string& def);
std::string Field(const nlohmann::json& j, const char* key, const char* def);
double Field(const nlohmann::json& j, const char* key, double def);
int Field(const nlohmann::json& j, const char* key, int def);
int64_t Field(const nlohmann::json& j, const char* key, int64_t def);
bool Field(const nlohmann::json& j, const char* key, bool def);
// j[key] when it is an array, else an empty one; Member: when it is an object, else an empty one.
const nlohmann::json& Items(const nlohmann::json& j, const char* key);
const nlohmann::json& Member(const nlohmann::json& j, const char* key);

// `anneal describe`'s text of GET /v1/jobs/{id}.
std::string DescribeText(const nlohmann::json& job);
// `anneal jobs`'s table of GET /v1/jobs (now: the wall time a running job's duration counts to).
std::string JobsText(const nlohmann::json& reply, double now);
// `anneal logs`'s lines of one page of GET /v1/jobs/{id}/logs.
std::string LogLinesText(const nlohmann::json& page);
// `anneal metrics`'s table of points (last, mean, min, max and count per name and rank).
std::string MetricsText(const nlohmann::json& points);

}  // namespace anneal::cli
