// InstanceState: where an instance of the control plane stands (InstanceRecord::state), and the moves
// the server makes between states, checked by JobStore::PutInstance as job_state.h's are by
// Transition. Stored and shown (describe's instances[].state) by name.
//   requested   the backend was asked for it; its agent has not registered yet
//   idle        a joined agent with no job
//   assigned    holds a job (node `node` of it)
//   available   a warm pool: its job ended, kept for a matching job until keep_until
//   unhealthy   failed a pre-start health check; out of the pool until its agent joins again
//   released    told to exit (local) or gone; forgotten once its agent is quiet
// Allowed moves (staying put is always allowed; anything else is a bug in the caller, Internal):
//   (new)       -> requested | idle
//   requested   -> idle | assigned | released
//   idle        -> assigned | unhealthy | released (unhealthy: released from its failed job first)
//   assigned    -> idle | available | unhealthy | released
//   available   -> assigned | released
//   unhealthy   -> idle | released
//   released    -> (none)
#pragma once

#include <string>

#include "core/status.h"

namespace anneal {

enum class InstanceState { kRequested, kIdle, kAssigned, kAvailable, kUnhealthy, kReleased };

const char* InstanceStateName(InstanceState s);  // "assigned"
Result<InstanceState> ParseInstanceState(const std::string& name);
bool CanMoveInstance(InstanceState from, InstanceState to);
// The state a new instance record may start in.
bool IsInitialInstanceState(InstanceState s);

}  // namespace anneal
