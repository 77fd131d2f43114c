// The users and tokens API (docs/api/openapi.yaml, docs/security.md):
//   GET /v1/users, POST /v1/users, PUT/DELETE /v1/users/NAME      admins only;
//   GET /v1/tokens, POST /v1/tokens, DELETE /v1/tokens/ID        a user's own tokens, or anyone's
//                                                                for an admin.
// A token's secret is answered once, when it is created; listings show ids only.
#pragma once

#include <httplib.h>

#include "control/job_store.h"
#include "core/clock.h"

namespace anneal {

// clock: the server's (users' creation and tokens' issue and expiry times). user_token_ttl_s: the
// lifetime of a new user token unless its request says otherwise (0: none).
void AddUserRoutes(httplib::Server& http, JobStore* store, Clock& clock, double user_token_ttl_s = 90 * 24 * 3600);

}  // namespace anneal
