// How the job commands print what the API answers: clock times, durations, log-line prefixes.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace anneal::cli {

// HH:MM:SS of a wall time (UTC), "-" for none.
std::string Clock(double wall);
// 12.3s, 4m05s, 2h03m; "-" for a negative one.
std::string Duration(double s);
// "[rank R] " or, for an agent's own line (rank -1), "[agent node N] ".
std::string LinePrefix(const nlohmann::json& line);

}  // namespace anneal::cli
