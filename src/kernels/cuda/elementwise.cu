#include "kernels/cuda/elementwise.h"

#include <cmath>

#include "kernels/cuda/check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/math.cuh"

namespace anneal::cuda {

namespace {

using cudalaunch::Elementwise;
using cudalaunch::PlanElementwise;

// Up to 8 values of one operand of a piece, widened to fp32: a whole 16-byte vector in one load, or
// the tail element by element.
template <class T>
struct Piece;

template <>
struct Piece<float> {
  static constexpr int kVec = 4;
  __device__ static void Load(const void* base, size_t first, size_t count, float* x) {
    const float* p = static_cast<const float*>(base) + first;
    if (count == kVec) {
      const float4 v = *reinterpret_cast<const float4*>(p);
      x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
    } else {
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        if (i < static_cast<int>(count)) x[i] = p[i];
      }
    }
  }
  __device__ static void Store(void* base, size_t first, size_t count, const float* x) {
    float* p = static_cast<float*>(base) + first;
    if (count == kVec) {
      *reinterpret_cast<float4*>(p) = make_float4(x[0], x[1], x[2], x[3]);
    } else {
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        if (i < static_cast<int>(count)) p[i] = x[i];
      }
    }
  }
};

template <>
struct Piece<uint16_t> {
  static constexpr int kVec = 8;
  __device__ static void Load(const void* base, size_t first, size_t count, float* x) {
    const uint16_t* p = static_cast<const uint16_t*>(base) + first;
    if (count == kVec) {
      const uint4 v = *reinterpret_cast<const uint4*>(p);
      const uint32_t w[4] = {v.x, v.y, v.z, v.w};
      for (int i = 0; i < 4; ++i) {
        x[2 * i] = cudamath::WidenBf16(static_cast<uint16_t>(w[i] & 0xffffu));
        x[2 * i + 1] = cudamath::WidenBf16(static_cast<uint16_t>(w[i] >> 16));
      }
    } else {
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        if (i < static_cast<int>(count)) x[i] = cudamath::WidenBf16(p[i]);
      }
    }
  }
  __device__ static void Store(void* base, size_t first, size_t count, const float* x) {
    uint16_t* p = static_cast<uint16_t*>(base) + first;
    if (count == kVec) {
      uint32_t w[4];
      for (int i = 0; i < 4; ++i) {
        w[i] = cudamath::RoundBf16(x[2 * i]) | (static_cast<uint32_t>(cudamath::RoundBf16(x[2 * i + 1])) << 16);
      }
      *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
    } else {
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        if (i < static_cast<int>(count)) p[i] = cudamath::RoundBf16(x[i]);
      }
    }
  }
};

// out[i] = f(a[i], b[i]) over one dtype (b may be null for unary ops).
template <class T, class F>
__global__ void Binary(Elementwise e, void* out, const void* a, const void* b, F f) {
  e.Visit(blockIdx.x, threadIdx.x, [&](size_t first, size_t count) {
    float x[8] = {0, 0, 0, 0, 0, 0, 0, 0}, y[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    Piece<T>::Load(a, first, count, x);
    if (b) Piece<T>::Load(b, first, count, y);
#pragma unroll
    for (int i = 0; i < 8; ++i) x[i] = f(x[i], y[i]);  // constant indices: the arrays stay in registers
    Piece<T>::Store(out, first, count, x);
  });
}

template <class F>
Status LaunchBinary(const Device1D& d, Elem t, void* out, const void* a, const void* b, size_t n, F f,
                    const char* name) {
  if (n == 0) return Status::Ok();
  const bool aligned = cudalaunch::Aligned16(out) && cudalaunch::Aligned16(a) && (!b || cudalaunch::Aligned16(b));
  const Elementwise e = PlanElementwise(n, t == Elem::kF32 ? 4 : 2, aligned, d.sms);
  if (t == Elem::kF32) {
    Binary<float><<<e.blocks, e.threads, 0, d.stream>>>(e, out, a, b, f);
  } else {
    Binary<uint16_t><<<e.blocks, e.threads, 0, d.stream>>>(e, out, a, b, f);
  }
  ANNEAL_CUDA_LAUNCHED(name);
  return Status::Ok();
}

struct GeluOp {
  __device__ float operator()(float x, float) const { return cudamath::Gelu(x); }
};
struct GeluBackwardOp {
  __device__ float operator()(float x, float dout) const { return cudamath::GeluGrad(x) * dout; }
};
struct SwiGluOp {
  __device__ float operator()(float gate, float up) const { return cudamath::SwiGlu(gate, up); }
};
template <class T>
__global__ void SwiGluBackwardKernel(size_t n, void* dgate, void* dup, const void* gate, const void* up,
                                     const void* dout) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    float g, u, d, dg, du;
    Piece<T>::Load(gate, i, 1, &g);
    Piece<T>::Load(up, i, 1, &u);
    Piece<T>::Load(dout, i, 1, &d);
    cudamath::SwiGluGrads(g, u, d, &dg, &du);
    Piece<T>::Store(dgate, i, 1, &dg);
    Piece<T>::Store(dup, i, 1, &du);
  }
}
struct AddOp {
  __device__ float operator()(float x, float y) const { return x + y; }
};
struct ScaleOp {
  float f;
  __device__ float operator()(float x, float) const { return x * f; }
};

