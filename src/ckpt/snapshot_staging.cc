#include "ckpt/snapshot_staging.h"

namespace anneal {

SnapshotStaging::~SnapshotStaging() {
  b_.Synchronize(b_.CopyStream());
  for (Slot& s : slots_) {
    if (s.p) b_.FreeHostStaging(s.p);
  }
}

Status SnapshotStaging::Begin(const Stream& compute, const std::vector<DevPtr>& ranges,
                              const std::vector<size_t>& counts) {
  if (slots_.size() < ranges.size()) slots_.resize(ranges.size());
  used_ = ranges.size();
  const Stream cs = b_.CopyStream();
  b_.WaitEvent(cs, b_.RecordEvent(compute));  // after the update that made these values
  for (size_t i = 0; i < ranges.size(); ++i) {
    Slot& s = slots_[i];
    s.t = ranges[i].t;
    s.n = ranges[i].p ? counts[i] : 0;
    const size_t bytes = s.n * SizeOf(s.t);
    if (bytes > s.bytes) {
      if (s.p) b_.FreeHostStaging(s.p);
      s.p = b_.AllocateHostStaging(bytes);
      s.bytes = s.p ? bytes : 0;
      if (!s.p) {
        return Internal("checkpoint snapshot: " + std::to_string(bytes >> 20) +
                                 " MB of page-locked host memory could not be had: free host memory, or "
                                 "checkpoint less of the model per rank (more ranks, ZeRO)");
      }
    }
    if (s.n) b_.CopyToHost(s.p, TensorView(ranges[i].p, s.t, {static_cast<int64_t>(s.n)}, b_.device()), cs);
  }
  copied_ = b_.RecordEvent(cs);
  return Status::Ok();
}

std::vector<const float*> SnapshotStaging::Wait() {
  b_.Synchronize(b_.CopyStream());
  std::vector<const float*> out;
  for (size_t i = 0; i < used_; ++i) {
    Slot& s = slots_[i];
    if (s.n == 0) {
      out.push_back(nullptr);
    } else if (s.t == DType::kBF16) {
      s.widened.resize(s.n);
      Bf16ToFloats(static_cast<const uint16_t*>(s.p), s.widened.data(), s.n);
      out.push_back(s.widened.data());
    } else {
      out.push_back(static_cast<const float*>(s.p));
    }
  }
  return out;
}

}  // namespace anneal
