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
  void AllReduceSum(const TensorView& x, const Event& ready) override;
  void AllGather(const TensorView& in, const TensorView& out, const Event& ready) override;
  void ReduceScatterSum(const TensorView& x, const TensorView& y, const Event& ready) override;
  void AllGatherInPlace(const TensorView& x, const Event& ready) override;
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
