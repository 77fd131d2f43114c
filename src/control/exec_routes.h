// The routes of `anneal exec` (control/exec_sessions.h, docs/exec.md):
//   POST /v1/jobs/{id}/exec            a user starts a command on node N of the running job (its owner
//                                      or an admin; others 403), recorded in the job ("execs" in describe);
//   GET  /v1/exec/{sid}/output         the user reads the output (long poll) and, at the end, the exit code;
//   POST /v1/exec/{sid}/input          the user sends standard input (-i) and its end;
//   POST /v1/exec/{sid}/agent-output   the instance's agent sends output chunks and the exit code;
//   GET  /v1/exec/{sid}/agent-input    the agent reads the input (long poll).
// Agents learn of new sessions in their heartbeat answer ("execs").
#pragma once

#include <httplib.h>

#include <memory>

#include "control/server_context.h"

namespace anneal {

std::unique_ptr<RoutePart> AddExecRoutes(httplib::Server& h, ServerContext& c);

}  // namespace anneal
