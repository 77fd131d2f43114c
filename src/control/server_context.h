// ServerContext: what the parts of `anneal server` share (control/server.cc wires them): the
// options, the store, the backend, the scheduler loop, the agents' sessions, the execution roles.
// Owned by the server; the route files hold a reference for the server's life.
#pragma once

#include <string>

#include "provision/instance_provider.h"
#include "control/agent_sessions.h"
#include "control/connection_guard.h"
#include "control/exec_sessions.h"
#include "control/execution_roles.h"
#include "control/job_store.h"
#include "control/latest_points.h"
#include "control/request_stats.h"
#include "control/scheduler_loop.h"
#include "control/server_options.h"
#include "core/clock.h"

namespace anneal {

struct ServerContext {
  ServerOptions o;
  JobStore* store = nullptr;
  InstanceProvider* backend = nullptr;  // local, or StaticBackend for agents that joined by themselves
  SchedulerLoop* scheduler = nullptr;
  AgentSessions* agents = nullptr;
  RequestStats* requests = nullptr;  // the API's latencies (/metrics)
  LatestPoints* latest = nullptr;    // each active job's newest metric points (/metrics)
  ExecSessions* execs = nullptr;     // anneal exec's sessions
  const ConnectionGuard* guard = nullptr;  // the listener's connection limits (/metrics)
  ExecutionRoles roles;
  std::string url;         // where agents register
  double start_wall = 0;   // heartbeat deadlines count from here at the earliest
  Clock* clock = &Clock::Real();  // the routes' times (records' at, created_at, ages)
};

// A set of routes registered on the HTTP server (job_routes.h, agent_routes.h): it must outlive the
// serving of its routes.
class RoutePart {
 public:
  virtual ~RoutePart() = default;
};

}  // namespace anneal
