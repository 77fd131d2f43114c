// The CUDA backend's row, column, embedding and reduction kernels (kernels/cuda/rows.cu). Operands of
// dtype t (f32 or bf16 bits) unless named f32/f64/i32; statistics (LayerNorm mean and rstd, the
// losses, the attention log-sum-exp) are fp32, the loss statistics f64. Every reduction is
// deterministic: a fixed order of lanes, threads and blocks (kernels/cuda/launch.h), never float
// atomics. Asynchronous on the stream except where a host result is returned (the losses' sum, the
// sum of squares), which synchronizes it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/elementwise.h"

namespace anneal::cuda {

// Device scratch the kernels share (grown on demand, freed with the object).
class Scratch {
 public:
  ~Scratch();
  Result<void*> Get(size_t bytes);

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// out (N,C) = LayerNorm(inp); with `resid` given, resid = a + b first and inp = resid.
Status LayerNormForward(const Device1D& d, Elem t, void* out, float* mean, float* rstd, const void* inp,
                        const void* w, const void* b, int64_t N, int64_t C, void* resid = nullptr,
                        const void* ra = nullptr, const void* rb = nullptr);
// dinp += ..., dw += ..., db += ...
Status LayerNormBackward(const Device1D& d, Elem t, void* dinp, void* dw, void* db, const void* dout, const void* inp,
                         const void* w, const float* mean, const float* rstd, int64_t N, int64_t C, Scratch& scratch);
// out (N,OC) += bias on every row.
Status BiasAdd(const Device1D& d, Elem t, void* out, const void* bias, int64_t N, int64_t OC);
// dbias (OC) += column sums of dout (N,OC), rows in order.
Status BiasGrad(const Device1D& d, Elem t, void* dbias, const void* dout, int64_t N, int64_t OC, Scratch& scratch);
// The fused softmax + cross-entropy of kernels' contract (tensor/backend.h CrossEntropy); *sum gets
// the losses' sum in row order (host, double).
Status CrossEntropy(const Device1D& d, Elem t, void* logits, float* losses, const int32_t* targets, int64_t N,
                    int64_t Vp, int V, float dscale, double* sum);
// The vocabulary-parallel loss (tensor/backend.h VocabLossStats / VocabLossCombine).
Status VocabLossStats(const Device1D& d, Elem t, double* stats, const void* logits, const int32_t* targets, int64_t N,
                      int64_t Vl, int64_t v0, int nreal);
Status VocabLossCombine(const Device1D& d, Elem t, void* logits, float* losses, double* row_loss, const double* gathered,
                        int tp, const int32_t* targets, int64_t N, int64_t Vl, int64_t v0, int nreal, float dscale,
                        double* sum);
// Sum of squares of n values, in double, in a fixed order (host result).
Status SumSquares(const Device1D& d, Elem t, const void* g, size_t n, Scratch& scratch, double* out);
// A table the host builds and a kernel reads, kept on the device and built and uploaded again only
// when its key changes (a step's gradient views and optimizer ranges are the same every step: once).
class DeviceTable {
 public:
  // The device copy of the table for `key`; build() gives its rows (a vector of trivially copyable
  // entries) when the key is new. The upload first waits for `stream`: a kernel may still read the
  // old table.
  template <class Build>
  Result<const void*> For(cudaStream_t stream, const std::vector<uint64_t>& key, Build&& build) {
    if (p_ == nullptr || key != key_) {
      const auto table = build();
      const size_t bytes = table.size() * sizeof(table[0]);
      ANNEAL_CUDA_CHECK(cudaStreamSynchronize(stream));
      ANNEAL_ASSIGN_OR_RETURN(p_, mem_.Get(bytes ? bytes : 1));
      ANNEAL_CUDA_CHECK(cudaMemcpy(p_, table.data(), bytes, cudaMemcpyHostToDevice));
      key_ = key;
      rows_ = table.size();
    }
    return static_cast<const void*>(p_);
  }
  size_t rows() const { return rows_; }

