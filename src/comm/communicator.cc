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
  return FailedWork(Internal("allreduce on group " + group() + ": unsupported dtype " + DTypeName(x.dtype())));
}

std::unique_ptr<Work> Communicator::StartReduceScatterSum(const TensorView& x, const std::vector<size_t>& counts,
                                                          const TensorView& y, const Event& ready) {
  if (Status s = CheckViews(*this, "reduce-scatter", {&x, &y}); !s.ok()) return FailedWork(s);
  WaitFor(ready);
  return StartReduceScatterSum(x.f32(), counts, y.f32());
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