template <class S, class D>
__global__ void ConvertKernel(Elementwise e, void* dst, const void* src) {
  e.Visit(blockIdx.x, threadIdx.x, [&](size_t first, size_t count) {
    float x[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    Piece<S>::Load(src, first, count, x);
    Piece<D>::Store(dst, first, count, x);
  });
}

template <class G>
__global__ void AdamWKernel(size_t n, float* p, const void* g, float* m, float* v, uint16_t* working, float lr,
                            float beta1, float beta2, float eps, float wd, float bc1, float bc2) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    float gi;
    Piece<G>::Load(g, i, 1, &gi);
    const cudamath::AdamWElement r = cudamath::AdamWStep(p[i], gi, m[i], v[i], lr, beta1, beta2, eps, wd, bc1, bc2);
    p[i] = r.p;
    m[i] = r.m;
    v[i] = r.v;
    if (working) working[i] = cudamath::RoundBf16(r.p);
  }
}

template <typename G>
__global__ void AdamWChunkKernel(const AdamWChunk* chunks, float* p, const void* g, float* m, float* v,
                                 uint16_t* working, float lr, float beta1, float beta2, float eps, float bc1,
                                 float bc2) {
  const AdamWChunk c = chunks[blockIdx.x];
  for (size_t j = threadIdx.x; j < c.n; j += blockDim.x) {
    const size_t i = c.offset + j;
    float gi;
    Piece<G>::Load(g, i, 1, &gi);
    const cudamath::AdamWElement r = cudamath::AdamWStep(p[i], gi, m[i], v[i], lr, beta1, beta2, eps, c.wd, bc1, bc2);
    p[i] = r.p;
    m[i] = r.m;
    v[i] = r.v;
    if (working) working[i] = cudamath::RoundBf16(r.p);
  }
}

}  // namespace

Status AdamWChunks(const Device1D& d, float* p, Elem gt, const void* g, float* m, float* v, uint16_t* working,
                   const AdamWChunk* chunks, size_t nchunks, float lr, float beta1, float beta2, float eps, int t) {
  if (nchunks == 0) return Status::Ok();
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(beta1), t));
  const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(beta2), t));
  const unsigned blocks = static_cast<unsigned>(nchunks), threads = 256;
  if (gt == Elem::kF32) {
    AdamWChunkKernel<float><<<blocks, threads, 0, d.stream>>>(chunks, p, g, m, v, working, lr, beta1, beta2, eps, bc1, bc2);
  } else {
    AdamWChunkKernel<uint16_t><<<blocks, threads, 0, d.stream>>>(chunks, p, g, m, v, working, lr, beta1, beta2, eps, bc1,
                                                                bc2);
  }
  ANNEAL_CUDA_LAUNCHED("adamw_chunks");
  return Status::Ok();
}

