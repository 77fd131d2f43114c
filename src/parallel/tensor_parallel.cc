#include "parallel/tensor_parallel.h"

namespace anneal {

void CommTensorParallelGroup::AllReduceSum(const TensorView& x, const Event& ready) {
  if (!status_.ok()) return;
  const double t = comm_->size();
  bytes_ += 2.0 * (t - 1) / t * x.bytes();
  status_ = comm_->StartAllReduceSum(x, ready)->Wait();
}

void CommTensorParallelGroup::AllGather(const TensorView& in, const TensorView& out, const Event& ready) {
  if (!status_.ok()) return;
  bytes_ += (comm_->size() - 1.0) * in.bytes();
  status_ = comm_->StartAllGather(in, out, ready)->Wait();
}

void CommTensorParallelGroup::ReduceScatterSum(const TensorView& x, const TensorView& y, const Event& ready) {
  if (!status_.ok()) return;
  const size_t t = comm_->size(), n = static_cast<size_t>(x.numel());
  bytes_ += (t - 1.0) / t * x.bytes();
  status_ = comm_->StartReduceScatterSum(x, std::vector<size_t>(t, n / t), y, ready)->Wait();
}

void CommTensorParallelGroup::AllGatherInPlace(const TensorView& x, const Event& ready) {
  if (!status_.ok()) return;
  const size_t t = comm_->size(), n = static_cast<size_t>(x.numel());
  bytes_ += (t - 1.0) / t * x.bytes();
  status_ = comm_->StartAllGatherV(x, std::vector<size_t>(t, n / t), ready)->Wait();
}

}  // namespace anneal
