// Every CUDA runtime and cuBLAS(Lt) call of the CUDA backend is checked: a failure becomes a Status
// naming the call, the file and line, the library's own error text, and what to do (an out-of-memory
// names the allocation and suggests recomputation or a smaller batch).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "core/status.h"

namespace anneal::cuda {

// A hint for the error code (what to check or change).
std::string HintFor(cudaError_t e);
Status CudaStatus(cudaError_t e, const char* call, const char* file, int line);
// The last launch's error (cudaGetLastError), as CudaStatus.
Status LaunchStatus(const char* kernel, const char* file, int line);

}  // namespace anneal::cuda

#define ANNEAL_CUDA_CHECK(call)                                                     \
  do {                                                                              \
    const cudaError_t anneal_cuda_e_ = (call);                                      \
    if (anneal_cuda_e_ != cudaSuccess) {                                            \
      return ::anneal::cuda::CudaStatus(anneal_cuda_e_, #call, __FILE__, __LINE__); \
    }                                                                               \
  } while (0)

#define ANNEAL_CUDA_LAUNCHED(kernel) ANNEAL_RETURN_IF_ERROR(::anneal::cuda::LaunchStatus(kernel, __FILE__, __LINE__))
