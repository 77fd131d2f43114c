#include "storage/fault_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstring>

namespace anneal {

namespace {

bool SendAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Reads until `buf` holds the header block (through "\r\n\r\n"); returns its length, or 0 on EOF.
size_t ReadHeaders(int fd, std::string* buf) {
  char tmp[65536];
  for (;;) {
    const size_t end = buf->find("\r\n\r\n");
    if (end != std::string::npos) return end + 4;
    const ssize_t r = ::recv(fd, tmp, sizeof(tmp), 0);
    if (r <= 0) return 0;
    buf->append(tmp, static_cast<size_t>(r));
  }
}

// The value of header `name` (lower-case) in a header block, or "".
std::string Header(const std::string& headers, const std::string& name) {
  std::string lower = headers;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const size_t p = lower.find("\r\n" + name + ":");
  if (p == std::string::npos) return "";
  const size_t a = p + 3 + name.size(), e = headers.find("\r\n", a);
  std::string v = headers.substr(a, e - a);
  while (!v.empty() && v.front() == ' ') v.erase(0, 1);
  return v;
}

// Reads a whole HTTP message (headers, then a Content-Length or chunked body) from fd into *msg.
bool ReadMessage(int fd, std::string* msg, bool no_body) {
  const size_t hlen = ReadHeaders(fd, msg);
  if (!hlen) return false;
  const std::string headers = msg->substr(0, hlen);
  char tmp[65536];
  if (no_body) return true;
  if (Header(headers, "transfer-encoding").find("chunked") != std::string::npos) {
    while (msg->find("\r\n0\r\n\r\n", hlen - 2) == std::string::npos) {
      const ssize_t r = ::recv(fd, tmp, sizeof(tmp), 0);
      if (r <= 0) return false;
      msg->append(tmp, static_cast<size_t>(r));
    }
    return true;
  }
  const std::string cl = Header(headers, "content-length");
  const size_t want = hlen + (cl.empty() ? 0 : std::stoull(cl));
  while (msg->size() < want) {
    const ssize_t r = ::recv(fd, tmp, sizeof(tmp), 0);
    if (r <= 0) return false;
    msg->append(tmp, static_cast<size_t>(r));
  }
  return true;
}

void Reset(int fd) {
  linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  ::close(fd);
}

}  // namespace

FaultProxy::FaultProxy(std::string upstream_host, int upstream_port, Rule rule)
    : host_(std::move(upstream_host)), upstream_port_(upstream_port), rule_(std::move(rule)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  ::listen(listen_fd_, 64);
  socklen_t len = sizeof(a);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const int c = ::accept(listen_fd_, nullptr, nullptr);
      if (c < 0) continue;
      {
        std::lock_guard<std::mutex> l(mu_);
        ++active_;
      }
      std::thread([this, c] {
        Serve(c);
        std::lock_guard<std::mutex> l(mu_);
        if (--active_ == 0) idle_.notify_all();
      }).detach();
    }
  });
}

FaultProxy::~FaultProxy() {
  stop_ = true;
  acceptor_.join();
  ::close(listen_fd_);
  std::unique_lock<std::mutex> l(mu_);
  idle_.wait(l, [this] { return active_ == 0; });
}

std::vector<std::string> FaultProxy::lines() {
  std::lock_guard<std::mutex> l(mu_);
  return lines_;
}

void FaultProxy::Serve(int client) {
  std::string req;
  if (!ReadMessage(client, &req, false)) {
    ::close(client);
    return;
  }
  const std::string line = req.substr(0, req.find("\r\n"));
  const int index = requests_++;
  {
    std::lock_guard<std::mutex> l(mu_);
    lines_.push_back(line);
  }
  const Action act = rule_(line, index);
  if (act == Action::k503) {
    const std::string body =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code><Message>Please reduce your request "
        "rate.</Message></Error>";
    const std::string resp = "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nx-amz-request-id: fault-" +
                             std::to_string(index) + "\r\nContent-Length: " + std::to_string(body.size()) +
                             "\r\nConnection: close\r\n\r\n" + body;
    SendAll(client, resp.data(), resp.size());
    ::close(client);
    return;
  }
  if (act == Action::kReset) {
    Reset(client);
    return;
  }
  const int up = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(upstream_port_));
  ::inet_pton(AF_INET, host_.c_str(), &a.sin_addr);
  if (::connect(up, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || !SendAll(up, req.data(), req.size())) {
    ::close(up);
    Reset(client);
    return;
  }
  std::string resp;
  const bool head = line.rfind("HEAD ", 0) == 0;
  const bool got = ReadMessage(up, &resp, head);
  ::close(up);
  if (!got) {
    Reset(client);
    return;
  }
  switch (act) {
    case Action::kTruncate: {
      const size_t hlen = resp.find("\r\n\r\n") + 4;
      const size_t keep = hlen + (resp.size() - hlen) / 2;
      SendAll(client, resp.data(), keep);
      Reset(client);
      return;
    }
    case Action::kStall: {
      // Hold the answer until the client gives up (it closes: poll sees POLLIN/HUP with no data).
      pollfd p{client, POLLIN, 0};
      for (int waited = 0; waited < 120 && !stop_; ++waited) {
        if (::poll(&p, 1, 1000) > 0) break;
      }
      ::close(client);
      return;
    }
    case Action::kDropResponse:
      Reset(client);
      return;
    default:
      SendAll(client, resp.data(), resp.size());
      ::close(client);
  }
}

}  // namespace anneal
