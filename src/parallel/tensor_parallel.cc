#include "parallel/tensor_parallel.h"

namespace anneal {

void CommTensorParallelGroup::AllReduceSum(float* x, size_t n) {
  if (!status_.ok()) return;
  const double t = comm_->size();
  bytes_ += 2.0 * (t - 1) / t * n * sizeof(float);
  status_ = comm_->AllReduceSum(x, n);
}

void CommTensorParallelGroup::AllGather(const double* in, size_t n, double* out) {
  if (!status_.ok()) return;
  bytes_ += (comm_->size() - 1.0) * n * sizeof(double);
  status_ = comm_->AllGatherBytes(in, n * sizeof(double), out);
}

void CommTensorParallelGroup::ReduceScatterSum(const float* x, size_t n, float* y) {
  if (!status_.ok()) return;
  const size_t t = comm_->size();
  bytes_ += (t - 1.0) / t * n * sizeof(float);
  status_ = comm_->ReduceScatterSum(x, std::vector<size_t>(t, n / t), y);
}

void CommTensorParallelGroup::AllGatherInPlace(float* x, size_t n) {
  if (!status_.ok()) return;
  const size_t t = comm_->size();
  bytes_ += (t - 1.0) / t * n * sizeof(float);
  status_ = comm_->AllGatherV(x, std::vector<size_t>(t, n / t));
}

}  // namespace anneal
