#include "control/http_util.h"

#include "core/bounded_parse.h"

namespace anneal {

void Reply(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  // Invalid UTF-8 in a string (a path or name echoed in a message) becomes U+FFFD instead of an
  // exception that would end the server (this also runs in the error handler, outside any route).
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

void ReplyError(httplib::Response& res, int status, const std::string& message, const std::string& field) {
  nlohmann::json e = {{"message", message}};
  if (!field.empty()) e["field"] = field;
  Reply(res, status, {{"error", e}});
}

int HttpStatusOf(const Status& st) {
  switch (st.code()) {
    case Code::kInvalidInput: return 400;
    case Code::kNotFound: return 404;
    default: return 500;
  }
}

std::optional<nlohmann::json> JsonBody(const httplib::Request& req, httplib::Response& res) {
  if (req.body.empty()) return nlohmann::json::object();
  auto b = ParseJsonBounded(req.body);
  if (!b.ok()) {
    ReplyError(res, 400, "the request body is refused: " + b.status().message());
    return std::nullopt;
  }
  if (!b->is_object()) {
    ReplyError(res, 400, "the request body must be a JSON object");
    return std::nullopt;
  }
  return std::move(*b);
}

int IntParam(const httplib::Request& req, const char* name, int dflt) {
  if (!req.has_param(name)) return dflt;
  try {
    return std::stoi(req.get_param_value(name));
  } catch (...) {
    return dflt;
  }
}

int64_t Int64Param(const httplib::Request& req, const char* name, int64_t dflt) {
  if (!req.has_param(name)) return dflt;
  try {
    return std::stoll(req.get_param_value(name));
  } catch (...) {
    return dflt;
  }
}

namespace {

// "" when p may call a route of this access level, else why not.
std::string Denied(Access a, const Principal& p) {
  const bool user = p.kind == "user";
  switch (a) {
    case Access::kUser: return user ? "" : "this endpoint is for users, not " + p.kind + " tokens";
    case Access::kSubmit:
      return p.submits() ? "" : user ? "the " + p.role + " role can only read: ask an admin for the user role"
                                     : "this endpoint is for users, not " + p.kind + " tokens";
    case Access::kAdmin: return p.admin() ? "" : "only an admin may do this";
    case Access::kAgent: return p.kind == "agent" ? "" : "this endpoint is for agents";
    case Access::kJoin:
      return p.kind == "join" || p.kind == "register" ? "" : "registering an agent needs the join token or its instance's secret";
    case Access::kAny: return p.kind == "user" || p.kind == "agent" ? "" : "the join token only registers agents";
  }
  return "denied";
}

}  // namespace

httplib::Server::Handler Guarded(JobStore* store, Access access, AuthedHandler h) {
  return [store, access, h = std::move(h)](const httplib::Request& req, httplib::Response& res) {
    auto p = Authenticate(store, req.get_header_value("Authorization"));
    if (!p.ok()) {
      const std::string& m = p.status().message();
      if (m.rfind("401: ", 0) == 0) {
        res.set_header("WWW-Authenticate", "Bearer");
        return ReplyError(res, 401, m.substr(5));
      }
      return ReplyError(res, 500, m);
    }
    if (const std::string why = Denied(access, *p); !why.empty()) return ReplyError(res, 403, why);
    h(req, res, *p);
  };
}

}  // namespace anneal
