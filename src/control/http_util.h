// Small helpers shared by the server's route files: JSON answers, error bodies, query parameters,
// and the guard that authenticates a request and checks its principal's access (control/auth.h).
#pragma once

#include <httplib.h>

#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "control/auth.h"
#include "control/job_store.h"
#include "core/status.h"

namespace anneal {

void Reply(httplib::Response& res, int status, const nlohmann::json& body);
// {"error": {"message": ..., "field": ...}}
void ReplyError(httplib::Response& res, int status, const std::string& message, const std::string& field = "");
// The HTTP status for a Status from the layers below (400, 404, 500).
int HttpStatusOf(const Status& st);
// The request's body as a JSON object, parsed under core/bounded_parse.h's depth limit (an empty body
// is {}); otherwise replies 400 naming the problem and returns nothing.
std::optional<nlohmann::json> JsonBody(const httplib::Request& req, httplib::Response& res);
int IntParam(const httplib::Request& req, const char* name, int dflt);
int64_t Int64Param(const httplib::Request& req, const char* name, int64_t dflt);

// Who may call a route.
enum class Access {
  kUser,    // any user (admin, user, viewer)
  kSubmit,  // admin or user (creates or changes jobs)
  kAdmin,
  kAgent,   // an agent's own token
  kJoin,    // the join token or a requested instance's one-time secret (agent registration)
  kAny,     // any user or agent
};

using AuthedHandler = std::function<void(const httplib::Request&, httplib::Response&, const Principal&)>;

// A handler that answers 401 (no or unknown token, with WWW-Authenticate: Bearer) or 403 (a
// principal without access), and otherwise calls h with the principal.
httplib::Server::Handler Guarded(JobStore* store, Access access, AuthedHandler h);

}  // namespace anneal
