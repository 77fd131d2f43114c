// ObjectStore: where datasets and checkpoints live (DESIGN.md src/storage) — keys in a flat
// namespace, whole-object writes that readers see entirely or not at all, range reads, listing by
// prefix in key order with pagination. Backends: file:// here (a folder; keys map to paths below it);
// s3:// (SigV4 over libcurl, storage/sigv4.h) comes with the storage issue, behind this interface.
// FaultObjectStore wraps any store for tests of the layers above (fail the Nth operation of a kind).
//
// Keys: non-empty, no leading '/', no "." or ".." path components, no NUL (InvalidInput otherwise).
// Errors: a missing object is NotFound; a store that fails is IoError (file) or PeerError (remote).
// Thread-safety: backends may be called from several threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/env.h"
#include "core/status.h"

namespace anneal {

struct ObjectInfo {
  std::string key;
  uint64_t size = 0;
  std::string etag;  // changes whenever the object is rewritten
};

struct ListPage {
  std::vector<ObjectInfo> objects;  // in key order
  std::string next;                 // continuation token; empty on the last page
};

class ObjectStore {
 public:
  static constexpr uint64_t kToEnd = UINT64_MAX;
  virtual ~ObjectStore() = default;
  // The object's bytes [offset, offset + length) (clipped at its end); the whole object by default.
  virtual Result<std::string> Get(const std::string& key, uint64_t offset = 0, uint64_t length = kToEnd) = 0;
  // The same, only while the object's ETag is still `etag` (Head's): an object rewritten during a
  // streaming read is a PeerError saying so, never a mix of two versions. The default checks with
  // Head first (backends with conditional reads do it in the same request).
  virtual Result<std::string> GetIfMatch(const std::string& key, const std::string& etag, uint64_t offset = 0,
                                         uint64_t length = kToEnd);
  // Writes the whole object: readers see the old object or the new one, never a part.
  virtual Status Put(const std::string& key, std::string_view data) = 0;
  // nullopt when there is no such object.
  virtual Result<std::optional<ObjectInfo>> Head(const std::string& key) = 0;
  // Keys starting with prefix, after the continuation token, at most max_keys (>= 1).
  virtual Result<ListPage> List(const std::string& prefix, const std::string& continuation, int max_keys) = 0;
  // Removes the object; a missing one is not an error (as in S3).
  virtual Status Delete(const std::string& key) = 0;
  // "file:///data/ckpt" — for messages.
  virtual std::string Describe() const = 0;

  // Every key under prefix (all pages).
  Result<std::vector<ObjectInfo>> ListAll(const std::string& prefix);
};

// "file:///abs/dir" (or a plain path): a store in that folder (created if missing); "s3://bucket/prefix":
// the S3 backend (storage/s3_object_store.cc). Anything else is InvalidInput naming the schemes.
// Further URI schemes: OpenObjectStore hands "<scheme>://..." to the factory registered for the
// scheme. The test build registers a fault-injecting store this way (tests/testing/fault_store.cc);
// production code registers none.
using ObjectStoreFactory = std::function<Result<std::unique_ptr<ObjectStore>>(const std::string& uri, Env& env)>;
void RegisterObjectStoreScheme(const std::string& scheme, ObjectStoreFactory factory);

// Storage settings given explicitly, ahead of the process environment (storage/aws_config.h's
// variables: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, ...): an execution role's
// credentials for one job's storage calls, while other threads of the process serve other jobs.
using StorageVars = std::map<std::string, std::string>;

Result<std::unique_ptr<ObjectStore>> OpenObjectStore(const std::string& uri, Env& env = Env::Default(),
                                                     const StorageVars& vars = {});
// clock: the retries' backoff sleeps and their time budget.
Result<std::unique_ptr<ObjectStore>> OpenS3ObjectStore(const std::string& uri, const StorageVars& vars = {},
                                                       Clock& clock = Clock::Real());

// A key is valid (see above); the error names the key and the rule.
Status ValidateKey(const std::string& key);

// Test double: forwards to `base` (not owned) but fails chosen operations.
class FaultObjectStore : public ObjectStore {
 public:
  enum class Op { kGet, kPut, kHead, kList, kDelete };
  explicit FaultObjectStore(ObjectStore* base) : base_(base) {}
  // The nth (1-based) call of op from now on returns `error` instead of reaching the store.
  void FailNth(Op op, int nth, Status error);
  int calls(Op op) const { return calls_[static_cast<int>(op)]; }

  Result<std::string> Get(const std::string& key, uint64_t offset, uint64_t length) override;
  Status Put(const std::string& key, std::string_view data) override;
  Result<std::optional<ObjectInfo>> Head(const std::string& key) override;
  Result<ListPage> List(const std::string& prefix, const std::string& continuation, int max_keys) override;
  Status Delete(const std::string& key) override;
  std::string Describe() const override { return "fault-injecting " + base_->Describe(); }

 private:
  Status Check(Op op);
  ObjectStore* base_;
  int calls_[5] = {0, 0, 0, 0, 0};
  struct Planned {
    Op op;
    int at;  // absolute call number
    Status error;
  };
  std::vector<Planned> planned_;
};

}  // namespace anneal
