// GEMMs through cuBLASLt for the CUDA backend: the column-major arguments of kernels/cuda/gemm_args.h,
// f32 (compute 32F, TF32 off: CUBLAS_COMPUTE_32F is never the fast-TF32 mode) or bf16 (fp32
// accumulation), an optional bias epilogue, optional strided batches (attention's per-head
// products), a workspace, and the algorithm chosen once per shape by cuBLASLt's heuristic and
// cached. Every cuBLASLt call is checked.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <tuple>

#include "core/status.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gemm_args.h"

namespace anneal::cuda {

struct Batch {
  int count = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements between consecutive matrices
};

class Gemms {
 public:
  Gemms() = default;
  ~Gemms();
  Gemms(const Gemms&) = delete;
  Gemms& operator=(const Gemms&) = delete;
  Status Init();  // the handle and the workspace
  // C = alpha op(A) op(B) + beta C (+ bias over the m rows, with Epilogue::kBias), all of dtype t.
  Status Run(cudaStream_t s, const cudagemm::GemmArgs& g, Elem t, const void* A, const void* B, void* C,
             const void* bias = nullptr, const Batch& batch = {});
  size_t algorithms_cached() const { return algos_.size(); }

 private:
  using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, int64_t,
                         int64_t, int64_t, bool, uint32_t>;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 32u << 20;
  std::mutex mu_;
  std::map<Key, cublasLtMatmulAlgo_t> algos_;
};

// A cuBLAS status as a Status naming the call, file and line.
Status CublasStatus(cublasStatus_t s, const char* call, const char* file, int line);

}  // namespace anneal::cuda

#define ANNEAL_CUBLAS_CHECK(call)                                                     \
  do {                                                                                \
    const cublasStatus_t anneal_cublas_s_ = (call);                                   \
    if (anneal_cublas_s_ != CUBLAS_STATUS_SUCCESS) {                                  \
      return ::anneal::cuda::CublasStatus(anneal_cublas_s_, #call, __FILE__, __LINE__); \
    }                                                                                 \
  } while (0)
