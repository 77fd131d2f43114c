// DataParallel: data parallelism applied from outside the model (DESIGN.md: parallelism stays out of
// model code). The model's grad-ready hook feeds it ranges of the flat gradient buffer as backward
// finishes them; it packs them into buckets of about bucket_floats and starts each bucket's
// communication at once, on the communicator's thread, while backward goes on.
//
//   zero 0: every rank holds all optimizer state; buckets are allreduced (sum) on the last
//           micro-step of a step, and every rank runs the same full AdamW update.
//   zero 1: optimizer state is sharded: rank r owns the flat range shard(r) (contiguous, ~1/dp of
//           the parameters). On the last micro-step buckets are reduce-scattered (each rank
//           receives the sum of its own part), the rank updates its shard, then AllGatherParams
//           gives every rank the whole updated parameter vector.
//   zero 2: gradients are sharded too: every micro-step's buckets are reduce-scattered at once and
//           added into a shard-sized accumulator, and the model's buffer is zeroed for the next
//           micro-step, so accumulated gradients exist only as 1/dp shards. (The model still
//           computes one micro-step's gradients into its full-size buffer: see the closing
//           "memory" section of docs/architecture.md.)
// The gradient sums are averages because the trainer scales the loss by 1/(B·T·accum·dp).
// Every reduction is deterministic (Gloo's ring allreduce gives every rank the same bits; the
// reduce-scatter sums in rank order), so replicas never drift apart.
//
// Not thread-safe: call from the training thread (the hook runs there, inside Backward).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "core/status.h"
#include "dist/communicator.h"

namespace anneal {

class DataParallel {
 public:
  DataParallel(Communicator* comm, size_t total_floats, int zero, size_t bucket_floats);

  int zero() const { return zero_; }
  int dp() const { return comm_->size(); }
  Communicator& comm() { return *comm_; }
  // The part of the flat vector whose optimizer state this rank holds: [shard_begin, shard_end).
  // With zero 0 it is everything.
  size_t shard_begin() const { return zero_ == 0 ? 0 : begin_[comm_->rank()]; }
  size_t shard_end() const { return zero_ == 0 ? total_ : begin_[comm_->rank()] + count_[comm_->rank()]; }
  // Shard of rank r: [ShardBegin(r), ShardBegin(r) + ShardCount(r)) — for checkpoints.
  static size_t ShardBegin(size_t total, int dp, int r);
  static size_t ShardCount(size_t total, int dp, int r);

  // Before a micro-step's backward: grads is the model's flat gradient buffer.
  void BeginBackward(float* grads, bool last_micro_step);
  // The model's grad-ready hook.
  void GradsReady(size_t begin, size_t end);
  // After the backward: starts the last bucket and waits for all of them (a peer failure is a
  // PeerError). With zero 2, adds this micro-step's reduced shard into the accumulator and zeroes
  // the model's buffer.
  Status EndBackward();
  // What the optimizer updates from, pointing at element shard_begin(): the full reduced
  // gradients (zero 0), this rank's reduced part of them (zero 1), or the accumulator (zero 2).
  float* OptimizerGrads();
  // Zero 2: clears the accumulator (after the optimizer step).
  void ResetAccumulator();
  // After the optimizer updated params[shard]: gives every rank every shard (zero 1, 2).
  Status AllGatherParams(float* params);
  // Floats this engine holds itself (the zero-2 accumulator).
  size_t floats_held() const { return acc_.size(); }

 private:
  void Launch(size_t lo, size_t hi);

  Communicator* comm_;
  size_t total_;
  int zero_;
  size_t bucket_floats_;
  std::vector<size_t> begin_, count_;  // shard of each rank
  float* grads_ = nullptr;
  bool communicate_ = false;
  size_t pending_lo_ = 0, pending_hi_ = 0;  // ready, not yet launched: [lo, hi)
  std::vector<std::unique_ptr<Work>> inflight_;
  std::vector<float> acc_;  // zero 2: accumulated gradient shard
};

}  // namespace anneal
