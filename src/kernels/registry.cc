#include "kernels/registry.h"

#include <algorithm>
#include <mutex>

#include "kernels/host_backend.h"
#if defined(ANNEAL_WITH_CUDA_KERNELS)
#include "kernels/cuda/cuda_backend.h"
#endif

namespace anneal {

namespace {
struct Registry {
  std::mutex mu;
  std::vector<std::unique_ptr<Backend>> owned;
  std::vector<Backend*> order;  // lookups go newest first, so a registration replaces a name
  bool cuda_tried = false;      // "cuda" is made on first use (a CUDA context costs time and memory)
  std::string cuda_why = "this build has no CUDA kernels (nvcc was not found when it was built)";
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

// The CUDA backend, made once on the first lookup of "cuda" (r.mu held).
void TryCuda(Registry& r) {
  if (r.cuda_tried) return;
  r.cuda_tried = true;
#if defined(ANNEAL_WITH_CUDA_KERNELS)
  std::unique_ptr<Backend> b = MakeCudaBackend(0, &r.cuda_why);
  if (b) {
    r.order.push_back(b.get());
    r.owned.push_back(std::move(b));
  }
#endif
}

Backend* BackendByName(const std::string& name, std::string* why) {
  Registry& r = Reg();
  std::lock_guard<std::mutex> l(r.mu);
  if (name == "cuda") TryCuda(r);
  for (auto it = r.order.rbegin(); it != r.order.rend(); ++it) {
    if ((*it)->name() == name) return *it;
  }
  if (why) *why = name == "cuda" ? r.cuda_why : "no backend named " + name;
  return nullptr;
}

bool CudaDevicePresent() {
#if defined(ANNEAL_WITH_CUDA_KERNELS)
  return CudaDeviceCount() > 0;
#else
  return false;
#endif
}

std::vector<std::string> BackendNames() {
  Registry& r = Reg();
  std::lock_guard<std::mutex> l(r.mu);
  std::vector<std::string> v;
  if (!r.cuda_tried && CudaDevicePresent()) TryCuda(r);
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
