// The JSON shapes of records that cross the API (docs/api/openapi.yaml, components/schemas): log
// lines, metric points and node reports, shared by the server and the agents.
#pragma once

#include <nlohmann/json.hpp>

#include "core/clock.h"

#include "control/job_store.h"

namespace anneal {

nlohmann::json ToJson(const LogLine& x);
LogLine LogLineFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const MetricPoint& p);
MetricPoint MetricPointFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const NodeReport& r);
NodeReport NodeReportFromJson(const nlohmann::json& j);
// "2026-11-30T07:12:03.120Z"
std::string FormatTime(double wall_s);

}  // namespace anneal
