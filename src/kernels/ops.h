// The kernels of the host backends, as one table of functions over raw fp32 buffers.
//
// kernels/ref (plain C++, the truth) and kernels/cpu (OpenBLAS + OpenMP + AVX2) each fill a
// KernelTable; kernels/host_backend.h composes the Backend ops (tensor/backend.h) from it. Each
// kernel is named as its op is in OpName() (tensor/backend.cc: one op vocabulary, checked by
// tests/layout/op_vocabulary.py). Nothing
// outside kernels/ uses the table: the model calls Backend ops, and the parity harness
// (tests/kernels/parity_test.cc) checks every registered backend's ops against ref's.
//
// Conventions: row-major; B batch, T time, C channels, H heads, N rows (= B*T), OC output
// channels, V vocabulary, Vp padded vocabulary (columns V..Vp-1 exist in memory, are never
// predicted, and get zero gradient). Forward ops write outputs with `=`. Backward ops ACCUMULATE
// (`+=`) into parameter gradients and into the input gradient `dinp` of matmul, layernorm and
// encoder (the residual stream sums several paths); attention and gelu backward WRITE (`=`) their
// input gradients. Weights are in torch's Linear layout (OC, C).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace anneal {

struct KernelTable {
  std::string name;

  // out (B,T,C) = wte[tokens] + wpe[t]
  void (*embedding_forward)(float* out, const int32_t* tokens, const float* wte, const float* wpe, int B, int T, int C);
  // dwte[tokens] += dout; dwpe[t] += dout
  void (*embedding_backward)(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B, int T, int C);

  // out (N,C) = (inp - mean) * rstd * w + b; mean, rstd (N) saved for backward. eps = 1e-5.
  void (*layernorm_forward)(float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b,
                            int N, int C);
  void (*layernorm_backward)(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                             const float* mean, const float* rstd, int N, int C);

  // out (N,OC) = inp (N,C) @ w^T (C,OC) + bias (OC, may be null)
  void (*linear_forward)(float* out, const float* inp, const float* w, const float* bias, int N, int C, int OC);
  // dinp += dout @ w; dw += dout^T @ inp; dbias += column sums of dout (dbias may be null)
  void (*linear_backward)(float* dinp, float* dw, float* dbias, const float* dout, const float* inp, const float* w,
                          int N, int C, int OC);

  // Causal self-attention over q (B,T,C) split into H heads of hs = C/H, and k, v (B,T,Hkv*hs) in Hkv
  // key/value heads (Hkv divides H; query head h reads key/value head h / (H/Hkv): grouped-query
  // attention, Hkv = H the classic form): out (B,T,C); lse (B,H,T) holds each query row's
  // log-sum-exp of scaled scores, so backward recomputes probabilities.
  void (*attention_forward)(float* out, float* lse, const float* q, const float* k, const float* v, int B, int T, int C,
                            int H, int Hkv);
  // Writes dq (B,T,C), dk, dv (B,T,Hkv*hs) (a key/value head's gradient sums its query heads').
  void (*attention_backward)(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                             const float* v, const float* out, const float* lse, int B, int T, int C, int H, int Hkv);

  // GELU, tanh approximation.
  void (*gelu_forward)(float* out, const float* inp, size_t n);
  // dinp = gelu'(inp) * dout
  void (*gelu_backward)(float* dinp, const float* inp, const float* dout, size_t n);

  // out = a + b
  void (*residual_forward)(float* out, const float* a, const float* b, size_t n);

  // Fused softmax + cross-entropy over logits (N,Vp) of which the first V columns are real:
  // losses[i] = logsumexp(logits[i,:V]) - logits[i, targets[i]]. When dscale != 0, logits is
  // overwritten in place by its gradient dscale * (softmax - onehot), with 0 in the padding columns:
  // no second (N,Vp) buffer exists. Returns the sum of losses in a fixed order.
  double (*crossentropy)(float* logits, float* losses, const int32_t* targets, int N, int V, int Vp,
                                          float dscale);

  // Sum of squares of g (n) accumulated in double in a fixed order.
  double (*sum_squares)(const float* g, size_t n);
  // g *= s
  void (*scale)(float* g, float s, size_t n);
  // AdamW step t (1-based) on n values: m, v moments; decoupled weight decay wd (0 for no decay).
  void (*adamw)(float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1, float beta2, float eps,
                float wd, int t);

  // RMSNorm (Llama): out (N,C) = inp * rstd * w with rstd = 1 / sqrt(mean(inp^2) + eps), saved (N).
  void (*rmsnorm_forward)(float* out, float* rstd, const float* inp, const float* w, int N, int C, float eps);
  // dinp += ...; dw += ...
  void (*rmsnorm_backward)(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                           const float* rstd, int N, int C);
};

// The reference backend: simple loops, double accumulation, single thread.
const KernelTable& RefKernels();
// The optimized CPU backend: OpenBLAS sgemm, OpenMP, AVX2. Deterministic for a given thread count.
const KernelTable& CpuKernels();

}  // namespace anneal
