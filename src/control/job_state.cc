#include "control/job_state.h"

#include <initializer_list>

namespace anneal {

namespace {

struct PhaseRow {
  JobPhase phase;
  const char* name;
  const char* primary;
};

constexpr PhaseRow kPhases[] = {
    {JobPhase::kPending, "Pending", "InProgress"},
    {JobPhase::kStarting, "Starting", "InProgress"},
    {JobPhase::kDownloading, "Downloading", "InProgress"},
    {JobPhase::kTraining, "Training", "InProgress"},
    {JobPhase::kUploading, "Uploading", "InProgress"},
    {JobPhase::kRestarting, "Restarting", "InProgress"},
    {JobPhase::kInterrupted, "Interrupted", "InProgress"},
    {JobPhase::kStopping, "Stopping", "Stopping"},
    {JobPhase::kCompleted, "Completed", "Completed"},
    {JobPhase::kFailed, "Failed", "Failed"},
    {JobPhase::kStopped, "Stopped", "Stopped"},
    {JobPhase::kMaxRuntimeExceeded, "MaxRuntimeExceeded", "Stopped"},
};

bool In(JobPhase p, std::initializer_list<JobPhase> set) {
  for (JobPhase q : set) {
    if (p == q) return true;
  }
  return false;
}

}  // namespace

const char* PhaseName(JobPhase p) { return kPhases[static_cast<int>(p)].name; }
const char* PrimaryStatus(JobPhase p) { return kPhases[static_cast<int>(p)].primary; }

Result<JobPhase> ParsePhase(const std::string& name) {
  for (const PhaseRow& r : kPhases) {
    if (name == r.name) return r.phase;
  }
  return InvalidInput("unknown job status '" + name + "'");
}

bool IsTerminal(JobPhase p) {
  return In(p, {JobPhase::kCompleted, JobPhase::kFailed, JobPhase::kStopped, JobPhase::kMaxRuntimeExceeded});
}

bool CanTransition(JobPhase from, JobPhase to) {
  using P = JobPhase;
  switch (from) {
    case P::kPending: return In(to, {P::kStarting, P::kStopped, P::kFailed});
    // Starting -> Starting: an instance that failed its health check was replaced.
    case P::kStarting: return In(to, {P::kStarting, P::kDownloading, P::kRestarting, P::kInterrupted, P::kStopping, P::kFailed});
    case P::kDownloading: return In(to, {P::kTraining, P::kRestarting, P::kInterrupted, P::kStopping, P::kFailed});
    case P::kTraining:
      return In(to, {P::kUploading, P::kCompleted, P::kRestarting, P::kInterrupted, P::kStopping, P::kFailed});
    case P::kUploading: return In(to, {P::kCompleted, P::kRestarting, P::kInterrupted, P::kStopping, P::kFailed});
    case P::kRestarting: return In(to, {P::kStarting, P::kStopping, P::kFailed});
    case P::kInterrupted: return In(to, {P::kRestarting, P::kFailed});
    case P::kStopping: return In(to, {P::kStopped, P::kMaxRuntimeExceeded, P::kCompleted, P::kFailed, P::kInterrupted});
    default: return false;  // terminal
  }
}

Status CheckTransition(JobPhase from, JobPhase to) {
  if (CanTransition(from, to)) return Status::Ok();
  return Internal(std::string("job status cannot move from ") + PhaseName(from) + " to " + PhaseName(to));
}

}  // namespace anneal
