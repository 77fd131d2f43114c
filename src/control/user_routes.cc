#include "control/user_routes.h"

#include "control/http_util.h"
#include "protocol/wire.h"
#include "core/bounded_parse.h"

namespace anneal {

namespace {

using nlohmann::json;

json UserJson(const UserRecord& u) {
  return {{"name", u.name}, {"role", u.role}, {"max_instances", u.max_instances}, {"created_at", u.created_at}};
}

json TokenJson(const TokenRecord& t) {
  return {{"id", t.id},           {"user", t.principal},         {"kind", t.kind},
          {"description", t.description}, {"created_at", t.created_at}, {"expires_at", t.expires_at},
          {"last_used_at", t.last_used_at}};
}

// Reads role / max_instances from a body into u; false (and the 400 sent) when invalid.
bool ReadUserFields(const json& b, UserRecord* u, httplib::Response& res) {
  if (b.contains("role")) {
    if (!b["role"].is_string() || !ValidRole(b["role"].get<std::string>())) {
      ReplyError(res, 400, "role: must be admin, user or viewer", "role");
      return false;
    }
    u->role = b["role"].get<std::string>();
  }
  if (b.contains("max_instances")) {
    int64_t n = 0;
    if (!JsonIntIn(b["max_instances"], -1, 1000000, &n)) {
      ReplyError(res, 400, "max_instances: must be a whole number from -1 (the server's default) to 1000000, got " +
                               b["max_instances"].dump(), "max_instances");
      return false;
    }
    u->max_instances = static_cast<int>(n);
  }
  return true;
}

json ParseBody(const httplib::Request& req, httplib::Response& res) {
  auto b = JsonBody(req, res);
  return b ? *b : json();
}

void AddTokenRoutes(httplib::Server& http, JobStore* store, Clock& clock, double ttl_s);

}  // namespace

void AddUserRoutes(httplib::Server& http, JobStore* store, Clock& clock, double user_token_ttl_s) {
  http.Get("/v1/users", Guarded(store, Access::kAdmin, [store](const httplib::Request&, httplib::Response& res, const Principal&) {
    auto users = store->Users();
    if (!users.ok()) return ReplyError(res, 500, users.status().message());
    json out = json::array();
    for (const auto& u : *users) out.push_back(UserJson(u));
    Reply(res, 200, {{"users", out}});
  }));
  http.Post("/v1/users", Guarded(store, Access::kAdmin, [store, user_token_ttl_s, &clock](const httplib::Request& req, httplib::Response& res, const Principal&) {
    json b = ParseBody(req, res);
    if (b.is_null()) return;
    UserRecord u;
    u.name = b.value("name", std::string());
    u.role = "user";
    if (Status st = ValidateUserName(u.name); !st.ok()) return ReplyError(res, 400, "name: " + st.message(), "name");
    if (!ReadUserFields(b, &u, res)) return;
    auto known = store->GetUser(u.name);
    if (!known.ok()) return ReplyError(res, 500, known.status().message());
    if (*known) return ReplyError(res, 409, "user " + u.name + " exists (change it with PUT /v1/users/" + u.name + ")");
    u.created_at = clock.Wall();
    if (Status st = store->PutUser(u); !st.ok()) return ReplyError(res, 500, st.message());
    auto secret = IssueToken(store, u.name, "user", "created with the user", u.created_at,
                             user_token_ttl_s > 0 ? u.created_at + user_token_ttl_s : 0);
    if (!secret.ok()) return ReplyError(res, 500, secret.status().message());
    json out = UserJson(u);
    out["token"] = *secret;
    Reply(res, 201, out);
  }));
  http.Put(R"(/v1/users/([^/]+))", Guarded(store, Access::kAdmin, [store](const httplib::Request& req, httplib::Response& res, const Principal& p) {
    json b = ParseBody(req, res);
    if (b.is_null()) return;
    auto u = store->GetUser(req.matches[1]);
    if (!u.ok()) return ReplyError(res, 500, u.status().message());
    if (!*u) return ReplyError(res, 404, "no user " + std::string(req.matches[1]));
    UserRecord v = **u;
    if (!ReadUserFields(b, &v, res)) return;
    if (v.name == p.name && v.role != "admin") return ReplyError(res, 400, "an admin cannot take away their own admin role");
    if (Status st = store->PutUser(v); !st.ok()) return ReplyError(res, 500, st.message());
    Reply(res, 200, UserJson(v));
  }));
  http.Delete(R"(/v1/users/([^/]+))", Guarded(store, Access::kAdmin, [store](const httplib::Request& req, httplib::Response& res, const Principal& p) {
    const std::string name = req.matches[1];
    if (name == p.name) return ReplyError(res, 400, "an admin cannot remove themselves: another admin can");
    auto u = store->GetUser(name);
    if (!u.ok()) return ReplyError(res, 500, u.status().message());
    if (!*u) return ReplyError(res, 404, "no user " + name);
    if (Status st = store->DeleteUser(name); !st.ok()) return ReplyError(res, 500, st.message());
    Reply(res, 200, {{"removed", name}});
  }));
  AddTokenRoutes(http, store, clock, user_token_ttl_s);
}

namespace {

// /v1/tokens: one's own, anyone's for an admin; a token's secret is answered once, when it is made.
void AddTokenRoutes(httplib::Server& http, JobStore* store, Clock& clock, double ttl_s) {
  http.Get("/v1/tokens", Guarded(store, Access::kUser, [store](const httplib::Request& req, httplib::Response& res, const Principal& p) {
    std::string who = p.name;
    if (p.admin()) who = req.has_param("user") ? req.get_param_value("user") : "";
    auto tokens = store->Tokens(who);
    if (!tokens.ok()) return ReplyError(res, 500, tokens.status().message());
    json out = json::array();
    for (const auto& t : *tokens) out.push_back(TokenJson(t));
    Reply(res, 200, {{"tokens", out}});
  }));
  http.Post("/v1/tokens", Guarded(store, Access::kUser, [store, ttl_s, &clock](const httplib::Request& req, httplib::Response& res, const Principal& p) {
    json b = ParseBody(req, res);
    if (b.is_null()) return;
    const std::string user = b.value("user", p.name);
    if (user != p.name && !p.admin()) return ReplyError(res, 403, "only an admin may create tokens for another user");
    auto u = store->GetUser(user);
    if (!u.ok()) return ReplyError(res, 500, u.status().message());
    if (!*u) return ReplyError(res, 404, "no user " + user + " (an admin adds one with anneal users add)");
    // Its lifetime: ttl_s if given (0: never), none for a service token, else the server's default.
    double ttl = b.value("service", false) ? 0 : ttl_s;
    if (b.contains("service") && !b["service"].is_boolean()) return ReplyError(res, 400, "service: must be true or false", "service");
    if (b.contains("ttl_s")) {
      if (!b["ttl_s"].is_number() || b["ttl_s"].get<double>() < 0 || b["ttl_s"].get<double>() > 1e10) {
        return ReplyError(res, 400, "ttl_s: must be seconds from 0 (never expires) to 1e10, got " + b["ttl_s"].dump(), "ttl_s");
      }
      ttl = b["ttl_s"].get<double>();
    }
    const double now = clock.Wall();
    auto secret = IssueToken(store, user, "user", b.value("description", std::string()), now, ttl > 0 ? now + ttl : 0);
    if (!secret.ok()) return ReplyError(res, 500, secret.status().message());
    auto mine = store->FindToken(TokenHash(*secret));
    if (!mine.ok() || !*mine) return ReplyError(res, 500, "the new token vanished");
    json out = TokenJson(**mine);
    out["token"] = *secret;
    Reply(res, 201, out);
  }));
  http.Delete(R"(/v1/tokens/([^/]+))", Guarded(store, Access::kUser, [store](const httplib::Request& req, httplib::Response& res, const Principal& p) {
    const std::string id = req.matches[1];
    auto all = store->Tokens(p.admin() ? "" : p.name);
    if (!all.ok()) return ReplyError(res, 500, all.status().message());
    bool found = false;
    for (const auto& t : *all) found |= t.id == id && t.kind == "user";
    if (!found) return ReplyError(res, 404, "no token " + id + " of yours (list them with anneal tokens list)");
    if (Status st = store->DeleteToken(id); !st.ok()) return ReplyError(res, HttpStatusOf(st), st.message());
    Reply(res, 200, {{"revoked", id}});
  }));
}

}  // namespace

}  // namespace anneal
