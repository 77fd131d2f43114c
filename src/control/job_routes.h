// The job routes of `anneal server`: /v1/health, /v1/packages, /v1/jobs (submit, list, describe,
// stop, logs, metrics), as docs/api/openapi.yaml describes them.
#pragma once

#include <httplib.h>

#include <memory>

#include "control/server_context.h"

namespace anneal {

// Registers them on h; the returned part serves them and must outlive the serving.
std::unique_ptr<RoutePart> AddJobRoutes(httplib::Server& h, ServerContext& c);

}  // namespace anneal
