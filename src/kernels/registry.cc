#include "kernels/registry.h"

#include <algorithm>
#include <mutex>

#include "kernels/host_backend.h"

namespace anneal {

namespace {
struct Registry {
  std::mutex mu;
  std::vector<std::unique_ptr<Backend>> owned;
  std::vector<Backend*> order;  // lookups go newest first, so a registration replaces a name
};
Registry& Reg() {
  static Registry* r = [] {
    auto* reg = new Registry;
    reg->owned.push_back(std::make_unique<HostBackend>("ref", RefKernels(), false, true));
    reg->owned.push_back(std::make_unique<HostBackend>("cpu", CpuKernels(), true, false));
    for (auto& b : reg->owned) reg->order.push_back(b.get());
    return reg;
  }();
  return *r;
}
}  // namespace

Backend* BackendByName(const std::string& name) {
  Registry& r = Reg();
  std::lock_guard<std::mutex> l(r.mu);
  for (auto it = r.order.rbegin(); it != r.order.rend(); ++it) {
    if ((*it)->name() == name) return *it;
  }
  return nullptr;
}

std::vector<std::string> BackendNames() {
  Registry& r = Reg();
  std::lock_guard<std::mutex> l(r.mu);
  std::vector<std::string> v;
  for (Backend* b : r.order) {
    if (std::find(v.begin(), v.end(), b->name()) == v.end()) v.push_back(b->name());
  }
  return v;
}

void RegisterBackend(std::unique_ptr<Backend> b) {
  Registry& r = Reg();
  std::lock_guard<std::mutex> l(r.mu);
  r.order.push_back(b.get());
  r.owned.push_back(std::move(b));
}

Backend& RefBackend() { return *BackendByName("ref"); }
Backend& CpuBackend() { return *BackendByName("cpu"); }

}  // namespace anneal
