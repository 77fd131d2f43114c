#include "kernels/registry.h"

#include <algorithm>
#include <mutex>

#include "kernels/host_backend.h"
#if defined(ANNEAL_WITH_CUDA_KERNELS)
#include <dlfcn.h>
#include <unistd.h>

#include "kernels/cuda/plugin.h"
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
#ifndef ANNEAL_NO_BLAS  // the slim build has no OpenBLAS, so no optimized CPU kernels
    reg->owned.push_back(std::make_unique<HostBackend>("cpu", CpuKernels(), true, false));
#endif
    for (auto& b : reg->owned) reg->order.push_back(b.get());
    return reg;
  }();
  return *r;
}
}  // namespace

#if defined(ANNEAL_WITH_CUDA_KERNELS)
// The CUDA plugin (kernels/cuda/plugin.h), loaded once: next to the executable, in ../lib (the GPU
// bundle) or ../src (the tests of a build tree), else wherever the dynamic loader finds it.
void* CudaPlugin(std::string* why) {
  static std::string first_error;  // dlerror() of the first candidate that exists (the real reason)
  static void* handle = [] {
    char exe[4096] = {0};
    const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    std::string dir = n > 0 ? std::string(exe, static_cast<size_t>(n)) : std::string();
    dir = dir.substr(0, dir.find_last_of('/') + 1);
    for (const std::string& p : {dir + kCudaPluginFile, dir + "../lib/" + kCudaPluginFile,
                                 dir + "../src/" + kCudaPluginFile, std::string(kCudaPluginFile)}) {
      if (void* h = ::dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
      const char* e = ::dlerror();
      if (first_error.empty() && e && (p.find('/') == std::string::npos || ::access(p.c_str(), F_OK) == 0)) first_error = e;
    }
    return static_cast<void*>(nullptr);
  }();
  if (!handle && why) {
    *why = std::string("the CUDA plugin ") + kCudaPluginFile + " did not load (" +
           (first_error.empty() ? std::string("not found") : first_error) +
           "): install the CUDA 13 runtime and cuBLAS, or keep the plugin beside the anneal binary";
  }
  return handle;
}
#endif

// The CUDA backend, made once on the first lookup of "cuda" (r.mu held).
void TryCuda(Registry& r) {
  if (r.cuda_tried) return;
  r.cuda_tried = true;
#if defined(ANNEAL_WITH_CUDA_KERNELS)
  void* h = CudaPlugin(&r.cuda_why);
  if (!h) return;
  auto make = reinterpret_cast<MakeCudaBackendFn>(::dlsym(h, kMakeCudaBackendSymbol));
  if (!make) {
    r.cuda_why = std::string("the CUDA plugin has no ") + kMakeCudaBackendSymbol;
    return;
  }
  std::unique_ptr<Backend> b(make(0, &r.cuda_why));
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
  // No NVIDIA device node: no GPU, and no need to load the plugin (and cuBLASLt) to learn it.
  if (::access("/dev/nvidiactl", F_OK) != 0 && ::access("/dev/nvidia0", F_OK) != 0) return false;
  void* h = CudaPlugin(nullptr);
  auto count = h ? reinterpret_cast<CudaDeviceCountFn>(::dlsym(h, kCudaDeviceCountSymbol)) : nullptr;
  return count && count() > 0;
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
#ifdef ANNEAL_NO_BLAS
Backend& CpuBackend() { return *BackendByName("ref"); }  // the slim build's only host backend
#else
Backend& CpuBackend() { return *BackendByName("cpu"); }
#endif

}  // namespace anneal
