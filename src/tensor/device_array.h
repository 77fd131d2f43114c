// DeviceArray: a zero-initialised array of one dtype in a backend's memory, re-made (not resized in
// place) by Assign — what a model's parameters, gradients, activations and scratch live in. The host
// may touch data() only on a backend whose memory it can reach (Backend::HostAccessible); everything
// else goes through the backend's ops and copies. Movable, not copyable.
#pragma once

#include <string>

#include "core/status.h"
#include "tensor/backend.h"

namespace anneal {

class DeviceArray {
 public:
  DeviceArray() = default;
  // n elements of t from b's allocator, zeroed, replacing what was held (n = 0: empty). An
  // allocation that fails leaves the array empty and names `what` in the error.
  Status Assign(Backend& b, size_t n, const std::string& what, DType t = DType::kF32) {
    Reset();
    if (n == 0) return Status::Ok();
    auto buf = b.Allocate(t, n, what);
    if (!buf.ok()) return buf.status();
    buf_ = std::move(*buf);
    n_ = n;
    t_ = t;
    return Status::Ok();
  }
  void Reset() {
    buf_.Reset();
    n_ = 0;
  }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  DType dtype() const { return t_; }
  float* data() const { return n_ ? static_cast<float*>(buf_.data()) : nullptr; }
  double* f64() const { return n_ ? static_cast<double*>(buf_.data()) : nullptr; }
  int32_t* i32() const { return n_ ? static_cast<int32_t*>(buf_.data()) : nullptr; }
  // The first element with its dtype.
  DevPtr ptr() const { return {n_ ? buf_.data() : nullptr, t_}; }
  // The whole array as a 1-D view.
  TensorView View() const { return buf_.View(t_, {static_cast<int64_t>(n_)}); }

 private:
  Buffer buf_;
  size_t n_ = 0;
  DType t_ = DType::kF32;
};

}  // namespace anneal
