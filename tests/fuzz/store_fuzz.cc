// The rendezvous store's server (comm/store.h, TcpStoreServer) on whatever bytes reach its port — a
// launcher's store listens on the network for the job's whole life. The input is sent as it is on one
// connection, which is then closed; any answer is read for at most 50 ms. Property: after each input
// the server still answers a well-formed client (Set, Get, Add), so no message can stop it, and it
// keeps no thread or descriptor of connections gone (its Add refuses a sum past int64 instead of
// overflowing).
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <memory>

#include "comm/store.h"
#include "fuzz/fuzz_target.h"

namespace {

anneal::TcpStoreServer& TheStore() {
  static std::unique_ptr<anneal::TcpStoreServer> s = std::move(*anneal::TcpStoreServer::Start("127.0.0.1", 0));
  return *s;
}

void SendRaw(int port, const uint8_t* data, size_t size) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    (void)!::send(fd, data, size, MSG_NOSIGNAL);
    ::shutdown(fd, SHUT_WR);
    timeval tv{0, 50000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[4096];
    while (::recv(fd, buf, sizeof(buf), 0) > 0) {
    }
  }
  ::close(fd);
}

}  // namespace

ANNEAL_FUZZ_TARGET(store) {
  anneal::TcpStoreServer& s = TheStore();
  SendRaw(s.port(), data, size);
  auto c = anneal::ConnectTcpStore("127.0.0.1", s.port(), std::chrono::milliseconds(2000));
  FUZZ_EXPECT(c.ok());
  FUZZ_EXPECT((*c)->Set("fuzz/probe", "alive").ok());
  auto v = (*c)->Get("fuzz/probe", std::chrono::milliseconds(2000));
  FUZZ_EXPECT(v.ok() && *v == "alive");
  FUZZ_EXPECT((*c)->Add("fuzz/count", 1).ok());
  return 0;
}
