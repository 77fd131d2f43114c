// ConnectionGuard: what one connection and one client address may hold on `anneal server`'s
// listener (docs/security.md "Limits"):
//   - open connections per client address: an accepted socket past max_per_client from its peer's
//     address is closed at once, unanswered, so one client cannot take every worker thread;
//   - request headers: each connection must deliver them within header_timeout_s, counted from its
//     accept and again from the end of each answered request (keep-alive). A watchdog thread shuts a
//     late connection down, which fails cpp-httplib's blocked read and frees its worker (a client
//     sending one header byte every few seconds otherwise holds it for good: cpp-httplib's read
//     timeout counts per read).
// GuardedHttp<httplib::Server or httplib::SSLServer> hands each accepted socket to Serve.
// cpp-httplib serves a connection wholly on one worker thread (process_and_close_socket, then every
// request's handlers and its logger), so HeadersReceived, Answered and CloseAfterAnswer, called from
// the pre-routing handler and the logger, find their connection in a thread_local.
// Thread-safety: every method from any thread.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "control/prometheus_text.h"

namespace anneal {

class ConnectionGuard {
 public:
  struct Options {
    double header_timeout_s = 10;  // --header-timeout-s
    int max_per_client = 32;       // --max-connections-per-client
    double tick_s = 0.1;           // the watchdog's period: a late connection ends within this after its deadline
  };
  struct Counts {
    int64_t open = 0;             // connections being served now
    int64_t refused = 0;          // closed at accept: their address held max_per_client already
    int64_t header_timeouts = 0;  // shut down: their headers were late
  };

  explicit ConnectionGuard(const Options& o);
  ~ConnectionGuard() { Stop(); }
  ConnectionGuard(const ConnectionGuard&) = delete;
  ConnectionGuard& operator=(const ConnectionGuard&) = delete;

  // Serves one accepted socket with `serve` (cpp-httplib's own process_and_close_socket, which
  // closes it), or closes it at once when its address is at the cap.
  bool Serve(socket_t sock, const std::function<bool(socket_t)>& serve);

  // The calling thread's connection (no-ops on a thread that serves none):
  static void HeadersReceived();   // its request's headers are in: no deadline while it is served
  static void Answered();          // its answer is written: the next request's headers are due
  static void CloseAfterAnswer();  // Answered ends the connection (a refused body was never read)

  Counts counts() const;
  // anneal_http_connections_refused_total, anneal_http_header_timeouts_total (for /metrics).
  void Write(PromText* t) const;
  // Ends the watchdog (after the listener stopped: a connection still served then has no deadline).
  void Stop();

 private:
  struct Conn;
  static thread_local Conn* current_;  // the connection this worker thread serves
  bool Admit(Conn* c, socket_t sock);
  void Release(Conn* c);
  void Watch();
  void ShutDownLate(double now);
  void LogNews(double now);

  const Options o_;
  mutable std::mutex mu_;
  std::condition_variable cv_;  // Stop
  bool stopped_ = false;
  std::set<Conn*> conns_;
  std::map<std::string, int> per_client_;  // peer address -> open connections
  Counts counts_;
  Counts logged_;        // what the last warning line reported
  double logged_at_ = 0;  // when (monotonic)
  std::thread watchdog_;
};

// cpp-httplib's own process_and_close_socket of each class. cpp-httplib 0.11 declares it private: a
// subclass may override it but not name the base's version, so these call it by its symbol.
bool ServeHttp(httplib::Server* s, socket_t sock);
bool ServeHttps(httplib::SSLServer* s, socket_t sock);
inline bool ServeBase(httplib::Server* s, socket_t sock) { return ServeHttp(s, sock); }
inline bool ServeBase(httplib::SSLServer* s, socket_t sock) { return ServeHttps(s, sock); }

// An httplib::Server or httplib::SSLServer whose accepted sockets go through a ConnectionGuard.
template <class Base>
class GuardedHttp : public Base {
 public:
  template <class... Args>
  explicit GuardedHttp(ConnectionGuard* guard, Args&&... args) : Base(std::forward<Args>(args)...), guard_(guard) {}

 private:
  bool process_and_close_socket(socket_t sock) override {
    return guard_->Serve(sock, [this](socket_t s) { return ServeBase(static_cast<Base*>(this), s); });
  }

  ConnectionGuard* guard_;
};

}  // namespace anneal
