// The test build's fault-injecting object store (linked into anneal_faults, the anneal binary of the
// tests; production code has no such hook): the URI scheme
//   fault:///folder?kill_before=KEY
// is the folder file:///folder, except that the Put of KEY never happens: the process kills itself
// with SIGKILL first, like `kill -9` at that moment. tests/e2e/resume_test.sh uses it to die between
// a checkpoint's shard files and its manifest, the moment a torn checkpoint is most tempting to trust.
#include <csignal>
#include <memory>
#include <string>

#include "storage/object_store.h"

namespace anneal {
namespace {

class KillingStore : public ObjectStore {
 public:
  KillingStore(std::unique_ptr<ObjectStore> inner, std::string kill_key)
      : inner_(std::move(inner)), kill_key_(std::move(kill_key)) {}
  Result<std::string> Get(const std::string& key, uint64_t offset, uint64_t length) override {
    return inner_->Get(key, offset, length);
  }
  Result<std::string> GetIfMatch(const std::string& key, const std::string& etag, uint64_t offset,
                                 uint64_t length) override {
    return inner_->GetIfMatch(key, etag, offset, length);
  }
  Status Put(const std::string& key, std::string_view data) override {
    if (key == kill_key_) ::raise(SIGKILL);
    return inner_->Put(key, data);
  }
  Result<std::optional<ObjectInfo>> Head(const std::string& key) override { return inner_->Head(key); }
  Result<ListPage> List(const std::string& prefix, const std::string& continuation, int max_keys) override {
    return inner_->List(prefix, continuation, max_keys);
  }
  Status Delete(const std::string& key) override { return inner_->Delete(key); }
  std::string Describe() const override { return inner_->Describe() + " (killing itself before " + kill_key_ + ")"; }

 private:
  std::unique_ptr<ObjectStore> inner_;
  std::string kill_key_;
};

Result<std::unique_ptr<ObjectStore>> OpenKillingStore(const std::string& uri, Env& env) {
  const std::string rest = uri.substr(std::string("fault://").size());
  const size_t q = rest.find("?kill_before=");
  if (q == std::string::npos) return InvalidInput("fault store URI '" + uri + "' needs ?kill_before=KEY");
  ANNEAL_ASSIGN_OR_RETURN(auto inner, OpenObjectStore("file://" + rest.substr(0, q), env));
  return std::unique_ptr<ObjectStore>(new KillingStore(std::move(inner), rest.substr(q + 13)));
}

const bool kRegistered = [] {
  RegisterObjectStoreScheme("fault", OpenKillingStore);
  return true;
}();

}  // namespace
}  // namespace anneal
