// The tensor-parallel group's collectives for GptModel (model/gpt.h TensorParallelGroup) over a
// Communicator: blocking, in the caller's thread (the group is on one host in every sensible layout,
// where the Gloo communicator takes its shared-memory path). The first failure is kept: later calls
// do nothing, and status() reports it (the trainer checks after each step; exit 3 naming the lost
// rank). Not thread-safe.
#pragma once

#include "core/status.h"
#include "dist/communicator.h"
#include "model/gpt.h"

namespace anneal {

class CommTensorParallelGroup : public TensorParallelGroup {
 public:
  explicit CommTensorParallelGroup(Communicator* comm) : comm_(comm) {}
  void AllReduceSum(float* x, size_t n) override;
  void AllGather(const double* in, size_t n, double* out) override;
  void ReduceScatterSum(const float* x, size_t n, float* y) override;
  void AllGatherInPlace(float* x, size_t n) override;
  const Status& status() const { return status_; }
  // Bytes this rank sent into the group's collectives (allreduce: 2(t-1)/t of the buffer, all-gather
  // and reduce-scatter: (t-1)/t of the whole, as a ring moves them), for bench/tp_overhead.
  double bytes() const { return bytes_; }

 private:
  Communicator* comm_;
  Status status_;
  double bytes_ = 0;
};

}  // namespace anneal
