// Device-to-host staging of checkpoint snapshots, for a backend whose memory the host cannot read
// (a GPU): the parameters and moments are copied on the backend's copy stream, after the work queued
// on the compute stream so far, into host buffers of the backend's fastest kind (page-locked) that
// every snapshot reuses. Training goes on meanwhile: only the next optimizer update, which
// overwrites those values, waits for the copies — on the compute stream, not the host
// (AdamW::WaitBeforeNextUpdate with copied()). The checkpointer's thread waits for them (Wait) before
// serializing the files. One snapshot at a time: Begin again only after Wait returned.
#pragma once

#include <vector>

#include "tensor/backend.h"

namespace anneal {

class SnapshotStaging {
 public:
  explicit SnapshotStaging(Backend& b) : b_(b) {}
  ~SnapshotStaging();
  SnapshotStaging(const SnapshotStaging&) = delete;
  SnapshotStaging& operator=(const SnapshotStaging&) = delete;

  // Queues the copy of each range (ranges[i] of counts[i] elements; a null pointer or 0: none).
  Status Begin(const Stream& compute, const std::vector<DevPtr>& ranges, const std::vector<size_t>& counts);
  // The copies' completion on the copy stream.
  const Event& copied() const { return copied_; }
  // Blocks until the copies are done (from any thread); then the ranges as fp32 host memory, in
  // Begin's order (bf16 widened exactly here), valid until the next Begin.
  std::vector<const float*> Wait();

 private:
  struct Slot {
    void* p = nullptr;
    size_t bytes = 0;
    DType t = DType::kF32;
    size_t n = 0;
    std::vector<float> widened;  // bf16 ranges as fp32
  };
  Backend& b_;
  std::vector<Slot> slots_;
  size_t used_ = 0;  // the ranges of the last Begin
  Event copied_;
};

}  // namespace anneal
