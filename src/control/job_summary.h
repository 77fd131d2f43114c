// JobSummaryJson: a job's summary as the API lists it (docs/api/openapi.yaml JobSummary).
#pragma once

#include <string>

#include "control/job_store.h"

namespace anneal {

// A job's summary (docs/api/openapi.yaml JobSummary) as JSON text, written directly: a listing of
// 100 jobs spent most of its time building and dumping nlohmann objects. pending_reason: null for
// none. Describe parses it and adds to it, so the shape is written here only.
std::string JobSummaryJson(const JobRecord& j, const std::string* pending_reason);

}  // namespace anneal
