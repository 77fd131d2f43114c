#include "kernels/cuda/gemm.h"

#include <memory>
#include <string>

#include "kernels/cuda/check.h"

namespace anneal::cuda {

Status CublasStatus(cublasStatus_t s, const char* call, const char* file, int line) {
  std::string msg = std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": cuBLAS status " +
                    std::to_string(static_cast<int>(s)) + " (" + cublasLtGetStatusName(s) + ": " +
                    cublasLtGetStatusString(s) + ")";
  if (s == CUBLAS_STATUS_ALLOC_FAILED) {
    msg += "; the GPU is out of memory: use train.recompute=selective or full, or a smaller data.batch_size";
  } else if (s == CUBLAS_STATUS_NOT_SUPPORTED) {
    msg += "; no cuBLASLt algorithm for this shape, dtype and epilogue (a bug in anneal: report the shape)";
  }
  return Internal(msg);
}

Gemms::~Gemms() {
  if (workspace_) cudaFree(workspace_);
  if (handle_) cublasLtDestroy(handle_);
}

Status Gemms::Init() {
  if (handle_) return Status::Ok();
  ANNEAL_CUBLAS_CHECK(cublasLtCreate(&handle_));
  ANNEAL_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
  return Status::Ok();
}

namespace {

// RAII for cuBLASLt's descriptors.
struct Layouts {
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  ~Layouts() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
  }
};
struct Desc {
  cublasLtMatmulDesc_t d = nullptr;
  ~Desc() {
    if (d) cublasLtMatmulDescDestroy(d);
  }
};
struct Pref {
  cublasLtMatmulPreference_t p = nullptr;
  ~Pref() {
    if (p) cublasLtMatmulPreferenceDestroy(p);
  }
};

Status MakeLayout(cublasLtMatrixLayout_t* l, cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                  const Batch& batch, int64_t stride) {
  ANNEAL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(l, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld));
  if (batch.count > 1) {
    ANNEAL_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch.count,
                                                         sizeof(batch.count)));
    ANNEAL_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                         sizeof(stride)));
  }
  return Status::Ok();
}

// The largest power of two (up to 256) dividing the address: cuBLASLt's heuristic assumes 256-byte
// aligned operands unless told otherwise, and parameters live at any float offset of a flat buffer.
uint32_t AlignmentOf(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && (a % al) != 0) al /= 2;
  return al;
}

}  // namespace

Status Gemms::Run(cudaStream_t s, const cudagemm::GemmArgs& g, Elem t, const void* A, const void* B, void* C,
                  const void* bias, const Batch& batch) {
  ANNEAL_RETURN_IF_ERROR(Init());
  const cudaDataType_t type = t == Elem::kF32 ? CUDA_R_32F : CUDA_R_16BF;
  Desc desc;
  // fp32 accumulation; CUBLAS_COMPUTE_32F keeps full fp32 (no TF32) on the f32 path.
  ANNEAL_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc.d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = g.transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.transb ? CUBLAS_OP_T : CUBLAS_OP_N;
  ANNEAL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  ANNEAL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  // Only the bias epilogue is implemented (GELU is a separate kernel): refuse the others rather than
  // drop their bias or activation unnoticed.
  if (g.epilogue == cudagemm::Epilogue::kGelu || g.epilogue == cudagemm::Epilogue::kGeluBias) {
    return Internal("Gemms::Run: the GELU epilogues are not implemented (call Gelu after the GEMM)");
  }
  if ((g.epilogue == cudagemm::Epilogue::kBias) != (bias != nullptr)) {
    return Internal("Gemms::Run: the bias epilogue needs a bias pointer, and a bias needs the bias epilogue");
  }
  const bool with_bias = bias != nullptr;
  if (with_bias) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    ANNEAL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    ANNEAL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  Layouts l;
  ANNEAL_RETURN_IF_ERROR(MakeLayout(&l.a, type, g.transa ? g.k : g.m, g.transa ? g.m : g.k, g.lda, batch, batch.stride_a));
  ANNEAL_RETURN_IF_ERROR(MakeLayout(&l.b, type, g.transb ? g.n : g.k, g.transb ? g.k : g.n, g.ldb, batch, batch.stride_b));
  ANNEAL_RETURN_IF_ERROR(MakeLayout(&l.c, type, g.m, g.n, g.ldc, batch, batch.stride_c));
  const uint32_t al_a = AlignmentOf(A), al_b = AlignmentOf(B), al_c = AlignmentOf(C),
                 al_bias = with_bias ? AlignmentOf(bias) : 256u;
  auto log2 = [](uint32_t v) {
    uint32_t l = 0;
    while (v > 1) v >>= 1, ++l;
    return l;
  };
  const uint32_t aligns = (log2(al_a) << 12) | (log2(al_b) << 8) | (log2(al_c) << 4) | log2(al_bias);
  const Key key{g.transa, g.transb, g.m,           g.n,            g.k,            g.lda,          g.ldb, g.ldc,
                static_cast<int>(t), with_bias, batch.count, batch.stride_a, batch.stride_b, batch.stride_c, g.beta != 0,
                aligns};
  cublasLtMatmulAlgo_t algo;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = algos_.find(key);
    if (it == algos_.end()) {
      Pref pref;
      ANNEAL_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref.p));
      ANNEAL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref.p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                               &workspace_bytes_, sizeof(workspace_bytes_)));
      // The operands' real alignment, so the algorithm chosen can read them.
      for (auto [attr, al] : {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, al_a},
                              {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, al_b},
                              {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, al_c},
                              {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, al_c}}) {
        ANNEAL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref.p, attr, &al, sizeof(al)));
      }
      cublasLtMatmulHeuristicResult_t result{};
      int found = 0;
      ANNEAL_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, desc.d, l.a, l.b, l.c, l.c, pref.p, 1, &result, &found));
      if (found == 0) return CublasStatus(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
      it = algos_.emplace(key, result.algo).first;
    }
    algo = it->second;
  }
  const float alpha = g.alpha, beta = g.beta;
  ANNEAL_CUBLAS_CHECK(cublasLtMatmul(handle_, desc.d, &alpha, A, l.a, B, l.b, &beta, C, l.c, C, l.c, &algo, workspace_,
                                     workspace_bytes_, s));
  return Status::Ok();
}

}  // namespace anneal::cuda
