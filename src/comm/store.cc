#include "comm/store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/env.h"

namespace anneal {

namespace {

using std::chrono::milliseconds;

// Wire protocol (one request, one response, in order, per connection; integers little-endian):
//   request:  op u8 | key_len u32 | key | value_len u32 | value | arg i64
//   response: status u8 (0 ok, 1 absent or timed out, 2 unknown op, 3 an Add past int64) | len u32 | data
enum Op : uint8_t { kSet = 1, kGet = 2, kTryGet = 3, kAdd = 4 };

std::string Errno() { return std::strerror(errno); }

bool WriteAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = ::recv(fd, c, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Whether the peer of a connection has closed it (or its writing half): nothing more can come.
bool PeerGone(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

void PutU32(std::string* s, uint32_t v) { s->append(reinterpret_cast<const char*>(&v), 4); }

// A length-prefixed string of at most 64 MiB, read in pieces as they arrive: a peer that only claims
// a long string gets no memory for it.
bool ReadString(int fd, std::string* s) {
  uint32_t n;
  if (!ReadAll(fd, &n, 4) || n > (64u << 20)) return false;
  s->clear();
  while (s->size() < n) {
    const size_t have = s->size(), piece = std::min<size_t>(n - have, 64 << 10);
    s->resize(have + piece);
    if (!ReadAll(fd, s->data() + have, piece)) return false;
  }
  return true;
}

Result<sockaddr_in> Resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res) {
    return InvalidInput("cannot resolve host '" + host + "': " + gai_strerror(rc) + "; give an IPv4 address or a resolvable name");
  }
  sockaddr_in a = *reinterpret_cast<sockaddr_in*>(res->ai_addr);
  ::freeaddrinfo(res);
  a.sin_port = htons(static_cast<uint16_t>(port));
  return a;
}

// ---- server ----

class TcpStoreServerImpl : public TcpStoreServer {
  struct Conn {
    int fd = -1;
    std::thread thread;
    bool done = false;  // Serve returned (under mu_)
  };

 public:
  TcpStoreServerImpl(int listen_fd, int port) : listen_fd_(listen_fd), port_(port) {
    if (::pipe(stop_pipe_) != 0) stop_pipe_[0] = stop_pipe_[1] = -1;
    accept_thread_ = std::thread([this] { AcceptLoop(); });
  }
  ~TcpStoreServerImpl() override {
    stopping_ = true;
    if (stop_pipe_[1] >= 0) (void)!::write(stop_pipe_[1], "x", 1);
    accept_thread_.join();
    {
      std::lock_guard<std::mutex> l(mu_);
      for (Conn& c : conns_) ::shutdown(c.fd, SHUT_RDWR);
      cv_.notify_all();
    }
    for (Conn& c : conns_) c.thread.join();
    for (Conn& c : conns_) ::close(c.fd);
    ::close(listen_fd_);
    if (stop_pipe_[0] >= 0) ::close(stop_pipe_[0]), ::close(stop_pipe_[1]);
  }
  int port() const override { return port_; }

