// Host access to a backend's memory, for the code that needs values on the host (checkpoints, state
// hashes, initialisation, sampling), always as fp32: on a backend the host can reach
// (Backend::HostAccessible) fp32 memory is used itself, no copy; otherwise — another device, or
// bf16 memory — a staged fp32 copy through the backend's copies (synchronised), bf16 widened exactly
// on the way in and rounded to nearest even on the way back.
#pragma once

#include <cstring>
#include <vector>

#include "tensor/backend.h"

namespace anneal {

// n values at backend pointer p copied to the host as fp32 (bf16 widened exactly), synchronised.
inline std::vector<float> CopyToHostF32(Backend& b, DevPtr p, size_t n) {
  std::vector<float> out(n);
  const TensorView v(p.p, p.t, {static_cast<int64_t>(n)}, b.device());
  if (p.t == DType::kBF16) {
    std::vector<uint16_t> raw(n);
    b.CopyToHost(raw.data(), v, b.DefaultStream());
    b.Synchronize(b.DefaultStream());
    Bf16ToFloats(raw.data(), out.data(), n);
  } else {
    b.CopyToHost(out.data(), v, b.DefaultStream());
    b.Synchronize(b.DefaultStream());
  }
  return out;
}

// n values at backend pointer p, readable on the host as fp32 while this lives.
class HostRead {
 public:
  HostRead(Backend& b, DevPtr p, size_t n) : p_(static_cast<const float*>(p.p)) {
    if ((b.HostAccessible() && p.t == DType::kF32) || n == 0) return;
    copy_ = CopyToHostF32(b, p, n);
    p_ = copy_.data();
  }
  HostRead(Backend& b, const float* p, size_t n) : HostRead(b, DevPtr{const_cast<float*>(p), DType::kF32}, n) {}
  const float* data() const { return p_; }

 private:
  const float* p_;
  std::vector<float> copy_;
};

// n values at backend pointer p, read and written on the host as fp32; Commit() puts them back (a
// no-op where the host wrote fp32 memory itself).
class HostWrite {
 public:
  HostWrite(Backend& b, DevPtr p, size_t n) : b_(b), dev_(p), n_(n), p_(static_cast<float*>(p.p)) {
    if ((b.HostAccessible() && p.t == DType::kF32) || n == 0) return;
    copy_ = CopyToHostF32(b, p, n);
    p_ = copy_.data();
  }
  HostWrite(Backend& b, float* p, size_t n) : HostWrite(b, DevPtr{p, DType::kF32}, n) {}
  float* data() const { return p_; }
  void Commit() {
    if (copy_.empty()) return;
    const TensorView v(dev_.p, dev_.t, {static_cast<int64_t>(n_)}, b_.device());
    if (dev_.t == DType::kBF16) {
      std::vector<uint16_t> raw(n_);
      FloatsToBf16(copy_.data(), raw.data(), n_);
      b_.CopyFromHost(v, raw.data(), b_.DefaultStream());
    } else {
      b_.CopyFromHost(v, copy_.data(), b_.DefaultStream());
    }
    b_.Synchronize(b_.DefaultStream());
  }

 private:
  Backend& b_;
  DevPtr dev_;
  size_t n_;
  float* p_;
  std::vector<float> copy_;
};

}  // namespace anneal
