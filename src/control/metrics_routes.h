// GET /metrics: the server in Prometheus's text format (docs/observability.md lists every metric):
// jobs by status, the queue, the scheduler's pass time, API latency by route, instances by state,
// agents' heartbeat age, and each active job's newest training and system metrics as
// anneal_job_metric{anneal_job, node, rank, name} (anneal_job: Prometheus keeps `job` for its own
// scrape job). Needs an admin's or a viewer's token (it shows every job).
#pragma once

#include <httplib.h>

#include <memory>

#include "control/server_context.h"

namespace anneal {

std::unique_ptr<RoutePart> AddMetricsRoutes(httplib::Server& h, ServerContext& c);

}  // namespace anneal
