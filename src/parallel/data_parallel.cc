#include "parallel/data_parallel.h"

#include "core/check.h"
#include "tensor/host_copy.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace anneal {

namespace {
constexpr const char* kGradRange = "a ZeRO gradient range";
}  // namespace

DataParallel::DataParallel(Communicator* comm, Communicator* replica, Backend& backend, Stream stream,
                           size_t total_floats, int zero, size_t bucket_floats)
    : comm_(comm),
      replica_(replica && replica->size() > 1 ? replica : nullptr),
      total_(total_floats),
      zero_(zero),
      bucket_floats_(std::max<size_t>(1, bucket_floats)),
      be_(backend),
      st_(stream) {
  for (int r = 0; r < comm->size(); ++r) {
    begin_.push_back(ParallelPlan::ZeroShardBegin(total_, comm->size(), r));
    count_.push_back(ParallelPlan::ZeroShardCount(total_, comm->size(), r));
  }
  if (zero_ >= 2) first_error_ = acc_.Assign(be_, count_[comm->rank()], "the ZeRO gradient accumulator");
}

void DataParallel::BeginBackward(DevPtr grads, bool last_micro_step) {
  narrow_ = {};
  if (grads && grads.t != DType::kF32) {
    ANNEAL_CHECK(zero_ < 2 && grads.t == DType::kBF16, "narrow gradients with ZeRO-2, or not bf16 (the config refuses both)");
    if (wide_.size() != total_) {  // Attach could not allocate it: EndBackward says so
      grads_ = nullptr;
      communicate_ = false;
      return;
    }
    narrow_ = grads;
    grads_ = wide_.data();
    if (widen_fence_.handle) {
      be_.WaitEvent(st_, widen_fence_);
      widen_fence_ = Event{};
    }
  } else {
    grads_ = grads ? grads.f32() : nullptr;
  }
  communicate_ = zero_ >= 2 || last_micro_step;
  last_micro_step_ = last_micro_step;
  pending_lo_ = pending_hi_ = 0;
  inflight_.clear();
  peak_buffer_floats_ = buffer_floats_;
}

DeviceArray DataParallel::TakeBuffer(std::vector<DeviceArray>* pool, size_t n, DType t, const char* what) {
  // Reuse a retired buffer of the same range (the same ranges come back every micro-step): no fresh
  // pages to fault in each time.
  for (auto it = pool->begin(); it != pool->end(); ++it) {
    if (it->size() == n) {
      DeviceArray a = std::move(*it);
      pool->erase(it);
      return a;
    }
  }
  DeviceArray a;
  Status s = a.Assign(be_, n, what, t);
  if (!s.ok()) {  // the GradSink contract has no error path: say what did not fit, and stop
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    std::fflush(stderr);
    std::_Exit(s.ExitCode());  // not a bug but the run's end: device memory ran out (the message says how much)
  }
  return a;
}

DevPtr DataParallel::Acquire(size_t begin, size_t end) {
  auto b = std::make_unique<RangeBuffer>();
  b->begin = begin;
  b->end = end;
  DeviceArray& written = narrow_model_ ? b->narrow : b->data;
  written = narrow_model_ ? TakeBuffer(&narrow_pool_, end - begin, DType::kBF16, kGradRange)
                          : TakeBuffer(&pool_, end - begin, DType::kF32, kGradRange);
  be_.Zero(st_, TensorView(written.ptr().p, written.dtype(), {static_cast<int64_t>(end - begin)}, be_.device()));
  buffer_floats_ += narrow_model_ ? (end - begin + 1) / 2 : end - begin;  // in fp32 equivalents
  peak_buffer_floats_ = std::max(peak_buffer_floats_, buffer_floats_);
  const DevPtr p = written.ptr();
  acquired_.push_back(std::move(b));
  return p;
}

