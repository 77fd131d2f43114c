// The agent routes of `anneal server`: POST /v1/agents (registration with the join token), the
// heartbeat, and the agent-side job routes (logs, metrics, reports, health, rendezvous), as
// docs/api/openapi.yaml describes them.
#pragma once

#include <httplib.h>

#include <memory>

#include "control/server_context.h"

namespace anneal {

// Registers them on h; the returned part serves them and must outlive the serving.
std::unique_ptr<RoutePart> AddAgentRoutes(httplib::Server& h, ServerContext& c);

}  // namespace anneal
