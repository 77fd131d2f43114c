// FaultProxy: a TCP proxy on 127.0.0.1 in front of a real S3 server that misbehaves on the requests a
// rule picks — answers 503 SlowDown, resets the connection, truncates or stalls the response, or
// drops the response after the server acted on the request (the "lost answer" case). The S3
// backend's retries are tested through it against radosgw and s3rver (tests/storage/s3_faults.cc):
// real servers, real sockets, only the failures are made up.
//
// One connection carries one request (the S3 backend opens a connection per request). Thread-safe;
// each connection has its own detached thread (a soak's proxy serves thousands), and the destructor
// stops accepting and waits until every one has ended.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace anneal {

class FaultProxy {
 public:
  enum class Action {
    kForward,       // pass the request and the response through
    k503,           // answer 503 SlowDown without reaching the server
    kReset,         // read the request, then reset the connection (RST)
    kTruncate,      // forward; send the response's headers and half its body, then close
    kStall,         // forward; hold the response back until the client gives up
    kDropResponse,  // forward and let the server act; reset instead of answering
  };
  // Decides per request: its request line ("PUT /bucket/key?partNumber=2&uploadId=... HTTP/1.1")
  // and its 0-based index among all requests the proxy saw.
  using Rule = std::function<Action(const std::string& request_line, int index)>;

  FaultProxy(std::string upstream_host, int upstream_port, Rule rule);
  ~FaultProxy();
  int port() const { return port_; }
  int requests() const { return requests_; }
  // Request lines seen, in order.
  std::vector<std::string> lines();

 private:
  void Serve(int client);
  std::string host_;
  int upstream_port_, listen_fd_ = -1, port_ = 0;
  Rule rule_;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::condition_variable idle_;
  int active_ = 0;  // connection threads running (under mu_)
  std::vector<std::string> lines_;
};

}  // namespace anneal