void DataParallel::Release(size_t begin, size_t end) {
  auto it = std::find_if(acquired_.begin(), acquired_.end(), [&](const auto& b) { return b->begin == begin; });
  ANNEAL_CHECK(it != acquired_.end() && (*it)->end == end, "Release of a range not acquired (the GradSink contract)");
  std::unique_ptr<RangeBuffer> b = std::move(*it);
  acquired_.erase(it);
  if (ReduceNarrow()) {  // reduced as bf16, in place; widened part by part when retired
    b->work = StartReduceScatter(b->narrow.ptr(), begin, end);
    inflight_ranges_.push_back(std::move(b));
    while (inflight_ranges_.size() > kMaxInflight) RetireOldest();
    return;
  }
  if (narrow_model_) {  // widen (exactly) into an fp32 range buffer, and retire the bf16 one
    const size_t n = end - begin;
    b->data = TakeBuffer(&pool_, n, DType::kF32, kGradRange);
    be_.Copy(st_, View(b->data.data(), n), TensorView(b->narrow.ptr().p, DType::kBF16, {static_cast<int64_t>(n)}, be_.device()));
    narrow_pool_.push_back(std::move(b->narrow));
    buffer_floats_ += n - (n + 1) / 2;
    peak_buffer_floats_ = std::max(peak_buffer_floats_, buffer_floats_);
  }
  b->work = StartReduceScatter(b->data.ptr(), begin, end);
  inflight_ranges_.push_back(std::move(b));
  while (inflight_ranges_.size() > kMaxInflight) RetireOldest();
}

void DataParallel::RetireOldest() {
  std::unique_ptr<RangeBuffer> b = std::move(inflight_ranges_.front());
  inflight_ranges_.erase(inflight_ranges_.begin());
  Status s = b->work->Wait();
  if (!s.ok()) {
    if (first_error_.ok()) first_error_ = s;
  } else {
    const size_t lo = std::max(b->begin, shard_begin()), hi = std::min(b->end, shard_end());
    if (lo < hi && !acc_.empty() && ReduceNarrow()) {  // this rank's bf16 part, widened, then added
      DeviceArray part = TakeBuffer(&pool_, hi - lo, DType::kF32, kGradRange);
      be_.Copy(st_, View(part.data(), hi - lo),
               TensorView((b->narrow.ptr() + (lo - b->begin)).p, DType::kBF16, {static_cast<int64_t>(hi - lo)}, be_.device()));
      be_.Accumulate(st_, View(acc_.data() + (lo - shard_begin()), hi - lo), View(part.data(), hi - lo));
      pool_.push_back(std::move(part));
    } else if (lo < hi && !acc_.empty()) {
      be_.Accumulate(st_, View(acc_.data() + (lo - shard_begin()), hi - lo),
                     View(b->data.data() + (lo - b->begin), hi - lo));
    }
  }
  if (ReduceNarrow()) {
    buffer_floats_ -= (b->end - b->begin + 1) / 2;
    narrow_pool_.push_back(std::move(b->narrow));
    return;
  }
  buffer_floats_ -= b->end - b->begin;
  pool_.push_back(std::move(b->data));
}

void DataParallel::Attach(DecoderModel* model, bool hold_embedding) {
  narrow_model_ = model->compute_dtype() != DType::kF32;
  if (narrow_model_ && zero_ < 2 && !wide() && first_error_.ok()) {  // bf16: the fp32 copy (gradients, masters)
    first_error_ = Failed("out of memory for the fp32 copy of the bf16 gradients (" + std::to_string(total_ * 4) + " bytes)");
  }
  if (zero_ == 3) {  // this rank's shard of the parameters; the model holds no whole vector
    const DevPtr params = model->params_ptr();
    const DType t = model->compute_dtype();
    const size_t n = count_[comm_->rank()];
    if (Status s = pshard_.Assign(be_, n, "this rank's ZeRO-3 parameter shard", t); !s.ok()) {
      if (first_error_.ok()) first_error_ = s;
    } else {
      if (params) {  // a model built whole: its shard (else the caller initializes the shard itself)
        be_.Copy(st_, TensorView(pshard_.ptr().p, t, {static_cast<int64_t>(n)}, be_.device()),
                 TensorView((params + shard_begin()).p, t, {static_cast<int64_t>(n)}, be_.device()));
        be_.Synchronize(st_);
      }
      model->set_param_source(this);
    }
  }
  if (zero_ >= 2) {
    model->set_grad_sink(this);  // no full gradient buffer: ranges come and go during backward
    return;
  }
  hold_first_ = hold_embedding;
  model->set_grad_ready_hook([this](size_t b, size_t e) { GradsReady(b, e); });
}