 private:
  Scratch mem_;
  std::vector<uint64_t> key_;
  void* p_ = nullptr;
  size_t rows_ = 0;
};
// out[i] = SumSquares of (g[i], n[i]) bit for bit (the same chunks, each block's sum in the same order,
// the blocks added in the same order on the host): when every view has one dtype, one launch over
// every view's blocks (SumSquaresBlocks), else a launch a view; one copy back and one
// synchronisation in all.
Status SumSquaresEach(const Device1D& d, const Elem* t, const void* const* g, const size_t* n, size_t count,
                      Scratch& scratch, DeviceTable& table, double* out);
// Embeddings. tokens are i32 device arrays; the backward kernels group rows by token on the host
// (one small copy of the tokens) so each token's rows are summed in row order, with no atomics.
Status EmbeddingForward(const Device1D& d, Elem t, void* out, const int32_t* tokens, const void* wte, const void* wpe,
                        int64_t B, int64_t T, int64_t C);
Status EmbeddingBackward(const Device1D& d, Elem t, void* dwte, void* dwpe, const void* dout, const int32_t* tokens,
                         int64_t B, int64_t T, int64_t C, Scratch& scratch);
Status VocabEmbeddingForward(const Device1D& d, Elem t, void* rows, const int32_t* tokens, const void* wte_slice,
                             int64_t N, int64_t C, int64_t Vl, int64_t v0);
Status VocabEmbeddingBackward(const Device1D& d, Elem t, void* dwte_slice, void* dwpe, const void* dall,
                              const int32_t* tokens, int64_t N, int64_t C, int64_t Vl, int64_t v0, int T,
                              Scratch& scratch);
// out (R,C) += wpe[(row0 + n) % T]
Status AddPositions(const Device1D& d, Elem t, void* out, const void* wpe, int64_t R, int64_t C, int64_t row0, int T);
// dst = src of equal dtype (elements of elem_bytes: 2, 4 or 8) through up-to-4-D strides (elements).
Status StridedCopy(const Device1D& d, size_t elem_bytes, void* dst, const int64_t* dst_strides, const void* src,
                   const int64_t* src_strides, const int64_t* shape, int ndim);

// Attention, path 1 (the device's reference): per (batch, head) products through cuBLASLt
// (kernels/cuda/gemm.h) around these row kernels.
// (B,T,C) with H heads <-> (B,H,T,hs) contiguous.
Status SplitHeads(const Device1D& d, Elem t, void* dst, const void* src, int64_t B, int64_t T, int64_t C, int H);
Status MergeHeads(const Device1D& d, Elem t, void* dst, const void* src, int64_t B, int64_t T, int64_t C, int H);
// scores (BH, T, T) scaled by `scale`, causal: row r keeps columns 0..r; overwritten by the
// probabilities (0 above the diagonal); lse (BH*T) the rows' log-sum-exp of the scaled scores.
Status CausalSoftmax(const Device1D& d, Elem t, void* scores, float* lse, int64_t BH, int64_t T, float scale);
// From the raw scores (BH,T,T) again: P = exp(scale * s - lse) (causal), then dS = P * (dP - D) with
// D = rowsum(dO * O) (per row of (BH*T, hs) dout and out, split heads), written over dP.
Status SoftmaxBackward(const Device1D& d, Elem t, void* dp, const void* scores, const float* lse, const void* dout_h,
                       const void* out_h, int64_t BH, int64_t T, int64_t hs, float scale, void* probs);
// One query against cached rows (tensor/backend.h AttentionDecode), heads in order.
// scores: fp32 scratch of at least `rows` floats, reused head by head.
// Hkv key/value heads (query head h reads head h / (H/Hkv)); 0 = H.
Status AttentionDecode(const Device1D& d, Elem t, void* out, const void* q, const void* kcache, int64_t kstride,
                       const void* vcache, int64_t vstride, int64_t rows, int64_t C, int H, float* scores, int Hkv = 0);

// Grouped-query attention, path 1: keys or values (B,T,Hkv*hs) expanded to (B,H,T,hs), query head h
// reading key/value head h / (H/Hkv); and their gradients back, (B,H,T,hs) -> (B,T,Hkv*hs), each
// key/value head the sum of its query heads' in head order.
Status ExpandKvHeads(const Device1D& d, Elem t, void* dst, const void* src, int64_t B, int64_t T, int64_t hs, int H,
                     int Hkv);
Status SumKvHeads(const Device1D& d, Elem t, void* dst, const void* src, int64_t B, int64_t T, int64_t hs, int H,
                  int Hkv);
// RMSNorm (tensor/backend.h RmsNormForward / RmsNormBackward): rstd (N) fp32; dinp, dw accumulate.
Status RmsNormForward(const Device1D& d, Elem t, void* out, float* rstd, const void* inp, const void* w, int64_t N,
                      int64_t C, float eps);
Status RmsNormBackward(const Device1D& d, Elem t, void* dinp, void* dw, const void* dout, const void* inp,
                       const void* w, const float* rstd, int64_t N, int64_t C, Scratch& scratch);
// Rotary position embedding in place on x (B,T,H*hs) with cos, sin (T, hs/2) fp32; inverse: the
// backward rotation.
Status Rotary(const Device1D& d, Elem t, void* x, const float* cos_t, const float* sin_t, int64_t B, int64_t T,
              int64_t H, int64_t hs, bool inverse);

}  // namespace anneal::cuda
