#include "cli/job_text.h"

#include <cstdio>

#include "protocol/wire.h"

namespace anneal::cli {

using nlohmann::json;

std::string Clock(double wall) { return wall > 0 ? FormatTime(wall).substr(11, 8) : "-"; }

std::string Duration(double s) {
  if (s < 0) return "-";
  char b[32];
  if (s < 60) {
    std::snprintf(b, sizeof(b), "%.1fs", s);
  } else if (s < 3600) {
    std::snprintf(b, sizeof(b), "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  } else {
    std::snprintf(b, sizeof(b), "%dh%02dm", static_cast<int>(s) / 3600, (static_cast<int>(s) / 60) % 60);
  }
  return b;
}

std::string LinePrefix(const json& x) {
  const int rank = x.value("rank", -1);
  if (rank < 0) return "[agent node " + std::to_string(x.value("node", 0)) + "] ";
  return "[rank " + std::to_string(rank) + "] ";
}

}  // namespace anneal::cli
