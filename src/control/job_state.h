// JobStateMachine: a job's statuses and the transitions between them (DESIGN.md "Statuses").
//
// The secondary status is the state; the primary one follows from it:
//   InProgress  Pending, Starting, Downloading, Training, Uploading, Restarting, Interrupted
//   Stopping    Stopping
//   Completed   Completed            (terminal)
//   Failed      Failed               (terminal)
//   Stopped     Stopped, MaxRuntimeExceeded (terminal)
// Allowed moves (anything else is a bug in the caller, reported as Internal):
//   Pending     -> Starting | Stopped | Failed
//   Starting    -> Starting (an unhealthy instance replaced) | Downloading | Restarting | Interrupted | Stopping | Failed
//   Downloading -> Training | Restarting | Interrupted | Stopping | Failed
//   Training    -> Uploading | Completed | Restarting | Interrupted | Stopping | Failed
//   Uploading   -> Completed | Restarting | Interrupted | Stopping | Failed
//   Restarting  -> Starting | Stopping | Failed
//   Interrupted -> Restarting | Failed
//   Stopping    -> Stopped | MaxRuntimeExceeded | Completed | Failed | Interrupted (a requeue: anneal stop --requeue)
#pragma once

#include <string>

#include "core/status.h"

namespace anneal {

enum class JobPhase {
  kPending,
  kStarting,
  kDownloading,
  kTraining,
  kUploading,
  kRestarting,
  kInterrupted,
  kStopping,
  kCompleted,
  kFailed,
  kStopped,
  kMaxRuntimeExceeded,
};

const char* PhaseName(JobPhase p);                 // the secondary status, "Training"
const char* PrimaryStatus(JobPhase p);             // "InProgress"
Result<JobPhase> ParsePhase(const std::string& name);
bool IsTerminal(JobPhase p);
bool CanTransition(JobPhase from, JobPhase to);
// Ok, or Internal naming both statuses when the move is not allowed.
Status CheckTransition(JobPhase from, JobPhase to);

}  // namespace anneal
