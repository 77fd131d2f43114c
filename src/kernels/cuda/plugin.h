// The CUDA backend as a plugin: libanneal_cuda.so (kernels/cuda/plugin.cc) exports these two C
// entry points; kernels/registry.cc dlopens it on the first use of "cuda", so processes that train
// on the CPU never load the CUDA libraries (cuBLASLt alone costs 0.1 s and 210 MB per process).
#pragma once

#include <string>

#include "tensor/backend.h"

namespace anneal {

inline constexpr const char* kCudaPluginFile = "libanneal_cuda.so";
inline constexpr const char* kMakeCudaBackendSymbol = "anneal_make_cuda_backend";
inline constexpr const char* kCudaDeviceCountSymbol = "anneal_cuda_device_count";
// A backend for device `index` (owned by the caller), or null with *why set.
using MakeCudaBackendFn = Backend* (*)(int index, std::string* why);
using CudaDeviceCountFn = int (*)();

}  // namespace anneal