Status Gelu(const Device1D& d, Elem t, void* out, const void* inp, size_t n) {
  return LaunchBinary(d, t, out, inp, nullptr, n, GeluOp{}, "gelu");
}

Status GeluBackward(const Device1D& d, Elem t, void* dinp, const void* inp, const void* dout, size_t n) {
  return LaunchBinary(d, t, dinp, inp, dout, n, GeluBackwardOp{}, "gelu_backward");
}

Status SwiGlu(const Device1D& d, Elem t, void* out, const void* gate, const void* up, size_t n) {
  return LaunchBinary(d, t, out, gate, up, n, SwiGluOp{}, "swiglu");
}

Status SwiGluBackward(const Device1D& d, Elem t, void* dgate, void* dup, const void* gate, const void* up,
                      const void* dout, size_t n) {
  if (n == 0) return Status::Ok();
  const unsigned threads = 256;
  const unsigned blocks = static_cast<unsigned>(std::min<size_t>((n + threads - 1) / threads, static_cast<size_t>(d.sms) * 8));
  if (t == Elem::kF32) {
    SwiGluBackwardKernel<float><<<blocks, threads, 0, d.stream>>>(n, dgate, dup, gate, up, dout);
  } else {
    SwiGluBackwardKernel<uint16_t><<<blocks, threads, 0, d.stream>>>(n, dgate, dup, gate, up, dout);
  }
  ANNEAL_CUDA_LAUNCHED("swiglu_backward");
  return Status::Ok();
}

Status Residual(const Device1D& d, Elem t, void* out, const void* a, const void* b, size_t n) {
  return LaunchBinary(d, t, out, a, b, n, AddOp{}, "residual");
}

Status Accumulate(const Device1D& d, Elem t, void* dst, const void* src, size_t n) {
  return LaunchBinary(d, t, dst, dst, src, n, AddOp{}, "accumulate");
}

Status Scale(const Device1D& d, Elem t, void* g, float f, size_t n) {
  return LaunchBinary(d, t, g, g, nullptr, n, ScaleOp{f}, "scale");
}

Status Convert(const Device1D& d, Elem dst_t, void* dst, Elem src_t, const void* src, size_t n) {
  if (n == 0) return Status::Ok();
  if (dst_t == src_t) {
    ANNEAL_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * (dst_t == Elem::kF32 ? 4 : 2), cudaMemcpyDeviceToDevice, d.stream));
    return Status::Ok();
  }
  const bool aligned = cudalaunch::Aligned16(dst) && cudalaunch::Aligned16(src);
  // Both sides visit the same pieces: f32's (4 elements, one float4 when aligned); the bf16 side
  // loads and stores them one by one.
  const Elementwise e = PlanElementwise(n, 4, aligned, d.sms);
  if (dst_t == Elem::kBF16) {
    ConvertKernel<float, uint16_t><<<e.blocks, e.threads, 0, d.stream>>>(e, dst, src);
  } else {
    ConvertKernel<uint16_t, float><<<e.blocks, e.threads, 0, d.stream>>>(e, dst, src);
  }
  ANNEAL_CUDA_LAUNCHED("convert");
  return Status::Ok();
}

Status AdamW(const Device1D& d, float* p, Elem gt, const void* g, float* m, float* v, uint16_t* working, size_t n,
             float lr, float beta1, float beta2, float eps, float wd, int t) {
  if (n == 0) return Status::Ok();
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(beta1), t));
  const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(beta2), t));
  const unsigned threads = 256;
  const unsigned blocks = static_cast<unsigned>(std::min<size_t>((n + threads - 1) / threads, static_cast<size_t>(d.sms) * 8));
  if (gt == Elem::kF32) {
    AdamWKernel<float><<<blocks, threads, 0, d.stream>>>(n, p, g, m, v, working, lr, beta1, beta2, eps, wd, bc1, bc2);
  } else {
    AdamWKernel<uint16_t><<<blocks, threads, 0, d.stream>>>(n, p, g, m, v, working, lr, beta1, beta2, eps, wd, bc1, bc2);
  }
  ANNEAL_CUDA_LAUNCHED("adamw");
  return Status::Ok();
}

}  // namespace anneal::cuda