 private:
  void AcceptLoop() {
    while (!stopping_) {
      pollfd p[2] = {{listen_fd_, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
      if (::poll(p, 2, 1000) <= 0) continue;
      if (p[1].revents) break;
      int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      std::lock_guard<std::mutex> l(mu_);
      ReapLocked();
      Conn& c = conns_.emplace_back();
      c.fd = fd;
      c.thread = std::thread([this, &c] { Serve(c); });
    }
  }

  // Joins and closes the connections whose peer left: a long-lived store (a job's launcher) that
  // many clients reach keeps no thread or descriptor of the ones gone.
  void ReapLocked() {
    for (auto it = conns_.begin(); it != conns_.end();) {
      if (!it->done) {
        ++it;
        continue;
      }
      it->thread.join();  // it has set done as its last step
      ::close(it->fd);
      it = conns_.erase(it);
    }
  }

  void Serve(Conn& c) {
    const int fd = c.fd;
    for (;;) {
      uint8_t op;
      std::string key, value;
      int64_t arg;
      if (!ReadAll(fd, &op, 1) || !ReadString(fd, &key) || !ReadString(fd, &value) || !ReadAll(fd, &arg, 8)) break;
      uint8_t status = 0;
      std::string out;
      {
        std::unique_lock<std::mutex> l(mu_);
        switch (op) {
          case kSet:
            kv_[key] = value;
            cv_.notify_all();
            break;
          case kGet: {
            // In slices of at most 0.2 s, so a waiter whose client left (a killed rank, a scanner)
            // ends then instead of at its deadline.
            const double deadline = MonotonicSeconds() + arg / 1000.0;
            for (double left; !stopping_ && !kv_.count(key) && (left = deadline - MonotonicSeconds()) > 0;) {
              if (PeerGone(fd)) break;
              Clock::Real().WaitFor(cv_, l, std::min(left, 0.2));
            }
            auto it = kv_.find(key);
            if (it == kv_.end()) status = 1; else out = it->second;
            break;
          }
          case kTryGet: {
            auto it = kv_.find(key);
            if (it == kv_.end()) status = 1; else out = it->second;
            break;
          }
          case kAdd: {
            auto it = kv_.find(key);
            const int64_t was = it == kv_.end() ? 0 : std::strtoll(it->second.c_str(), nullptr, 10);
            int64_t v;
            if (__builtin_add_overflow(was, arg, &v)) {  // a sum past int64: refused, the key kept
              status = 3;
              break;
            }
            kv_[key] = out = std::to_string(v);
            cv_.notify_all();
            break;
          }
          default:
            status = 2;
        }
      }
      std::string resp(1, static_cast<char>(status));
      PutU32(&resp, static_cast<uint32_t>(out.size()));
      resp += out;
      if (!WriteAll(fd, resp.data(), resp.size())) break;
    }
    ::shutdown(fd, SHUT_RDWR);
    std::lock_guard<std::mutex> l(mu_);
    c.done = true;
  }

  int listen_fd_, port_;
  int stop_pipe_[2] = {-1, -1};
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> kv_;
  std::list<Conn> conns_;  // stable addresses: each thread holds its own
};

// ---- TCP client ----

class TcpStoreClient : public Store {
 public:
  TcpStoreClient(int fd, std::string where) : fd_(fd), where_(std::move(where)) {}
  ~TcpStoreClient() override { ::close(fd_); }

  Status Set(const std::string& k, const std::string& v) override {
    std::string out;
    bool present;
    return Call(kSet, k, v, 0, milliseconds(0), &out, &present);
  }
  Result<std::string> Get(const std::string& k, milliseconds timeout) override {
    std::string out;
    bool present;
    ANNEAL_RETURN_IF_ERROR(Call(kGet, k, "", timeout.count(), timeout, &out, &present));
    if (!present) {
      return PeerError("key '" + k + "' did not appear in " + Describe() + " within " +
                       std::to_string(timeout.count() / 1000.0).substr(0, 5) +
                       " s: a peer rank or node never arrived (it failed to start, or was started with another job or attempt)");
    }
    return out;
  }
  Result<std::optional<std::string>> TryGet(const std::string& k) override {
    std::string out;
    bool present;
    ANNEAL_RETURN_IF_ERROR(Call(kTryGet, k, "", 0, milliseconds(0), &out, &present));
    return present ? std::optional<std::string>(out) : std::nullopt;
  }
  Result<int64_t> Add(const std::string& k, int64_t d) override {
    std::string out;
    bool present;
    ANNEAL_RETURN_IF_ERROR(Call(kAdd, k, "", d, milliseconds(0), &out, &present));
    return static_cast<int64_t>(std::strtoll(out.c_str(), nullptr, 10));
  }
  std::string Describe() const override { return "the rendezvous store at " + where_; }

 private:
  // A reply must come within the server-side wait plus kSlack, or the store is unreachable.
  static constexpr milliseconds kSlack{5000};

  Status Call(uint8_t op, const std::string& k, const std::string& v, int64_t arg, milliseconds wait,
              std::string* out, bool* present) {
    std::lock_guard<std::mutex> l(mu_);
    if (broken_) return PeerError(Describe() + " is unreachable (an earlier request failed)");
    std::string req(1, static_cast<char>(op));
    PutU32(&req, static_cast<uint32_t>(k.size()));
    req += k;
    PutU32(&req, static_cast<uint32_t>(v.size()));
    req += v;
    req.append(reinterpret_cast<const char*>(&arg), 8);
    const milliseconds limit = wait + kSlack;
    timeval tv{static_cast<time_t>(limit.count() / 1000), static_cast<suseconds_t>((limit.count() % 1000) * 1000)};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    uint8_t status;
    if (!WriteAll(fd_, req.data(), req.size()) || !ReadAll(fd_, &status, 1) || !ReadString(fd_, out)) {
      broken_ = true;
      return PeerError(Describe() + " is unreachable (" +
                       (errno == EAGAIN || errno == EWOULDBLOCK ? std::string("no reply within ") +
                                                                      std::to_string(limit.count() / 1000) + " s"
                                                                : Errno()) +
                       "): node 0's launcher died or the network to it is cut");
    }
    if (status == 2) return Internal(Describe() + " rejected a request (protocol mismatch between anneal versions?)");
    if (status == 3) {
      return InvalidInput(Describe() + " refused to add " + std::to_string(arg) + " to '" + k +
                          "': the sum would pass the int64 range (the key keeps its value)");
    }
    *present = status == 0;
    return Status::Ok();
  }

  int fd_;
  std::string where_;
  std::mutex mu_;
  bool broken_ = false;
};

// ---- file store ----

class FileStore : public Store {
 public:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {}
  Status Set(const std::string& k, const std::string& v) override {
    return Env::Default().WriteFileAtomic(PathOf(k), v);
  }
  Result<std::string> Get(const std::string& k, milliseconds timeout) override {
    const double deadline = MonotonicSeconds() + std::chrono::duration<double>(timeout).count();
    for (;;) {
      ANNEAL_ASSIGN_OR_RETURN(auto v, TryGet(k));
      if (v) return *v;
      if (MonotonicSeconds() >= deadline) {
        return PeerError("key '" + k + "' did not appear in " + Describe() + " within " +
                         std::to_string(timeout.count() / 1000) + " s: a peer rank never arrived");
      }
      Clock::Real().SleepFor(0.01);
    }
  }
  Result<std::optional<std::string>> TryGet(const std::string& k) override {
    const std::string p = PathOf(k);
    if (!Env::Default().Exists(p)) return std::optional<std::string>();
    ANNEAL_ASSIGN_OR_RETURN(std::string v, Env::Default().ReadFile(p));
    return std::optional<std::string>(std::move(v));
  }
  Result<int64_t> Add(const std::string& k, int64_t d) override {
    const std::string lock = JoinPath(dir_, ".lock");
    int fd = ::open(lock.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd < 0) return PeerError(Describe() + ": cannot open " + lock + ": " + Errno());
    ::flock(fd, LOCK_EX);
    auto cur = TryGet(k);
    Result<int64_t> r = IoError("");
    if (!cur.ok()) {
      r = cur.status();
    } else {
      int64_t v = (*cur ? std::strtoll((*cur)->c_str(), nullptr, 10) : 0) + d;
      Status s = Set(k, std::to_string(v));
      r = s.ok() ? Result<int64_t>(v) : Result<int64_t>(s);
    }
    ::flock(fd, LOCK_UN);
    ::close(fd);
    return r;
  }
  std::string Describe() const override { return "the file store in " + dir_; }

 private:
  std::string PathOf(const std::string& k) const {
    std::string name;
    for (char c : k) {
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') {
        name += c;
      } else {
        char buf[4];
        std::snprintf(buf, sizeof(buf), "%%%02X", static_cast<unsigned char>(c));
        name += buf;
      }
    }
    return JoinPath(dir_, name);
  }
  std::string dir_;
};

}  // namespace

Result<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(const std::string& bind_addr, int port) {
  ANNEAL_ASSIGN_OR_RETURN(sockaddr_in a, Resolve(bind_addr, port));
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return IoError("socket: " + Errno());
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd, 256) != 0) {
    std::string e = Errno();
    ::close(fd);
    return InvalidInput("cannot serve the rendezvous store on " + bind_addr + ":" + std::to_string(port) + ": " + e +
                        "; choose another --store-port (or --store-bind address)");
  }
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return std::unique_ptr<TcpStoreServer>(new TcpStoreServerImpl(fd, ntohs(a.sin_port)));
}