void DataParallel::GradsReady(size_t begin, size_t end) {
  if (hold_first_ && begin == 0) {
    held_lo_ = begin;
    held_hi_ = end;
    return;
  }
  AddReady(begin, end);
}

void DataParallel::ReleaseHeld() {
  if (held_hi_ > held_lo_) AddReady(held_lo_, held_hi_);
  held_lo_ = held_hi_ = 0;
}

void DataParallel::AddReady(size_t begin, size_t end) {
  if (!communicate_ || begin >= end) return;
  if (pending_lo_ == pending_hi_) {
    pending_lo_ = begin;
    pending_hi_ = end;
  } else {
    ANNEAL_CHECK(end == pending_lo_, "gradient ranges not contiguous and decreasing (the model's contract)");
    pending_lo_ = begin;
  }
  if (pending_hi_ - pending_lo_ >= bucket_floats_) {
    Launch(pending_lo_, pending_hi_);
    pending_lo_ = pending_hi_ = 0;
  }
}

void DataParallel::Launch(size_t lo, size_t hi) {
  if (narrow_ && reduce_bf16_) {  // the bf16 gradients reduced as they are, in place
    const TensorView v((narrow_ + lo).p, DType::kBF16, {static_cast<int64_t>(hi - lo)}, be_.device());
    if (zero_ == 0) {
      comm_bytes_ += (hi - lo) * 2;
      inflight_.push_back(comm_->StartAllReduceSum(v, Ready()));
    } else {
      inflight_.push_back(StartReduceScatter(narrow_ + lo, lo, hi));
    }
    return;
  }
  if (narrow_) {  // widen the bucket (exactly) on the compute stream, before the reduction's event
    be_.Copy(st_, View(grads_ + lo, hi - lo), TensorView((narrow_ + lo).p, DType::kBF16,
                                                          {static_cast<int64_t>(hi - lo)}, be_.device()));
  }
  if (zero_ == 0) {
    comm_bytes_ += (hi - lo) * sizeof(float);
    inflight_.push_back(comm_->StartAllReduceSum(View(grads_ + lo, hi - lo), Ready()));
    return;
  }
  inflight_.push_back(StartReduceScatter(DevPtr{grads_ + lo, DType::kF32}, lo, hi));
}

std::vector<size_t> DataParallel::CountsIn(size_t lo, size_t hi) const {
  std::vector<size_t> counts(comm_->size());
  for (int r = 0; r < comm_->size(); ++r) {
    const size_t a = std::max(lo, begin_[r]), b = std::min(hi, begin_[r] + count_[r]);
    counts[r] = b > a ? b - a : 0;
  }
  return counts;
}

std::unique_ptr<Work> DataParallel::StartReduceScatter(DevPtr x, size_t lo, size_t hi) {
  // Along the shard boundaries: rank r receives [lo,hi) ∩ shard(r), in place at its own position.
  const std::vector<size_t> counts = CountsIn(lo, hi);
  const size_t my_lo = std::clamp(begin_[comm_->rank()], lo, hi);
  const size_t mine = counts[comm_->rank()];
  comm_bytes_ += (hi - lo) * SizeOf(x.t);
  return comm_->StartReduceScatterSum(TensorView(x.p, x.t, {static_cast<int64_t>(hi - lo)}, be_.device()), counts,
                                      TensorView((x + (my_lo - lo)).p, x.t, {static_cast<int64_t>(mine)}, be_.device()),
                                      Ready());
}

void DataParallel::WidenReduced() {
  const size_t b = zero_ == 0 ? 0 : shard_begin(), n = (zero_ == 0 ? total_ : shard_end()) - b;
  be_.Copy(st_, View(wide_.data() + b, n), TensorView((narrow_ + b).p, DType::kBF16, {static_cast<int64_t>(n)}, be_.device()));
}

