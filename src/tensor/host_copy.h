// Host access to a backend's memory, for the code that needs values on the host (checkpoints, state
// hashes, initialisation, sampling): on a backend the host can reach (Backend::HostAccessible) the
// memory itself, no copy; otherwise a staged host copy through the backend's copies (synchronised).
#pragma once

#include <vector>

#include "tensor/backend.h"

namespace anneal {

// n floats at backend pointer p, readable on the host while this lives.
class HostRead {
 public:
  HostRead(Backend& b, const float* p, size_t n) : p_(p) {
    if (b.HostAccessible() || n == 0) return;
    copy_.resize(n);
    b.CopyToHost(copy_.data(), TV::F32(p, {static_cast<int64_t>(n)}, b.device()), b.DefaultStream());
    b.Synchronize(b.DefaultStream());
    p_ = copy_.data();
  }
  const float* data() const { return p_; }

 private:
  const float* p_;
  std::vector<float> copy_;
};

// n floats at backend pointer p, read and written on the host; Commit() puts them back (a no-op
// where the host wrote the memory itself).
class HostWrite {
 public:
  HostWrite(Backend& b, float* p, size_t n) : b_(b), dev_(p), n_(n), p_(p) {
    if (b.HostAccessible() || n == 0) return;
    copy_.resize(n);
    b.CopyToHost(copy_.data(), TV::F32(p, {static_cast<int64_t>(n)}, b.device()), b.DefaultStream());
    b.Synchronize(b.DefaultStream());
    p_ = copy_.data();
  }
  float* data() const { return p_; }
  void Commit() {
    if (copy_.empty()) return;
    b_.CopyFromHost(TV::F32(dev_, {static_cast<int64_t>(n_)}, b_.device()), copy_.data(), b_.DefaultStream());
    b_.Synchronize(b_.DefaultStream());
  }

 private:
  Backend& b_;
  float* dev_;
  size_t n_;
  float* p_;
  std::vector<float> copy_;
};

}  // namespace anneal
