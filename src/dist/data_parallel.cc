#include "dist/data_parallel.h"

#include <algorithm>
#include <cstdlib>

namespace anneal {

size_t DataParallel::ShardBegin(size_t total, int dp, int r) {
  const size_t per = (total + dp - 1) / dp;
  return std::min(total, per * static_cast<size_t>(r));
}

size_t DataParallel::ShardCount(size_t total, int dp, int r) {
  const size_t per = (total + dp - 1) / dp;
  return std::min(total, ShardBegin(total, dp, r) + per) - ShardBegin(total, dp, r);
}

DataParallel::DataParallel(Communicator* comm, size_t total_floats, int zero, size_t bucket_floats)
    : comm_(comm), total_(total_floats), zero_(zero), bucket_floats_(std::max<size_t>(1, bucket_floats)) {
  for (int r = 0; r < comm->size(); ++r) {
    begin_.push_back(ShardBegin(total_, comm->size(), r));
    count_.push_back(ShardCount(total_, comm->size(), r));
  }
  if (zero_ == 2) acc_.assign(count_[comm->rank()], 0.0f);
}

void DataParallel::BeginBackward(float* grads, bool last_micro_step) {
  grads_ = grads;
  communicate_ = zero_ == 2 || last_micro_step;
  pending_lo_ = pending_hi_ = 0;
  inflight_.clear();
}

void DataParallel::GradsReady(size_t begin, size_t end) {
  if (!communicate_ || begin >= end) return;
  if (pending_lo_ == pending_hi_) {
    pending_lo_ = begin;
    pending_hi_ = end;
  } else {
    if (end != pending_lo_) std::abort();  // the model's contract: contiguous, decreasing
    pending_lo_ = begin;
  }
  if (pending_hi_ - pending_lo_ >= bucket_floats_) {
    Launch(pending_lo_, pending_hi_);
    pending_lo_ = pending_hi_ = 0;
  }
}

void DataParallel::Launch(size_t lo, size_t hi) {
  if (zero_ == 0) {
    inflight_.push_back(comm_->StartAllReduceSum(grads_ + lo, hi - lo));
    return;
  }
  // Reduce-scatter the bucket along the shard boundaries: rank r receives [lo,hi) ∩ shard(r),
  // in place at its own position in the gradient buffer.
  std::vector<size_t> counts(comm_->size());
  for (int r = 0; r < comm_->size(); ++r) {
    const size_t a = std::max(lo, begin_[r]), b = std::min(hi, begin_[r] + count_[r]);
    counts[r] = b > a ? b - a : 0;
  }
  const int me = comm_->rank();
  const size_t my_lo = std::clamp(begin_[me], lo, hi);
  inflight_.push_back(comm_->StartReduceScatterSum(grads_ + lo, counts, grads_ + my_lo));
}

Status DataParallel::EndBackward() {
  if (!communicate_) return Status::Ok();
  if (pending_hi_ > pending_lo_) Launch(pending_lo_, pending_hi_);
  pending_lo_ = pending_hi_ = 0;
  Status first;
  for (auto& w : inflight_) {
    Status s = w->Wait();
    if (first.ok() && !s.ok()) first = s;
  }
  inflight_.clear();
  ANNEAL_RETURN_IF_ERROR(first);
  if (zero_ == 2) {
    const float* mine = grads_ + shard_begin();
    for (size_t i = 0; i < acc_.size(); ++i) acc_[i] += mine[i];
    std::fill(grads_, grads_ + total_, 0.0f);
  }
  return Status::Ok();
}

float* DataParallel::OptimizerGrads() { return zero_ == 2 ? acc_.data() : grads_ + shard_begin(); }

void DataParallel::ResetAccumulator() { std::fill(acc_.begin(), acc_.end(), 0.0f); }

Status DataParallel::AllGatherParams(float* params) {
  if (zero_ == 0 || comm_->size() == 1) return Status::Ok();
  return comm_->AllGatherV(params, count_);
}

}  // namespace anneal
