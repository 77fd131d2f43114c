// How a CLI command reaches a server: --server URL (default $ANNEAL_SERVER, else
// http://127.0.0.1:8470) with the token of $ANNEAL_TOKEN / $ANNEAL_TOKEN_FILE, or --local: an
// embedded server with the local backend in this process on $ANNEAL_HOME/local (default
// ~/.anneal/local, or --data-dir), reached with the admin token it keeps there.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "protocol/api_client.h"
#include "control/server.h"

namespace anneal::cli {

struct Target {
  std::string server;
  bool local = false;
  std::string data_dir;
  int max_instances = 4;
};

void AddTargetOptions(CLI::App* c, Target* t, bool with_capacity);
std::string LocalDataDir(const Target& t);

// A client to the chosen server; with --local also the embedded server it talks to.
struct Connection {
  std::unique_ptr<ControlServer> embedded;
  std::unique_ptr<ApiClient> client;
};

Result<Connection> Connect(const Target& t, bool schedule);

}  // namespace anneal::cli
