#include "agent/meeting.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <nlohmann/json.hpp>

#include "protocol/api_client.h"
#include "core/crypto.h"

namespace anneal {

using nlohmann::json;

namespace {

// A socket bound to a free port of every address (reuse: SO_REUSEADDR), and the port.
Result<std::pair<int, int>> BindFreePort(bool reuse) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return IoError(std::string("socket: ") + std::strerror(errno));
  const int one = 1;
  if (reuse) ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = 0;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return IoError(std::string("finding a free port: ") + std::strerror(errno));
  }
  return std::make_pair(fd, static_cast<int>(ntohs(a.sin_port)));
}

// Whether a meeting's value names `port` as one of its two.
bool Names(const json& v, int port) {
  for (const char* k : {"master_port", "store_port"}) {
    if (v.is_object() && v.contains(k) && v[k].is_number_integer() && v[k].get<int>() == port) return true;
  }
  return false;
}

}  // namespace

Result<int> FreePort() {
  ANNEAL_ASSIGN_OR_RETURN(auto bound, BindFreePort(false));
  ::close(bound.first);
  return bound.second;
}

PortHolds& PortHolds::Process() {
  static PortHolds* holds = new PortHolds();  // never destroyed: the process's exit closes the sockets
  return *holds;
}

Result<int> PortHolds::Take(const std::string& job, const std::string& meeting) {
  ANNEAL_ASSIGN_OR_RETURN(auto bound, BindFreePort(true));
  std::lock_guard<std::mutex> l(mu_);
  EraseIf([&](const std::string& m, const Held&) { return m != meeting; });
  Held& h = held_[meeting];
  h.job = job;
  h.sockets[bound.second] = bound.first;
  return bound.second;
}

void PortHolds::Release(const std::string& meeting, int port) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = held_.find(meeting);
  if (it == held_.end()) return;
  if (auto p = it->second.sockets.find(port); p != it->second.sockets.end()) {
    ::close(p->second);
    it->second.sockets.erase(p);
  }
  if (it->second.sockets.empty()) held_.erase(it);
}

void PortHolds::ReleaseJob(const std::string& job) {
  std::lock_guard<std::mutex> l(mu_);
  EraseIf([&](const std::string&, const Held& h) { return h.job == job; });
}

void PortHolds::EraseIf(const std::function<bool(const std::string&, const Held&)>& drop) {
  for (auto it = held_.begin(); it != held_.end();) {
    if (!drop(it->first, it->second)) {
      ++it;
      continue;
    }
    for (const auto& [port, fd] : it->second.sockets) ::close(fd);
    it = held_.erase(it);
  }
}

int PortHolds::Count(const std::string& meeting) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = held_.find(meeting);
  return it == held_.end() ? 0 : static_cast<int>(it->second.sockets.size());
}

bool PortHolds::Holds(const std::string& meeting, int port) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = held_.find(meeting);
  return it != held_.end() && it->second.sockets.count(port) > 0;
}

Result<Meeting> MeetThroughServer(const std::string& server_url, const std::string& job, MeetingKey key, int node,
                                  const std::string& address, double timeout_s, const std::atomic<bool>& stop,
                                  Clock& clock) {
  ANNEAL_ASSIGN_OR_RETURN(auto c, ApiClient::Make(server_url, 10));
  const std::string rdzv = key.Path(job);
  json value;
  if (node == 0) {
    PortHolds& holds = PortHolds::Process();
    ANNEAL_ASSIGN_OR_RETURN(int mp, holds.Take(job, rdzv));
    auto sp = holds.Take(job, rdzv);
    if (!sp.ok()) holds.Release(rdzv, mp);
    ANNEAL_RETURN_IF_ERROR(sp.status());
    auto put = c->Put(rdzv, {{"master_addr", address}, {"master_port", mp}, {"store_port", *sp}, {"exec_key", RandomHex(16)}});
    // The ports the meeting names stay held (these, or the round's the start reuses); the others go.
    for (int port : {mp, *sp}) {
      if (!put.ok() || !Names(*put, port)) holds.Release(rdzv, port);
    }
    ANNEAL_RETURN_IF_ERROR(put.status());
    value = *put;
  } else {
    const double deadline = clock.Monotonic() + timeout_s;
    for (;;) {
      auto v = c->Get(rdzv);
      if (v.ok()) {
        value = *v;
        break;
      }
      if (stop.load()) return Cancelled("stopped while waiting for node 0 of " + job + " to publish its ports");
      if (clock.Monotonic() > deadline) {
        return PeerError("node 0 of " + job + " did not publish its ports within " +
                         std::to_string(static_cast<long long>(timeout_s)) + " s");
      }
      clock.SleepFor(0.1);
    }
  }
  if (!value.is_object() || !value.contains("master_addr") || !value["master_addr"].is_string() ||
      !value.contains("master_port") || !value["master_port"].is_number_integer() || !value.contains("store_port") ||
      !value["store_port"].is_number_integer()) {
    return PeerError("the server's meeting " + rdzv + " is not {master_addr, master_port, store_port}: " +
                     value.dump(-1, ' ', false, json::error_handler_t::replace).substr(0, 200));
  }
  Meeting m;
  m.master_addr = value["master_addr"].get<std::string>();
  m.master_port = value["master_port"].get<int>();
  m.store_port = value["store_port"].get<int>();
  m.exec_key = value.contains("exec_key") && value["exec_key"].is_string() ? value["exec_key"].get<std::string>() : "";
  return m;
}

}  // namespace anneal
