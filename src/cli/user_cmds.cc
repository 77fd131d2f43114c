// anneal users | tokens: accounts and API tokens on a server (docs/security.md). Admins manage users;
// every user lists, creates and revokes their own tokens. A token's secret is printed once, when it
// is created, and never again.
#include <cstdio>

#include "cli/commands.h"
#include "cli/target.h"
#include "protocol/wire.h"

namespace anneal::cli {

namespace {

using nlohmann::json;

struct UserArgs {
  Target target;
  std::string name, role = "user", description, user;
  double ttl_s = -1;     // tokens create: -1 = the server's default
  bool service = false;  // tokens create: no expiry by default
  int max_instances = -1;
  bool set_role = false, set_max = false;
};

void PrintUsers(const json& r) {
  std::printf("%-20s %-8s %-14s %s\n", "USER", "ROLE", "MAX_INSTANCES", "CREATED");
  for (const auto& u : r["users"]) {
    const int m = u.value("max_instances", -1);
    std::printf("%-20s %-8s %-14s %s\n", u.value("name", std::string()).c_str(), u.value("role", std::string()).c_str(),
                m < 0 ? "default" : m == 0 ? "unlimited" : std::to_string(m).c_str(), FormatTime(u.value("created_at", 0.0)).c_str());
  }
}

Status RunUsers(const std::string& verb, const UserArgs& a) {
  ANNEAL_ASSIGN_OR_RETURN(Connection c, Connect(a.target, false));
  if (verb == "list") {
    ANNEAL_ASSIGN_OR_RETURN(json r, c.client->Get("/v1/users"));
    PrintUsers(r);
  } else if (verb == "add") {
    json b = {{"name", a.name}, {"role", a.role}, {"max_instances", a.max_instances}};
    ANNEAL_ASSIGN_OR_RETURN(json r, c.client->Post("/v1/users", b));
    std::fprintf(stderr, "added user %s (%s); their token (shown once, give it to them privately):\n", a.name.c_str(),
                 a.role.c_str());
    std::printf("%s\n", r.value("token", std::string()).c_str());
  } else if (verb == "set") {
    json b = json::object();
    if (a.set_role) b["role"] = a.role;
    if (a.set_max) b["max_instances"] = a.max_instances;
    if (b.empty()) return InvalidInput("anneal users set " + a.name + ": give --role and/or --max-instances");
    ANNEAL_ASSIGN_OR_RETURN(json r, c.client->Put("/v1/users/" + a.name, b));
    PrintUsers({{"users", json::array({r})}});
  } else {
    ANNEAL_ASSIGN_OR_RETURN(json r, c.client->Delete("/v1/users/" + a.name));
    std::fprintf(stderr, "removed user %s and their tokens\n", a.name.c_str());
  }
  return Status::Ok();
}

Status RunTokens(const std::string& verb, const UserArgs& a) {
  ANNEAL_ASSIGN_OR_RETURN(Connection c, Connect(a.target, false));
  if (verb == "list") {
    ANNEAL_ASSIGN_OR_RETURN(json r, c.client->Get(a.user.empty() ? "/v1/tokens" : "/v1/tokens?user=" + a.user));
    std::printf("%-18s %-16s %-6s %-20s %-20s %-20s %s\n", "ID", "USER", "KIND", "CREATED", "EXPIRES", "LAST USED", "DESCRIPTION");
    auto when = [](const json& t, const char* key, const char* none) {
      const double at = t.value(key, 0.0);
      return at > 0 ? FormatTime(at).substr(0, 19) : std::string(none);
    };
    for (const auto& t : r["tokens"]) {
      std::printf("%-18s %-16s %-6s %-20s %-20s %-20s %s\n", t.value("id", std::string()).c_str(),
                  t.value("user", std::string()).c_str(), t.value("kind", std::string()).c_str(),
                  when(t, "created_at", "-").c_str(), when(t, "expires_at", "never").c_str(),
                  when(t, "last_used_at", "never").c_str(), t.value("description", std::string()).c_str());
    }
  } else if (verb == "create") {
    json b = {{"description", a.description}};
    if (a.ttl_s >= 0) b["ttl_s"] = a.ttl_s;
    if (a.service) b["service"] = true;
    if (!a.user.empty()) b["user"] = a.user;
    ANNEAL_ASSIGN_OR_RETURN(json r, c.client->Post("/v1/tokens", b));
    std::fprintf(stderr, "token %s for %s (the secret is shown once):\n", r.value("id", std::string()).c_str(),
                 r.value("user", std::string()).c_str());
    std::printf("%s\n", r.value("token", std::string()).c_str());
  } else {
    ANNEAL_ASSIGN_OR_RETURN(json r, c.client->Delete("/v1/tokens/" + a.name));
    std::fprintf(stderr, "revoked %s\n", a.name.c_str());
  }
  return Status::Ok();
}

}  // namespace

void AddUserCommands(CLI::App& app, RunFn* run) {
  auto a = std::make_shared<UserArgs>();
  CLI::App* users = app.add_subcommand("users", "Manage the server's users (admins only).\n"
                                                "Example: anneal users add alice --role user --max-instances 8");
  users->require_subcommand(1);
  CLI::App* ul = users->add_subcommand("list", "List users, their roles and instance limits");
  AddTargetOptions(ul, &a->target, false);
  ul->callback([run, a] { *run = [a] { return RunUsers("list", *a); }; });
  CLI::App* ua = users->add_subcommand("add", "Add a user and print their first token");
  ua->add_option("name", a->name, "The user's name (a-z 0-9 _ . -)")->required();
  ua->add_option("--role", a->role, "admin, user or viewer")->capture_default_str();
  ua->add_option("--max-instances", a->max_instances, "Instances across their running jobs (-1: the server's default, 0: no limit)");
  AddTargetOptions(ua, &a->target, false);
  ua->callback([run, a] { *run = [a] { return RunUsers("add", *a); }; });
  CLI::App* us = users->add_subcommand("set", "Change a user's role or instance limit");
  us->add_option("name", a->name, "The user")->required();
  us->add_option("--role", a->role, "admin, user or viewer")->each([a](const std::string&) { a->set_role = true; });
  us->add_option("--max-instances", a->max_instances, "-1: the server's default, 0: no limit")
      ->each([a](const std::string&) { a->set_max = true; });
  AddTargetOptions(us, &a->target, false);
  us->callback([run, a] { *run = [a] { return RunUsers("set", *a); }; });
  CLI::App* ur = users->add_subcommand("remove", "Remove a user and revoke their tokens (their jobs stay)");
  ur->add_option("name", a->name, "The user")->required();
  AddTargetOptions(ur, &a->target, false);
  ur->callback([run, a] { *run = [a] { return RunUsers("remove", *a); }; });

  CLI::App* tokens = app.add_subcommand("tokens", "Manage API tokens: your own, or anyone's as an admin.\n"
                                                  "Example: anneal tokens create --description laptop");
  tokens->require_subcommand(1);
  CLI::App* tl = tokens->add_subcommand("list", "List tokens (ids, never secrets)");
  tl->add_option("--user", a->user, "Admins: only this user's");
  AddTargetOptions(tl, &a->target, false);
  tl->callback([run, a] { *run = [a] { return RunTokens("list", *a); }; });
  CLI::App* tc = tokens->add_subcommand("create", "Create a token and print its secret once");
  tc->add_option("--user", a->user, "Admins: for this user (default: yourself)");
  tc->add_option("--description", a->description, "What it is for");
  tc->add_option("--ttl-s", a->ttl_s, "Expires after this many seconds (0: never; default: the server's --user-token-ttl-s)")
      ->check(CLI::Range(0.0, 1e10));
  tc->add_flag("--service", a->service, "A service token: never expires unless --ttl-s is given");
  AddTargetOptions(tc, &a->target, false);
  tc->callback([run, a] { *run = [a] { return RunTokens("create", *a); }; });
  CLI::App* tr = tokens->add_subcommand("revoke", "Revoke a token by id");
  tr->add_option("id", a->name, "The token's id (tok-...)")->required();
  AddTargetOptions(tr, &a->target, false);
  tr->callback([run, a] { *run = [a] { return RunTokens("revoke", *a); }; });
}

}  // namespace anneal::cli