Result<std::unique_ptr<Store>> ConnectTcpStore(const std::string& host, int port, milliseconds connect_timeout) {
  ANNEAL_ASSIGN_OR_RETURN(sockaddr_in a, Resolve(host, port));
  const std::string where = host + ":" + std::to_string(port);
  const double deadline = MonotonicSeconds() + std::chrono::duration<double>(connect_timeout).count();
  std::string last;
  for (;;) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return IoError("socket: " + Errno());
    timeval tv{2, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));  // bounds connect() on a dead link
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return std::unique_ptr<Store>(new TcpStoreClient(fd, where));
    }
    last = Errno();
    ::close(fd);
    if (MonotonicSeconds() >= deadline) {
      return PeerError("cannot reach the rendezvous store at " + where + " within " +
                       std::to_string(connect_timeout.count() / 1000) + " s (" + last +
                       "): is node 0's `anneal launch` running, and is ANNEAL_STORE (or --master-addr) an address "
                       "this machine can reach?");
    }
    Clock::Real().SleepFor(0.1);
  }
}

Result<std::unique_ptr<Store>> OpenFileStore(const std::string& dir) {
  ANNEAL_RETURN_IF_ERROR(Env::Default().CreateDirs(dir));
  return std::unique_ptr<Store>(new FileStore(dir));
}

Result<std::unique_ptr<Store>> OpenStore(const std::string& spec, milliseconds connect_timeout) {
  if (spec.rfind("file://", 0) == 0) return OpenFileStore(spec.substr(7));
  const size_t colon = spec.rfind(':');
  int port = colon == std::string::npos ? -1 : std::atoi(spec.c_str() + colon + 1);
  if (port <= 0 || port > 65535) {
    return InvalidInput("store address '" + spec + "' must be host:port or file:///shared/folder (ANNEAL_STORE)");
  }
  return ConnectTcpStore(spec.substr(0, colon), port, connect_timeout);
}

Result<std::string> LocalAddressToward(const std::string& host) {
  ANNEAL_ASSIGN_OR_RETURN(sockaddr_in a, Resolve(host, 9));
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return IoError("socket: " + Errno());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    std::string e = Errno();
    ::close(fd);
    return PeerError("no route to " + host + ": " + e);
  }
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len);
  ::close(fd);
  char buf[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &local.sin_addr, buf, sizeof(buf));
  return std::string(buf);
}

}  // namespace anneal
