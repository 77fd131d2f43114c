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

}  // namespace anneal
