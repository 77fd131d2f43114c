// TensorView: a non-owning view of a tensor in some backend's memory — pointer, dtype, shape,
// strides (in elements), device. Views do not own or free anything; the Buffer (tensor/buffer.h) or
// other storage behind them must outlive them. Code outside a backend passes views around but only
// reads or writes their elements on the host when device().is_cpu() (and, for a backend that seals
// its memory, only inside the backend's ops: see tests/tensor/sealed_backend.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>

#include "core/check.h"
#include "tensor/device.h"
#include "tensor/dtype.h"

namespace anneal {

class TensorView {
 public:
  static constexpr int kMaxDims = 4;

  TensorView() = default;
  // A contiguous (row-major) view of `shape` at `data`.
  TensorView(void* data, DType dtype, std::initializer_list<int64_t> shape, Device device = Device::Cpu());
  static TensorView F32(float* data, std::initializer_list<int64_t> shape, Device d = Device::Cpu()) {
    return TensorView(data, DType::kF32, shape, d);
  }
  static TensorView F32(const float* data, std::initializer_list<int64_t> shape, Device d = Device::Cpu()) {
    return TensorView(const_cast<float*>(data), DType::kF32, shape, d);
  }

  void* data() const { return data_; }
  DType dtype() const { return dtype_; }
  const Device& device() const { return device_; }
  int ndim() const { return ndim_; }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t stride(int i) const { return strides_[i]; }
  int64_t numel() const;
  size_t bytes() const { return static_cast<size_t>(numel()) * SizeOf(dtype_); }
  bool empty() const { return data_ == nullptr || numel() == 0; }
  // Row-major with no gaps.
  bool contiguous() const;
  // The element pointer as fp32 / bf16 bits; aborts (an invariant) on the other dtype.
  float* f32() const {
    ANNEAL_CHECK(dtype_ == DType::kF32, "f32() of a view of another dtype");
    return static_cast<float*>(data_);
  }
  int32_t* i32() const {
    ANNEAL_CHECK(dtype_ == DType::kI32, "i32() of a view of another dtype");
    return static_cast<int32_t*>(data_);
  }
  static TensorView I32(const int32_t* data, std::initializer_list<int64_t> shape, Device d = Device::Cpu()) {
    return TensorView(const_cast<int32_t*>(data), DType::kI32, shape, d);
  }
  double* f64() const {
    ANNEAL_CHECK(dtype_ == DType::kF64, "f64() of a view of another dtype");
    return static_cast<double*>(data_);
  }
  static TensorView F64(double* data, std::initializer_list<int64_t> shape, Device d = Device::Cpu()) {
    return TensorView(data, DType::kF64, shape, d);
  }
  uint16_t* bf16() const {
    ANNEAL_CHECK(dtype_ == DType::kBF16, "bf16() of a view of another dtype");
    return static_cast<uint16_t*>(data_);
  }
  // Rows [begin, begin + n) of dimension 0 (any strides).
  TensorView Rows(int64_t begin, int64_t n) const;
  // The same memory seen with another contiguous shape of equal numel (aborts otherwise).
  TensorView Reshape(std::initializer_list<int64_t> shape) const;
  // A view with explicit strides (elements), e.g. a column block of a row-major matrix.
  TensorView Strided(std::initializer_list<int64_t> shape, std::initializer_list<int64_t> strides) const;
  // The same shape and strides over other memory of another dtype (a widened or staged copy).
  TensorView WithData(void* data, DType t) const {
    TensorView v = *this;
    v.data_ = data;
    v.dtype_ = t;
    return v;
  }
  // "f32[4, 8] cpu" (for messages).
  std::string ToString() const;

 private:
  void* data_ = nullptr;
  DType dtype_ = DType::kF32;
  Device device_;
  int ndim_ = 0;
  std::array<int64_t, kMaxDims> shape_{};
  std::array<int64_t, kMaxDims> strides_{};
};

// The short name the ops use.
using TV = TensorView;

// An element pointer into a backend's memory with its dtype: what code outside the backend passes
// around for a buffer it must not dereference (the model's activations and parameters in the
// compute dtype). `+ n` moves n elements.
struct DevPtr {
  void* p = nullptr;
  DType t = DType::kF32;
  DevPtr operator+(size_t n) const { return {static_cast<char*>(p) + n * SizeOf(t), t}; }
  explicit operator bool() const { return p != nullptr; }
  // As fp32 (aborts, an invariant, on another dtype).
  float* f32() const {
    ANNEAL_CHECK(t == DType::kF32, "f32() of a pointer of another dtype");
    return static_cast<float*>(p);
  }
};

}  // namespace anneal
