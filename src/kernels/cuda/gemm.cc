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

Gemms::Gemms() = default;

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

// One shape's descriptors and chosen algorithm; a call sets the bias and aux pointers on desc.
struct Gemms::Plan {
  Desc desc;
  Layouts l;
  cublasLtMatmulAlgo_t algo{};
};

namespace {

cublasLtEpilogue_t EpilogueOf(cudagemm::Epilogue e) {
  switch (e) {
    case cudagemm::Epilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
    case cudagemm::Epilogue::kGeluBias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case cudagemm::Epilogue::kGelu: return CUBLASLT_EPILOGUE_GELU_AUX;
    case cudagemm::Epilogue::kDGelu: return CUBLASLT_EPILOGUE_DGELU;
    case cudagemm::Epilogue::kNone: break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// A bias exactly with the bias epilogues, an aux exactly with the GELU ones.
Status CheckEpilogue(const cudagemm::GemmArgs& g, const void* bias, const void* aux) {
  const bool wants_bias = g.epilogue == cudagemm::Epilogue::kBias || g.epilogue == cudagemm::Epilogue::kGeluBias;
  const bool wants_aux = g.epilogue == cudagemm::Epilogue::kGelu || g.epilogue == cudagemm::Epilogue::kGeluBias ||
                         g.epilogue == cudagemm::Epilogue::kDGelu;
  if (wants_bias != (bias != nullptr)) {
    return Internal("Gemms::Run: the bias epilogues need a bias pointer, and a bias needs a bias epilogue");
  }
  if (wants_aux != (aux != nullptr)) {
    return Internal("Gemms::Run: the GELU epilogues need an aux pointer (the pre-activation), and aux needs them");
  }
  if (wants_aux && g.ldc % 8 != 0) {
    return Internal("Gemms::Run: a GELU epilogue needs ldc divisible by 8, not " + std::to_string(g.ldc));
  }
  return Status::Ok();
}

Status SetPointers(cublasLtMatmulDesc_t d, const void* bias, void* aux) {
  if (bias) ANNEAL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  if (aux) ANNEAL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
  return Status::Ok();
}

uint32_t Log2(uint32_t v) {
  uint32_t l = 0;
  while (v > 1) v >>= 1, ++l;
  return l;
}

}  // namespace

// align: the alignment of A, B, C, bias and aux (bytes; 256 for an absent one).
Status Gemms::MakePlan(const cudagemm::GemmArgs& g, Elem t, const Batch& batch, const void* bias, void* aux,
                       const uint32_t (&align)[5], Plan* plan) {
  const cudaDataType_t type = t == Elem::kF32 ? CUDA_R_32F : CUDA_R_16BF;
  cublasLtMatmulDesc_t d = nullptr;
  // fp32 accumulation; CUBLAS_COMPUTE_32F keeps full fp32 (no TF32) on the f32 path.
  ANNEAL_CUBLAS_CHECK(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  plan->desc.d = d;
  const cublasOperation_t ta = g.transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.transb ? CUBLAS_OP_T : CUBLAS_OP_N;
  ANNEAL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  ANNEAL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  const cublasLtEpilogue_t epi = EpilogueOf(g.epilogue);
  ANNEAL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  if (aux) {
    const int64_t ld = g.ldc;
    ANNEAL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld)));
  }
  ANNEAL_RETURN_IF_ERROR(SetPointers(d, bias, aux));  // the heuristic reads their alignment
  Layouts& l = plan->l;
  ANNEAL_RETURN_IF_ERROR(MakeLayout(&l.a, type, g.transa ? g.k : g.m, g.transa ? g.m : g.k, g.lda, batch, batch.stride_a));
  ANNEAL_RETURN_IF_ERROR(MakeLayout(&l.b, type, g.transb ? g.n : g.k, g.transb ? g.k : g.n, g.ldb, batch, batch.stride_b));
  ANNEAL_RETURN_IF_ERROR(MakeLayout(&l.c, type, g.m, g.n, g.ldc, batch, batch.stride_c));
  Pref pref;
  ANNEAL_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref.p));
  ANNEAL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref.p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                           &workspace_bytes_, sizeof(workspace_bytes_)));
  // The operands' real alignment, so the algorithm chosen can read them.
  for (auto [attr, al] : {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align[0]},
                          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align[1]},
                          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align[2]},
                          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align[2]}}) {
    ANNEAL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref.p, attr, &al, sizeof(al)));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  ANNEAL_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, d, l.a, l.b, l.c, l.c, pref.p, 1, &result, &found));
  if (found == 0) return CublasStatus(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
  plan->algo = result.algo;
  return Status::Ok();
}

Status Gemms::Run(cudaStream_t s, const cudagemm::GemmArgs& g, Elem t, const void* A, const void* B, void* C,
                  const void* bias, const Batch& batch, void* aux) {
  ANNEAL_RETURN_IF_ERROR(Init());
  ANNEAL_RETURN_IF_ERROR(CheckEpilogue(g, bias, aux));
  const uint32_t align[5] = {AlignmentOf(A), AlignmentOf(B), AlignmentOf(C), bias ? AlignmentOf(bias) : 256u,
                             aux ? AlignmentOf(aux) : 256u};
  uint32_t aligns = 0;
  for (uint32_t a : align) aligns = (aligns << 4) | Log2(a);
  const Key key{g.transa, g.transb, g.m, g.n, g.k, g.lda, g.ldb, g.ldc, static_cast<int>(t),
                static_cast<int>(g.epilogue), batch.count, batch.stride_a, batch.stride_b, batch.stride_c,
                g.beta != 0, aligns};
  // The plan's descriptor is shared: setting its pointers and launching happen under the lock.
  std::lock_guard<std::mutex> lock(mu_);
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    auto plan = std::make_unique<Plan>();
    ANNEAL_RETURN_IF_ERROR(MakePlan(g, t, batch, bias, aux, align, plan.get()));
    it = plans_.emplace(key, std::move(plan)).first;
  }
  Plan& p = *it->second;
  ANNEAL_RETURN_IF_ERROR(SetPointers(p.desc.d, bias, aux));
  const float alpha = g.alpha, beta = g.beta;
  ANNEAL_CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc.d, &alpha, A, p.l.a, B, p.l.b, &beta, C, p.l.c, C, p.l.c, &p.algo,
                                     workspace_, workspace_bytes_, s));
  return Status::Ok();
}

}  // namespace anneal::cuda
