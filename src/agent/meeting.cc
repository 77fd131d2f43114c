#include "agent/meeting.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "protocol/api_client.h"
#include "core/crypto.h"

namespace anneal {

using nlohmann::json;

Result<int> FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return IoError(std::string("socket: ") + std::strerror(errno));
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
  ::close(fd);
  return static_cast<int>(ntohs(a.sin_port));
}

Result<Meeting> MeetThroughServer(const std::string& server_url, const std::string& job, MeetingKey key, int node,
                                  const std::string& address, double timeout_s, const std::atomic<bool>& stop,
                                  Clock& clock) {
  ANNEAL_ASSIGN_OR_RETURN(auto c, ApiClient::Make(server_url, 10));
  const std::string rdzv = key.Path(job);
  json value;
  if (node == 0) {
    ANNEAL_ASSIGN_OR_RETURN(int mp, FreePort());
    ANNEAL_ASSIGN_OR_RETURN(int sp, FreePort());
    ANNEAL_ASSIGN_OR_RETURN(value, c->Put(rdzv, {{"master_addr", address}, {"master_port", mp}, {"store_port", sp},
                                                 {"exec_key", RandomHex(16)}}));
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
  Meeting m;
  m.master_addr = value["master_addr"].get<std::string>();
  m.master_port = value["master_port"].get<int>();
  m.store_port = value["store_port"].get<int>();
  m.exec_key = value.value("exec_key", "");
  return m;
}

}  // namespace anneal
