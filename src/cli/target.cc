#include "cli/target.h"

#include <cstdlib>
#include <unistd.h>

#include "core/env.h"

namespace anneal::cli {

void AddTargetOptions(CLI::App* c, Target* t, bool with_capacity) {
  c->add_option("--server", t->server, "The server's URL (default: $ANNEAL_SERVER, else http://127.0.0.1:8470)");
  c->add_flag("--local", t->local, "Use an embedded server with the local backend (no server process needed)");
  c->add_option("--data-dir", t->data_dir, "With --local: the store's folder (default: $ANNEAL_HOME/local, ~/.anneal/local)");
  if (with_capacity) {
    c->add_option("--max-instances", t->max_instances, "With --local: agents running at once")->capture_default_str();
  }
}

std::string LocalDataDir(const Target& t) {
  if (!t.data_dir.empty()) return t.data_dir;
  if (const char* h = std::getenv("ANNEAL_HOME"); h && *h) return std::string(h) + "/local";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/tmp") + "/.anneal/local";
}

Result<Connection> Connect(const Target& t, bool schedule) {
  Connection c;
  std::string url = DefaultServerUrl(t.server);
  if (t.local) {
    ServerOptions o;
    o.data_dir = LocalDataDir(t);
    o.port = 0;
    o.backend = "local";
    o.max_instances = t.max_instances;
    o.schedule = schedule;
    // The embedded server ends with this command, and no later one listens where it did (port 0): its
    // agents stop their ranks this soon after it is gone (a detached Ctrl-C, a killed CLI), instead of
    // training on unwatched for the server's default 10 min.
    o.local_orphan_timeout_s = 10;
    // A job's sandbox needs a root agent (its own uid): a user's embedded server runs the user's jobs
    // as the user, and every node report says so ("off: ... --no-sandbox").
    if (::geteuid() != 0) o.no_sandbox = true;
    ANNEAL_ASSIGN_OR_RETURN(c.embedded, ControlServer::Start(o));
    url = c.embedded->url();
  }
  ANNEAL_ASSIGN_OR_RETURN(c.client, ApiClient::Make(url, 60));
  // No server at the URL, but this machine has a --local store: say so (one health probe, only then).
  if (!t.local && Env::Default().Exists(LocalDataDir(t))) {
    auto health = c.client->Get("/v1/health");
    if (!health.ok() && health.status().message().rfind("cannot reach", 0) == 0) {
      return Status(health.status().code(),
                    health.status().message() + "; this machine has a local store in " + LocalDataDir(t) +
                        ": add --local to use it (an embedded server in this process, no server needed)");
    }
  }
  if (t.local) {
    // The embedded server is this user's own: its admin token.
    ANNEAL_ASSIGN_OR_RETURN(std::string token, Env::Default().ReadFile(JoinPath(LocalDataDir(t), "admin.token")));
    while (!token.empty() && token.back() == '\n') token.pop_back();
    ApiClient::SetProcessToken(token);
    c.client->set_token(token);
  }
  return c;
}

}  // namespace anneal::cli
