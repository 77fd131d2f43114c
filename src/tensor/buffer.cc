#include "tensor/buffer.h"

#include <cstdlib>
#include <cstring>

#include "core/check.h"

namespace anneal {

namespace {
class HostAlloc final : public Allocator {
 public:
  Device device() const override { return Device::Cpu(); }
  Result<void*> Allocate(size_t bytes, const std::string& what) override {
    const size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) {
      return Status(Code::kInternal, "out of host memory allocating " + what + " (" + std::to_string(bytes) +
                                         " bytes): use activation recomputation, a smaller batch or more ranks");
    }
    std::memset(p, 0, rounded);
    return p;
  }
  void Free(void* p, size_t) override { std::free(p); }
};
}  // namespace

Allocator& HostAllocator() {
  static HostAlloc a;
  return a;
}

Result<Buffer> Buffer::Make(Allocator& a, size_t bytes, const std::string& what) {
  if (bytes == 0) return Buffer();
  ANNEAL_ASSIGN_OR_RETURN(void* p, a.Allocate(bytes, what));
  return Buffer(&a, p, bytes);
}

TensorView Buffer::View(DType t, std::initializer_list<int64_t> shape) const {
  TensorView v(data_, t, shape, device());
  ANNEAL_CHECK(v.bytes() <= bytes_, "a view larger than its buffer");
  return v;
}

}  // namespace anneal
