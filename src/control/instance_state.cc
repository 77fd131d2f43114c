#include "control/instance_state.h"

namespace anneal {

namespace {
using S = InstanceState;
constexpr S kAll[] = {S::kRequested, S::kIdle, S::kAssigned, S::kAvailable, S::kUnhealthy, S::kReleased};
}  // namespace

const char* InstanceStateName(InstanceState s) {
  switch (s) {
    case S::kRequested: return "requested";
    case S::kIdle: return "idle";
    case S::kAssigned: return "assigned";
    case S::kAvailable: return "available";
    case S::kUnhealthy: return "unhealthy";
    case S::kReleased: return "released";
  }
  return "?";
}

Result<InstanceState> ParseInstanceState(const std::string& name) {
  for (S s : kAll) {
    if (name == InstanceStateName(s)) return s;
  }
  return InvalidInput("unknown instance state '" + name + "' in the job store (requested, idle, assigned, available, "
                      "unhealthy or released)");
}

bool CanMoveInstance(InstanceState from, InstanceState to) {
  if (from == to) return true;
  switch (from) {
    case S::kRequested: return to == S::kIdle || to == S::kAssigned || to == S::kReleased;
    case S::kIdle: return to == S::kAssigned || to == S::kUnhealthy || to == S::kReleased;
    case S::kAssigned: return to == S::kIdle || to == S::kAvailable || to == S::kUnhealthy || to == S::kReleased;
    case S::kAvailable: return to == S::kAssigned || to == S::kReleased;
    case S::kUnhealthy: return to == S::kIdle || to == S::kReleased;
    case S::kReleased: return false;
  }
  return false;
}

bool IsInitialInstanceState(InstanceState s) { return s == S::kRequested || s == S::kIdle; }

}  // namespace anneal
