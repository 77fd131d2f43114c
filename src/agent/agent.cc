#include "agent/agent.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "agent/agent_signal.h"
#include "agent/heartbeat_loop.h"
#include "comm/store.h"
#include "core/dir_lock.h"
#include "core/env.h"
#include "launch/sandbox.h"
#include "protocol/api_client.h"

namespace anneal {

namespace {

// The join token or the instance's one-time secret (AgentOptions::join_token_file), read once.
Result<std::string> ReadJoinSecret(const AgentOptions& o) {
  if (o.join_token_fd >= 0) {
    std::string text;
    char buf[256];
    ssize_t n;
    while ((n = ::read(o.join_token_fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
      if (n > 0) text.append(buf, static_cast<size_t>(n));
    }
    ::close(o.join_token_fd);
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    if (n < 0) return IoError("cannot read the join secret from fd " + std::to_string(o.join_token_fd));
    return text;
  }
  if (!o.join_token_file.empty()) {
    ANNEAL_ASSIGN_OR_RETURN(std::string secret, ReadSecretFile(o.join_token_file));
    if (o.remove_join_token_file) ::unlink(o.join_token_file.c_str());
    return secret;
  }
  const char* e = std::getenv("ANNEAL_JOIN_TOKEN");
  return std::string(e ? e : "");
}

// The agent's folder (absolute: the sandbox binds and hides by absolute path), whether it can make
// sandboxes, and the address it advertises.
Status SetUpAgent(AgentOptions* o, std::string* address) {
  if (o->work_dir.empty()) return InvalidInput("anneal agent needs --work-dir DIR (where jobs are unpacked and run)");
  if (o->slots < 1) return InvalidInput("--slots must be at least 1");
  ANNEAL_RETURN_IF_ERROR(Env::Default().CreateDirs(o->work_dir));
  std::error_code ec;
  const auto abs = std::filesystem::canonical(o->work_dir, ec);
  if (!ec) o->work_dir = abs.string();
  // Held until this process ends, however it ends: the local backend reads the spool of a folder
  // whose lock is free (core/dir_lock.h), also after a server restart.
  ANNEAL_RETURN_IF_ERROR(HoldDirLock(o->work_dir));
  if (o->no_sandbox) {
    AgentSay("--no-sandbox: jobs' ranks run as this agent's uid " + std::to_string(::geteuid()) +
             ", without their own uid, mounts or cgroup isolation (docs/security.md)");
  } else if (!(o->sandbox_unavailable = SandboxUnavailableReason()).empty()) {
    AgentSay("jobs cannot be sandboxed here, so they will be refused: " + o->sandbox_unavailable);
  }
  *address = o->address;
  if (address->empty()) {
    std::string host = o->server_url.substr(o->server_url.find("://") + 3);
    host = host.substr(0, host.find_first_of(":/"));
    auto a = LocalAddressToward(host);
    *address = a.ok() ? *a : "127.0.0.1";
  }
  return Status::Ok();
}

// The agent's work folder at its end (--remove-work-dir), but for a spool of records it could not
// deliver (protocol/spool.h), which the local backend delivers once it finds this agent gone.
void RemoveWorkDir(const std::string& dir) {
  std::error_code ec;
  // A delivered spool's file is gone (Shipper::RemoveSpool): any file left holds undelivered records.
  // Whether one is there is all this needs, not its records, which may be an attempt's every line.
  if (!std::filesystem::is_empty(dir + "/spool", ec) && !ec) {
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      if (e.path().filename() != "spool") std::filesystem::remove_all(e.path(), ec);
    }
    return;
  }
  std::filesystem::remove_all(dir, ec);
}

}  // namespace

Status RunAgent(const AgentOptions& in) {
  AgentOptions o = in;
  std::string address;
  ANNEAL_RETURN_IF_ERROR(SetUpAgent(&o, &address));
  InstallAgentSignalHandlers();
  ANNEAL_ASSIGN_OR_RETURN(std::string join, ReadJoinSecret(o));
  // Tokens stay in this process: the ranks inherit its environment.
  for (const char* v : {"ANNEAL_JOIN_TOKEN", "ANNEAL_TOKEN", "ANNEAL_TOKEN_FILE"}) ::unsetenv(v);
  if (join.empty()) {
    return InvalidInput("anneal agent needs the server's join token: --join-token-file FILE or $ANNEAL_JOIN_TOKEN "
                        "(the server wrote it to <its data dir>/join.token)");
  }
  ApiClient::SetProcessToken("");
  ANNEAL_ASSIGN_OR_RETURN(auto client, ApiClient::Make(o.server_url, 10));
  HeartbeatLoop loop(o, address, join, std::move(client));
  const Status result = loop.Run();
  if (o.remove_work_dir) RemoveWorkDir(o.work_dir);
  return result;
}

}  // namespace anneal
