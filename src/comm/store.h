// Store: the rendezvous key-value store through which the ranks of a job find each other
// (DESIGN.md: ANNEAL_STORE). Backends:
//   - TCP: served by the launcher of node 0 on its own port (TcpStoreServer), reached by every rank
//     and launcher as "host:port" (MASTER_PORT stays free for the ranks' own use);
//   - a shared folder ("file:///path"): one file per key, for clusters with a shared file system
//     and no reachable node-0 port (or ranks started by mpirun/srun without a launcher).
// PrefixStore scopes keys (a job's attempt: "attempt/3/"), so a restarted group never reads the keys
// an earlier attempt left.
//
// Every call that can block takes a timeout; an unreachable store or a key that does not appear in
// time is a PeerError (exit 3) naming the store, the key and the timeout.
// Thread-safety: a Store may be used from several threads (calls are serialized per connection).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/status.h"

namespace anneal {

class Store {
 public:
  virtual ~Store() = default;
  virtual Status Set(const std::string& key, const std::string& value) = 0;
  // Waits until key exists (at most timeout) and returns its value.
  virtual Result<std::string> Get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // The value, or nullopt at once when the key is absent.
  virtual Result<std::optional<std::string>> TryGet(const std::string& key) = 0;
  // Atomically adds delta to the decimal integer at key (absent = 0); returns the new value.
  virtual Result<int64_t> Add(const std::string& key, int64_t delta) = 0;
  // "tcp store 10.0.0.1:29501" — for error messages.
  virtual std::string Describe() const = 0;
};

// Keys of `base` under "prefix" (base must outlive this).
class PrefixStore : public Store {
 public:
  PrefixStore(Store* base, std::string prefix) : base_(base), prefix_(std::move(prefix)) {}
  Status Set(const std::string& k, const std::string& v) override { return base_->Set(prefix_ + k, v); }
  Result<std::string> Get(const std::string& k, std::chrono::milliseconds t) override { return base_->Get(prefix_ + k, t); }
  Result<std::optional<std::string>> TryGet(const std::string& k) override { return base_->TryGet(prefix_ + k); }
  Result<int64_t> Add(const std::string& k, int64_t d) override { return base_->Add(prefix_ + k, d); }
  std::string Describe() const override { return base_->Describe() + " (keys under " + prefix_ + ")"; }

 private:
  Store* base_;
  std::string prefix_;
};

// A TCP store server: one thread accepting, one per connection; keys live in memory. Stops (closing
// every connection) when destroyed.
class TcpStoreServer {
 public:
  // bind_addr: an IPv4 address or host name ("0.0.0.0" for all); port 0 picks a free one.
  static Result<std::unique_ptr<TcpStoreServer>> Start(const std::string& bind_addr, int port);
  virtual ~TcpStoreServer() = default;
  virtual int port() const = 0;
};

// Connects to a TCP store, retrying until connect_timeout (the server may start later).
Result<std::unique_ptr<Store>> ConnectTcpStore(const std::string& host, int port,
                                               std::chrono::milliseconds connect_timeout);
// A store in a shared folder (created if missing).
Result<std::unique_ptr<Store>> OpenFileStore(const std::string& dir);
// "host:port" or "file:///path" (ANNEAL_STORE's syntax).
Result<std::unique_ptr<Store>> OpenStore(const std::string& spec, std::chrono::milliseconds connect_timeout);

// The local address of the interface that routes to host (what this machine is called by peers
// reached through it): found by connecting a UDP socket, which sends nothing.
Result<std::string> LocalAddressToward(const std::string& host);

}  // namespace anneal