Status DataParallel::EndBackward() {
  if (!first_error_.ok() && zero_ < 2) {
    Status s = first_error_;
    first_error_ = Status::Ok();
    return s;
  }
  if (zero_ >= 2) {
    while (!inflight_ranges_.empty()) RetireOldest();
    Status s = first_error_;
    first_error_ = Status::Ok();
    if (s.ok() && last_micro_step_) s = ReduceAcrossGroups();
    return s;
  }
  if (!communicate_) return Status::Ok();
  if (pending_hi_ > pending_lo_) Launch(pending_lo_, pending_hi_);
  pending_lo_ = pending_hi_ = 0;
  Status first;
  for (auto& w : inflight_) {
    Status s = w->Wait();
    if (first.ok() && !s.ok()) first = s;
  }
  inflight_.clear();
  if (first.ok() && narrow_ && reduce_bf16_) WidenReduced();
  if (first.ok()) first = ReduceAcrossGroups();
  return first;
}

Status DataParallel::ReduceAcrossGroups() {
  if (!replica_ || zero_ == 0) return Status::Ok();
  const size_t n = shard_end() - shard_begin();
  comm_bytes_ += n * sizeof(float);
  return replica_->StartAllReduceSum(View(OptimizerGrads(), n), Ready())->Wait();
}

float* DataParallel::OptimizerGrads() {
  return zero_ >= 2 ? acc_.data() : grads_ + shard_begin();
}

void DataParallel::ResetAccumulator() {
  if (!acc_.empty()) be_.Zero(st_, acc_.View());
}

Status DataParallel::AllGatherParams(DevPtr params, DevPtr master) {
  if (zero_ == 0 || zero_ == 3 || comm_->size() == 1) return Status::Ok();  // zero 3: the next forward gathers
  if (params.t == DType::kF32) {
    comm_bytes_ += total_ * sizeof(float);
    return comm_->StartAllGatherV(View(params.f32(), total_), count_, Ready())->Wait();
  }
  if (zero_ == 2) {  // each gathered bucket of masters rounded into the working copy
    return GatherByBucket(master, [&](size_t lo, size_t n, const float* bucket) {
      be_.Copy(st_, TensorView((params + lo).p, params.t, {static_cast<int64_t>(n)}, be_.device()), View(bucket, n));
    });
  }
  ANNEAL_RETURN_IF_ERROR(GatherMasters(master));
  be_.Copy(st_, TensorView(params.p, params.t, {static_cast<int64_t>(total_)}, be_.device()), View(wide_.data(), total_));
  return Status::Ok();
}

DevPtr DataParallel::wide() {
  if (narrow_model_ && wide_.size() != total_ && !wide_.Assign(be_, total_, "the fp32 copy of the flat vector").ok()) {
    return {};
  }
  return wide_.ptr();
}

Status DataParallel::GatherByBucket(DevPtr master,
                                    const std::function<void(size_t lo, size_t n, const float* bucket)>& each) {
  const size_t bucket = std::min(bucket_floats_, total_), b = shard_begin();
  if (gather_.size() != bucket) ANNEAL_RETURN_IF_ERROR(gather_.Assign(be_, bucket, "the ZeRO master gather buffer"));
  for (size_t lo = 0; lo < total_; lo += bucket) {
    const size_t hi = std::min(total_, lo + bucket);
    const std::vector<size_t> counts = CountsIn(lo, hi);  // contiguous in rank order: parts land in place
    const size_t my_lo = std::clamp(b, lo, hi), mine = counts[comm_->rank()];
    if (mine) be_.Copy(st_, View(gather_.data() + (my_lo - lo), mine), View(master.f32() + (my_lo - b), mine));
    comm_bytes_ += (hi - lo) * sizeof(float);
    ANNEAL_RETURN_IF_ERROR(comm_->StartAllGatherV(View(gather_.data(), hi - lo), counts, Ready())->Wait());
    each(lo, hi - lo, gather_.data());
  }
  return Status::Ok();
}

Status DataParallel::StreamParams(DevPtr master, const std::function<void(const float* host, size_t n)>& take) {
  Status s = GatherByBucket(master, [&](size_t, size_t n, const float* bucket) {
    const HostRead host(be_, bucket, n);
    take(host.data(), n);
  });
  gather_.Reset();  // the state hash's: not kept for training
  return s;
}

