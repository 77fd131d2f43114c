// Buffer: memory a backend's Allocator gave, freed when the Buffer goes (RAII, move-only).
// Host allocators hand out zeroed, 64-byte aligned memory. An allocation that fails is an error
// naming what was being allocated and how much (an out-of-memory on a GPU says which tensor did not
// fit and suggests recomputation or a smaller batch), never a crash.
#pragma once

#include <atomic>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <utility>

#include "core/status.h"
#include "tensor/view.h"

namespace anneal {

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Device device() const = 0;
  // `bytes` (> 0) of memory; `what` names the allocation in the error.
  virtual Result<void*> Allocate(size_t bytes, const std::string& what) = 0;
  virtual void Free(void* p, size_t bytes) = 0;

  // Bytes of the live Buffers made from this allocator, and the most at once since it was made or
  // since ResetPeak() (the high-water mark the trainer prints beside its memory formula). Buffers
  // count themselves (Note) when they take and give back memory; thread-safe.
  size_t bytes_in_use() const { return in_use_.load(std::memory_order_relaxed); }
  size_t peak_bytes() const { return peak_.load(std::memory_order_relaxed); }
  void ResetPeak() { peak_.store(in_use_.load(std::memory_order_relaxed), std::memory_order_relaxed); }
  void Note(size_t bytes, bool taken) {
    if (!taken) {
      in_use_.fetch_sub(bytes, std::memory_order_relaxed);
      return;
    }
    const size_t now = in_use_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    size_t peak = peak_.load(std::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
  }

 private:
  std::atomic<size_t> in_use_{0}, peak_{0};
};

// The host's allocator: zeroed, 64-byte aligned.
Allocator& HostAllocator();

class Buffer {
 public:
  Buffer() = default;
  Buffer(Allocator* a, void* p, size_t bytes) : alloc_(a), data_(p), bytes_(bytes) {
    if (alloc_ && data_) alloc_->Note(bytes_, true);
  }
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      Reset();
      std::swap(alloc_, o.alloc_);
      std::swap(data_, o.data_);
      std::swap(bytes_, o.bytes_);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { Reset(); }

  // `bytes` from `a` (0 bytes: an empty buffer, no call).
  static Result<Buffer> Make(Allocator& a, size_t bytes, const std::string& what);

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return alloc_ ? alloc_->device() : Device::Cpu(); }
  // A contiguous view of the start of the buffer (aborts if it does not fit).
  TensorView View(DType t, std::initializer_list<int64_t> shape) const;
  void Reset() {
    if (alloc_ && data_) {
      alloc_->Note(bytes_, false);
      alloc_->Free(data_, bytes_);
    }
    alloc_ = nullptr;
    data_ = nullptr;
    bytes_ = 0;
  }

 private:
  Allocator* alloc_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace anneal
