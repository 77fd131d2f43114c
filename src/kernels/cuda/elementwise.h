// The CUDA backend's elementwise ops (kernels/cuda/elementwise.cu), f32 or bf16 operands (bf16 held
// as its 16 bits), fp32 arithmetic through kernels/cuda/math.cuh, the grid from
// kernels/cuda/launch.h (16-byte vectors when every operand is aligned). All asynchronous on
// `stream`; a launch failure is returned with its file and line.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "core/status.h"

namespace anneal::cuda {

enum class Elem { kF32, kBF16 };

struct Device1D {
  cudaStream_t stream = nullptr;
  int sms = 132;  // the device's multiprocessors (grid sizing)
};

// out = GELU(inp) (tanh approximation)
Status Gelu(const Device1D& d, Elem t, void* out, const void* inp, size_t n);
// dinp = GELU'(inp) * dout
Status GeluBackward(const Device1D& d, Elem t, void* dinp, const void* inp, const void* dout, size_t n);
// out = a + b
Status Residual(const Device1D& d, Elem t, void* out, const void* a, const void* b, size_t n);
// out = silu(gate) * up; and its backward, dgate and dup written from dout.
Status SwiGlu(const Device1D& d, Elem t, void* out, const void* gate, const void* up, size_t n);
Status SwiGluBackward(const Device1D& d, Elem t, void* dgate, void* dup, const void* gate, const void* up,
                      const void* dout, size_t n);
// dst += src
Status Accumulate(const Device1D& d, Elem t, void* dst, const void* src, size_t n);
// g *= f
Status Scale(const Device1D& d, Elem t, void* g, float f, size_t n);
// dst = src converted (f32 <-> bf16 rounded to nearest even, or a plain copy)
Status Convert(const Device1D& d, Elem dst_t, void* dst, Elem src_t, const void* src, size_t n);
// AdamW step t on fp32 masters p and moments m, v from gradients g (of dtype gt); when working is
// given (bf16), it receives the updated masters rounded to nearest even.
Status AdamW(const Device1D& d, float* p, Elem gt, const void* g, float* m, float* v, uint16_t* working, size_t n,
             float lr, float beta1, float beta2, float eps, float wd, int t);
// A piece of a multi-tensor AdamW: elements [offset, offset + n) with weight decay wd.
struct AdamWChunk {
  uint64_t offset, n;
  float wd;
};
// Pieces of at most kAdamWChunk elements covering `ranges` (offset, n, wd each), in order.
constexpr size_t kAdamWChunk = 1 << 16;
// AdamW over many ranges of the same flat vectors in one launch: block b updates chunks[b] (device
// memory, from the caller), each element exactly as AdamW does; working as AdamW's.
Status AdamWChunks(const Device1D& d, float* p, Elem gt, const void* g, float* m, float* v, uint16_t* working,
                   const AdamWChunk* chunks, size_t nchunks, float lr, float beta1, float beta2, float eps, int t);

}  // namespace anneal::cuda
