// The row-major GEMMs of the model as cuBLASLt's column-major arguments, as plain host code
// (tests/kernels/cuda_gemm_args_test.cc runs them through a host column-major GEMM against the
// row-major reference). A row-major (R, C) matrix is a column-major (C, R) one with leading
// dimension C, so:
//   forward        out (N,OC) = inp (N,C) @ w (OC,C)^T [+ bias][, GELU]
//                  ->  out^T (OC x N) = op_T(w: C x OC) * op_N(inp^T: C x N)
//   input grad     dinp (N,C) += dout (N,OC) @ w (OC,C)
//                  ->  dinp^T (C x N) = op_N(w^T: C x OC) * op_N(dout^T: OC x N), beta 1
//   weight grad    dw (OC,C) += dout^T (OC,N) @ inp (N,C)
//                  ->  dw^T (C x OC) = op_N(inp^T: C x N) * op_T(dout^T: OC x N), beta 1
// The bias of the forward is cuBLASLt's BIAS epilogue (a vector of m = OC), GELU its GELU_AUX
// epilogue keeping the pre-activation; the bias gradient is a column-sum kernel, not a GEMM.
#pragma once

#include <cstdint>

namespace anneal::cudagemm {

// kDGelu: C = GELU'(aux) * (A B), aux the GELU's input (the backward of a GELU_AUX forward).
enum class Epilogue { kNone, kBias, kGeluBias, kGelu, kDGelu };

struct GemmArgs {
  bool transa = false, transb = false;  // op(A), op(B): transposed when true
  int64_t m = 0, n = 0, k = 0;           // C (m x n) = op(A) (m x k) * op(B) (k x n), column-major
  int64_t lda = 0, ldb = 0, ldc = 0;
  float alpha = 1.0f, beta = 0.0f;
  Epilogue epilogue = Epilogue::kNone;
};

// A = w, B = inp, C = out.
inline GemmArgs ForwardArgs(int64_t N, int64_t C, int64_t OC, bool bias, bool gelu) {
  GemmArgs a;
  a.transa = true;
  a.transb = false;
  a.m = OC;
  a.n = N;
  a.k = C;
  a.lda = C;
  a.ldb = C;
  a.ldc = OC;
  a.epilogue = gelu ? (bias ? Epilogue::kGeluBias : Epilogue::kGelu) : (bias ? Epilogue::kBias : Epilogue::kNone);
  return a;
}

// A = w, B = dout, C = dinp (accumulated).
inline GemmArgs InputGradArgs(int64_t N, int64_t C, int64_t OC) {
  GemmArgs a;
  a.m = C;
  a.n = N;
  a.k = OC;
  a.lda = C;
  a.ldb = OC;
  a.ldc = C;
  a.beta = 1.0f;
  return a;
}

// A = inp, B = dout, C = dw (accumulated).
inline GemmArgs WeightGradArgs(int64_t N, int64_t C, int64_t OC) {
  GemmArgs a;
  a.transb = true;
  a.m = C;
  a.n = OC;
  a.k = N;
  a.lda = C;
  a.ldb = OC;
  a.ldc = C;
  a.beta = 1.0f;
  return a;
}

}  // namespace anneal::cudagemm
