// GEMMs through cuBLASLt for the CUDA backend: the column-major arguments of kernels/cuda/gemm_args.h,
// f32 (compute 32F, TF32 off: CUBLAS_COMPUTE_32F is never the fast-TF32 mode) or bf16 (fp32
// accumulation), the bias and GELU epilogues, optional strided batches (attention's per-head
// products), a workspace. Per shape (with dtype, epilogue, batch and the operands' alignment) the
// descriptors and the algorithm cuBLASLt's heuristic chose are made once and cached as a plan; a
// call sets only its pointers. Every cuBLASLt call is checked.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <memory>
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
  Gemms();  // (out of line: Plan is complete in gemm.cc only)
  ~Gemms();
  Gemms(const Gemms&) = delete;
  Gemms& operator=(const Gemms&) = delete;
  Status Init();  // the handle and the workspace
  // C = alpha op(A) op(B) + beta C, all of dtype t; with Epilogue::kBias + bias over the m rows;
  // with kGeluBias / kGelu, C = GELU(x) of x = that sum (+ bias), and x itself written to aux (same
  // layout and leading dimension as C; cuBLASLt wants ldc % 8 == 0 and aligned pointers for it).
  Status Run(cudaStream_t s, const cudagemm::GemmArgs& g, Elem t, const void* A, const void* B, void* C,
             const void* bias = nullptr, const Batch& batch = {}, void* aux = nullptr);
  size_t plans_cached() const { return plans_.size(); }

 private:
  struct Plan;
  using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, int64_t,
                         int64_t, int64_t, bool, uint32_t>;
  Status MakePlan(const cudagemm::GemmArgs& g, Elem t, const Batch& batch, const void* bias, void* aux,
                  const uint32_t (&align)[5], Plan* plan);
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 32u << 20;
  std::mutex mu_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
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
