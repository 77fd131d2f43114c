#include "kernels/cuda/check.h"

namespace anneal::cuda {

std::string HintFor(cudaError_t e) {
  switch (e) {
    case cudaErrorMemoryAllocation:
      return "the GPU is out of memory: use train.recompute=selective or full, a smaller data.batch_size, or more "
             "ranks (ZeRO, tensor or pipeline parallelism)";
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return "no usable GPU or driver: check nvidia-smi, or train on the CPU (train.kernels=cpu)";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
      return "this binary has no code for this GPU: it carries sm_90a and compute_80 PTX (needs compute capability "
             "8.0 or newer and a driver as new as CUDA 13)";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
      return "a kernel faulted: rerun under compute-sanitizer to find it (this is a bug in anneal)";
    default:
      return "see the CUDA error above";
  }
}

Status CudaStatus(cudaError_t e, const char* call, const char* file, int line) {
  const std::string msg = std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                          cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + "); " + HintFor(e);
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) return InvalidInput(msg);
  return Internal(msg);
}

Status LaunchStatus(const char* kernel, const char* file, int line) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return Status::Ok();
  return CudaStatus(e, kernel, file, line);
}

}  // namespace anneal::cuda
