#include "control/connection_guard.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>

#include "core/clock.h"

// The base classes' process_and_close_socket, by their symbols in libcpp-httplib.so (a member
// function's `this` is its first argument in the Itanium C++ ABI). The link fails if a cpp-httplib
// without them is used: a header-only build, or one whose signature changed.
extern "C++" bool HttplibServerProcessAndClose(httplib::Server* s, socket_t sock) __asm__(
    "_ZN7httplib6Server24process_and_close_socketEi");
extern "C++" bool HttplibSslServerProcessAndClose(httplib::SSLServer* s, socket_t sock) __asm__(
    "_ZN7httplib9SSLServer24process_and_close_socketEi");

namespace anneal {

bool ServeHttp(httplib::Server* s, socket_t sock) { return HttplibServerProcessAndClose(s, sock); }
bool ServeHttps(httplib::SSLServer* s, socket_t sock) { return HttplibSslServerProcessAndClose(s, sock); }

struct ConnectionGuard::Conn {
  ConnectionGuard* guard;
  std::string peer;
  // A duplicate of the socket's descriptor, closed only after cpp-httplib closed its own: the
  // watchdog's shutdown() reaches this connection's socket, never a newer one given the same number.
  int watch_fd = -1;
  double deadline = 0;  // monotonic; 0 while a request is being served
  bool close_after_answer = false;
};

thread_local ConnectionGuard::Conn* ConnectionGuard::current_ = nullptr;

namespace {

// The peer's address without its port; an IPv4-mapped IPv6 address as plain IPv4, so a client
// counts once whichever way it reached a dual-stack listener.
std::string PeerAddress(socket_t sock) {
  sockaddr_storage a{};
  socklen_t n = sizeof(a);
  if (::getpeername(sock, reinterpret_cast<sockaddr*>(&a), &n) != 0) return "?";
  char buf[INET6_ADDRSTRLEN] = "?";
  if (a.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&a)->sin_addr, buf, sizeof(buf));
  } else if (a.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&a)->sin6_addr, buf, sizeof(buf));
  }
  std::string s = buf;
  return s.rfind("::ffff:", 0) == 0 && s.find('.') != std::string::npos ? s.substr(7) : s;
}

}  // namespace

ConnectionGuard::ConnectionGuard(const Options& o) : o_(o) {
  watchdog_ = std::thread([this] { Watch(); });
}

bool ConnectionGuard::Serve(socket_t sock, const std::function<bool(socket_t)>& serve) {
  Conn c;
  c.guard = this;
  c.peer = PeerAddress(sock);
  if (!Admit(&c, sock)) {
    // Closed unread (a reset when its first bytes have arrived): the client learns at once.
    ::close(sock);
    return false;
  }
  // Left however serve ends: the watchdog must never see this frame's Conn after it.
  struct Leave {
    ConnectionGuard* g;
    Conn* c;
    ~Leave() {
      current_ = nullptr;
      g->Release(c);
    }
  } leave{this, &c};
  current_ = &c;
  return serve(sock);
}

bool ConnectionGuard::Admit(Conn* c, socket_t sock) {
  std::lock_guard<std::mutex> l(mu_);
  int& held = per_client_[c->peer];
  // At the cap: refused. Also when the duplicate cannot be made: the process is out of
  // descriptors, and accept() would fail next anyway.
  if (held < o_.max_per_client) c->watch_fd = ::fcntl(sock, F_DUPFD_CLOEXEC, 0);
  if (c->watch_fd < 0) {
    if (held == 0) per_client_.erase(c->peer);
    ++counts_.refused;
    return false;
  }
  ++held;
  ++counts_.open;
  c->deadline = MonotonicSeconds() + o_.header_timeout_s;
  conns_.insert(c);
  return true;
}

void ConnectionGuard::Release(Conn* c) {
  std::lock_guard<std::mutex> l(mu_);
  conns_.erase(c);
  --counts_.open;
  auto it = per_client_.find(c->peer);
  if (it != per_client_.end() && --it->second <= 0) per_client_.erase(it);
  ::close(c->watch_fd);
}

void ConnectionGuard::HeadersReceived() {
  Conn* c = current_;
  if (!c) return;
  std::lock_guard<std::mutex> l(c->guard->mu_);
  c->deadline = 0;
}

void ConnectionGuard::Answered() {
  Conn* c = current_;
  if (!c) return;
  std::lock_guard<std::mutex> l(c->guard->mu_);
  if (c->close_after_answer) {
    // The answer is in the socket's send queue; the FIN follows it, and cpp-httplib's next read
    // sees the end and closes.
    ::shutdown(c->watch_fd, SHUT_RDWR);
    c->deadline = 0;
    return;
  }
  c->deadline = MonotonicSeconds() + c->guard->o_.header_timeout_s;
}

void ConnectionGuard::CloseAfterAnswer() {
  Conn* c = current_;
  if (!c) return;
  std::lock_guard<std::mutex> l(c->guard->mu_);
  c->close_after_answer = true;
}

ConnectionGuard::Counts ConnectionGuard::counts() const {
  std::lock_guard<std::mutex> l(mu_);
  return counts_;
}

void ConnectionGuard::Write(PromText* t) const {
  const Counts n = counts();
  t->Family("anneal_http_connections_refused_total", "counter",
            "Connections closed at accept: their client address held --max-connections-per-client already");
  t->Sample("anneal_http_connections_refused_total", {}, static_cast<double>(n.refused));
  t->Family("anneal_http_header_timeouts_total", "counter",
            "Connections closed because their request headers took longer than --header-timeout-s");
  t->Sample("anneal_http_header_timeouts_total", {}, static_cast<double>(n.header_timeouts));
}

void ConnectionGuard::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopped_ = true;
  }
  cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

void ConnectionGuard::Watch() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stopped_) {
    cv_.wait_for(l, std::chrono::duration<double>(o_.tick_s));
    const double now = MonotonicSeconds();
    ShutDownLate(now);
    l.unlock();
    LogNews(now);
    l.lock();
  }
}

// Under mu_.
void ConnectionGuard::ShutDownLate(double now) {
  for (Conn* c : conns_) {
    if (c->deadline <= 0 || now < c->deadline) continue;
    ::shutdown(c->watch_fd, SHUT_RDWR);
    c->deadline = 0;
    ++counts_.header_timeouts;
  }
}

// A warning for refusals and timeouts since the last one, at most one line every 10 s.
void ConnectionGuard::LogNews(double now) {
  Counts n, was;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (counts_.refused == logged_.refused && counts_.header_timeouts == logged_.header_timeouts) return;
    if (logged_at_ > 0 && now - logged_at_ < 10) return;
    n = counts_;
    was = logged_;
    logged_ = counts_;
    logged_at_ = now;
  }
  std::fprintf(stderr,
               "anneal server: warning: %lld connection(s) refused (their address held %d, "
               "--max-connections-per-client) and %lld closed for late request headers (over %g s, "
               "--header-timeout-s) since the last warning\n",
               static_cast<long long>(n.refused - was.refused), o_.max_per_client,
               static_cast<long long>(n.header_timeouts - was.header_timeouts), o_.header_timeout_s);
}

}  // namespace anneal
