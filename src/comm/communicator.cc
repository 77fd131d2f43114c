#include "comm/communicator.h"

namespace anneal {

namespace {
class DoneWork final : public Work {
 public:
  explicit DoneWork(Status s) : s_(std::move(s)) {}
  Status Wait() override { return s_; }

 private:
  Status s_;
};

// Two operations queued one after the other, done when both are (the first error wins).
class BothWork final : public Work {
 public:
  BothWork(std::unique_ptr<Work> a, std::unique_ptr<Work> b) : a_(std::move(a)), b_(std::move(b)) {}
  Status Wait() override {
    Status s = a_->Wait();
    Status t = b_->Wait();
    return s.ok() ? t : s;
  }

 private:
  std::unique_ptr<Work> a_, b_;
};

// Ok when every view lives on the communicator's device and is contiguous.
Status CheckViews(const Communicator& c, const char* op, std::initializer_list<const TensorView*> views) {
  for (const TensorView* v : views) {
    if (v->device() != c.device() || !v->contiguous()) {
      return Internal(std::string(op) + " on group " + c.group() + ": buffer " + v->ToString() +
                      " is not contiguous memory of the communicator's device " + c.device().ToString());
    }
  }
  return Status::Ok();
}
}  // namespace

std::unique_ptr<Work> FailedWork(Status s) { return std::make_unique<DoneWork>(std::move(s)); }

std::unique_ptr<Work> Communicator::StartAllReduceSum(const TensorView& x, const Event& ready) {
  if (Status s = CheckViews(*this, "allreduce", {&x}); !s.ok()) return FailedWork(s);
  WaitFor(ready);
  const size_t n = static_cast<size_t>(x.numel());
  if (x.dtype() == DType::kF32) return StartAllReduceSum(x.f32(), n);
  if (x.dtype() == DType::kF64) return StartAllReduceSum(x.f64(), n);
  if (x.dtype() == DType::kBF16) {  // reduce-scatter into place, then all-gather the pieces (queued in order)
    std::vector<size_t> counts(size());
    for (int r = 0; r < size(); ++r) counts[r] = n / size() + (static_cast<size_t>(r) < n % size() ? 1 : 0);
    size_t own = 0;
    for (int r = 0; r < rank(); ++r) own += counts[r];
    uint16_t* v = static_cast<uint16_t*>(x.data());
    auto rs = StartReduceScatterSumBf16(v, counts, v + own);
    std::vector<size_t> bytes(counts);
    for (size_t& b : bytes) b *= sizeof(uint16_t);
    return std::make_unique<BothWork>(std::move(rs), StartAllGatherVBytes(v, bytes));
  }
  return FailedWork(Internal("allreduce on group " + group() + ": unsupported dtype " + DTypeName(x.dtype())));
}

std::unique_ptr<Work> Communicator::StartReduceScatterSum(const TensorView& x, const std::vector<size_t>& counts,
                                                          const TensorView& y, const Event& ready) {
  if (Status s = CheckViews(*this, "reduce-scatter", {&x, &y}); !s.ok()) return FailedWork(s);
  WaitFor(ready);
  if (x.dtype() == DType::kF32 && y.dtype() == DType::kF32) return StartReduceScatterSum(x.f32(), counts, y.f32());
  if (x.dtype() == DType::kBF16 && y.dtype() == DType::kBF16) {
    return StartReduceScatterSumBf16(static_cast<const uint16_t*>(x.data()), counts, static_cast<uint16_t*>(y.data()));
  }
  return FailedWork(Internal("reduce-scatter on group " + group() + ": unsupported dtypes " + DTypeName(x.dtype()) +
                             " -> " + DTypeName(y.dtype())));
}

std::unique_ptr<Work> Communicator::StartAllGatherV(const TensorView& x, const std::vector<size_t>& counts,
                                                    const Event& ready) {
  if (Status s = CheckViews(*this, "all-gather", {&x}); !s.ok()) return FailedWork(s);
  WaitFor(ready);
  std::vector<size_t> bytes(counts);
  for (size_t& b : bytes) b *= SizeOf(x.dtype());
  return StartAllGatherVBytes(x.data(), bytes);
}

std::unique_ptr<Work> Communicator::StartAllGather(const TensorView& in, const TensorView& out, const Event& ready) {
  if (Status s = CheckViews(*this, "all-gather", {&in, &out}); !s.ok()) return FailedWork(s);
  if (out.bytes() != in.bytes() * static_cast<size_t>(size())) {
    return FailedWork(Internal("all-gather on group " + group() + ": output " + out.ToString() + " is not " +
                               std::to_string(size()) + " x the input " + in.ToString()));
  }
  WaitFor(ready);
  return StartAllGatherBytes(in.data(), in.bytes(), out.data());
}

std::unique_ptr<Work> Communicator::StartSend(const TensorView& x, int peer, const Event& ready) {
  if (Status s = CheckViews(*this, "send", {&x}); !s.ok()) return FailedWork(s);
  WaitFor(ready);
  return StartSend(x.data(), x.bytes(), peer);
}

std::unique_ptr<Work> Communicator::StartRecv(const TensorView& x, int peer, const Event& ready) {
  if (Status s = CheckViews(*this, "recv", {&x}); !s.ok()) return FailedWork(s);
  WaitFor(ready);
  return StartRecv(x.data(), x.bytes(), peer);
}

Result<std::unique_ptr<Communicator>> ConnectCommunicator(const Device& d, Store* store, const CommOptions& options) {
  if (d.is_cpu()) return ConnectGloo(store, options);
  return ConnectNccl(store, options, d.index);
}

}  // namespace anneal