Status DataParallel::GatherMasters(DevPtr master) {
  if (!wide()) return Failed("gathering the fp32 masters: no fp32 copy of the parameters (out of memory)");
  const size_t b = shard_begin(), n = shard_end() - b;
  be_.Copy(st_, View(wide_.data() + b, n), View(master.f32(), n));
  if (comm_->size() == 1 || zero_ == 0) return Status::Ok();
  comm_bytes_ += total_ * sizeof(float);
  return comm_->StartAllGatherV(View(wide_.data(), total_), count_, Ready())->Wait();
}

void DataParallel::ScatterMasters(DevPtr master, DevPtr params) {
  const size_t b = shard_begin(), n = shard_end() - b;
  if (master) be_.Copy(st_, View(master.f32(), n), View(wide_.data() + b, n));
  be_.Copy(st_, TensorView(params.p, params.t, {static_cast<int64_t>(total_)}, be_.device()), View(wide_.data(), total_));
  ReleaseWide();
}

void DataParallel::ReleaseWide(const Event& copied) {
  if (zero_ < 2 || wide_.empty()) return;
  if (copied.handle) be_.WaitEvent(st_, copied);
  be_.Synchronize(st_);
  wide_.Reset();
}

DevPtr DataParallel::OptimizerParams(DevPtr params) const {
  return zero_ == 3 ? pshard_.ptr() : params + shard_begin();
}

Status DataParallel::TakeError() {
  Status s = first_error_;
  first_error_ = Status::Ok();
  return s;
}

DataParallel::GatheredRange* DataParallel::Find(size_t begin) {
  for (auto& g : gathered_) {
    if (g->begin == begin) return g.get();
  }
  return nullptr;
}

DataParallel::GatheredRange* DataParallel::StartGather(size_t begin, size_t end) {
  auto g = std::make_unique<GatheredRange>();
  g->begin = begin;
  g->end = end;
  const size_t n = end - begin;
  const DType t = pshard_.dtype();
  g->data = TakeBuffer(&param_pool_, n, t, "a gathered ZeRO-3 parameter range");
  const std::vector<size_t> counts = CountsIn(begin, end);
  const size_t my_lo = std::clamp(shard_begin(), begin, end), mine = counts[comm_->rank()];
  if (mine) {
    be_.Copy(st_, TensorView((g->data.ptr() + (my_lo - begin)).p, t, {static_cast<int64_t>(mine)}, be_.device()),
             TensorView((pshard_.ptr() + (my_lo - shard_begin())).p, t, {static_cast<int64_t>(mine)}, be_.device()));
  }
  comm_bytes_ += n * SizeOf(t);
  g->work = comm_->StartAllGatherV(TensorView(g->data.ptr().p, t, {static_cast<int64_t>(n)}, be_.device()), counts,
                                   Ready());
  gathered_.push_back(std::move(g));
  return gathered_.back().get();
}

void DataParallel::Finish(GatheredRange* g) {
  if (!g->work) return;
  Status s = g->work->Wait();
  g->work.reset();
  if (!s.ok() && first_error_.ok()) first_error_ = s;
}

DevPtr DataParallel::Gather(size_t begin, size_t end) {
  GatheredRange* g = Find(begin);
  if (!g) g = StartGather(begin, end);
  ANNEAL_CHECK(g->end == end, "a gathered range asked with another end (the ParamSource contract)");
  Finish(g);
  return g->data.ptr();
}

void DataParallel::Prefetch(size_t begin, size_t end) {
  if (!Find(begin)) StartGather(begin, end);
}

void DataParallel::Free(size_t begin, size_t end) {
  auto it = std::find_if(gathered_.begin(), gathered_.end(), [&](const auto& g) { return g->begin == begin; });
  ANNEAL_CHECK(it != gathered_.end() && (*it)->end == end, "Free of a range not gathered (the ParamSource contract)");
  Finish(it->get());
  param_pool_.push_back(std::move((*it)->data));
  gathered_.erase(it);
}

}  // namespace anneal
