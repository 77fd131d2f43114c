#include "tensor/view.h"

#include "core/check.h"

namespace anneal {

namespace {
void SetContiguousStrides(int n, const std::array<int64_t, TensorView::kMaxDims>& shape,
                          std::array<int64_t, TensorView::kMaxDims>* strides) {
  int64_t s = 1;
  for (int i = n - 1; i >= 0; --i) {
    (*strides)[i] = s;
    s *= shape[i];
  }
}
}  // namespace

TensorView::TensorView(void* data, DType dtype, std::initializer_list<int64_t> shape, Device device)
    : data_(data), dtype_(dtype), device_(device), ndim_(static_cast<int>(shape.size())) {
  ANNEAL_CHECK(ndim_ <= kMaxDims, "a view of more dimensions than kMaxDims");
  int i = 0;
  for (int64_t d : shape) {
    ANNEAL_CHECK(d >= 0, "a negative dimension");
    shape_[i++] = d;
  }
  SetContiguousStrides(ndim_, shape_, &strides_);
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim_; ++i) n *= shape_[i];
  return n;
}

bool TensorView::contiguous() const {
  int64_t s = 1;
  for (int i = ndim_ - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != s) return false;
    s *= shape_[i];
  }
  return true;
}

TensorView TensorView::Rows(int64_t begin, int64_t n) const {
  ANNEAL_CHECK(ndim_ > 0 && begin >= 0 && n >= 0 && begin + n <= shape_[0], "Rows outside the view");
  TensorView v = *this;
  v.data_ = static_cast<char*>(data_) + static_cast<size_t>(begin * strides_[0]) * SizeOf(dtype_);
  v.shape_[0] = n;
  return v;
}

TensorView TensorView::Reshape(std::initializer_list<int64_t> shape) const {
  ANNEAL_CHECK(contiguous(), "Reshape of a strided view");
  TensorView v(data_, dtype_, shape, device_);
  ANNEAL_CHECK(v.numel() == numel(), "Reshape to another number of elements");
  return v;
}

TensorView TensorView::Strided(std::initializer_list<int64_t> shape, std::initializer_list<int64_t> strides) const {
  ANNEAL_CHECK(shape.size() == strides.size() && shape.size() <= kMaxDims, "Strided with a shape and strides that differ");
  TensorView v = *this;
  v.ndim_ = static_cast<int>(shape.size());
  int i = 0;
  for (int64_t d : shape) v.shape_[i++] = d;
  i = 0;
  for (int64_t s : strides) v.strides_[i++] = s;
  return v;
}

std::string TensorView::ToString() const {
  std::string s = std::string(DTypeName(dtype_)) + "[";
  for (int i = 0; i < ndim_; ++i) s += (i ? ", " : "") + std::to_string(shape_[i]);
  return s + "] " + device_.ToString();
}

}  // namespace anneal
