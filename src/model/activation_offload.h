// ActivationOffload: the device ring of layer outputs behind train.offload_activations (full
// recomputation keeps only each layer's output, the next layer's input). Layer i's output lives in
// ring place i % kRing on the device and, for every layer that will be evicted before its backward
// needs it, in host staging memory (page-locked on CUDA). The copies run on the backend's offload
// stream (Backend::OffloadStream: not the checkpoint snapshots' copy stream, so they never wait
// behind a snapshot), ordered against the compute stream by events, so they overlap the layers'
// compute:
//   forward:  layer i written (compute) -> copied out (offload stream, after the compute event); the
//             place is written again by layer i + kRing only once that copy has finished;
//   backward: while layer i's backward computes, layer i - 2's output comes back into the place
//             layer i + 1 used (offload stream, after everything issued to compute so far); layer
//             i - 1's backward waits for it before it recomputes from it.
// Three places: the input being recomputed from, the output the recomputation rewrites, the next
// input arriving. On a host backend (one stream) every copy is done when it returns and the events
// are empty. One slot (micro-batch) at a time.
#pragma once

#include <cstddef>

#include "core/status.h"
#include "model/config.h"
#include "tensor/backend.h"

namespace anneal {

class ActivationOffload {
 public:
  static constexpr int kRing = ModelConfig::kOffloadRing;

  ActivationOffload(Backend& backend, Stream compute);
  ~ActivationOffload();  // waits for the copies in flight, frees the host memory
  ActivationOffload(const ActivationOffload&) = delete;
  ActivationOffload& operator=(const ActivationOffload&) = delete;

  // Host memory for `layers` layer outputs of `bytes_each`; forgets what the ring holds (the device
  // ring was reallocated).
  Status Reserve(int layers, size_t bytes_each);
  // Compute is about to write layer i's output into its place: once the copy out of the layer that
  // was there has finished.
  void BeforeWrite(int i);
  // After the forward wrote layer i's output (`place`): copy it out if a later layer evicts it
  // before the backward needs it (the last kRing layers stay on the device).
  void CopyOut(int i, const TensorView& place);
  // Start bringing layer i's output back into `place` (nothing to do when the place holds it).
  void Prefetch(int i, const TensorView& place);
  // Before compute reads layer i's output: it is in `place` (brought back now if no Prefetch did).
  void EnsureResident(int i, const TensorView& place);

  // Copies issued since construction, each way (tests; a profile of the traffic).
  long copies_out() const { return copies_out_; }
  long copies_in() const { return copies_in_; }

 private:
  char* Host(int i) const { return static_cast<char*>(host_) + static_cast<size_t>(i) * bytes_each_; }
  void AfterCompute();  // the offload stream waits for everything issued to compute so far

  Backend& be_;
  Stream compute_, copy_;
  void* host_ = nullptr;
  int layers_ = 0;
  size_t bytes_each_ = 0;
  int holds_[kRing];         // the layer whose output each place holds (-1: none)
  Event copied_[kRing];      // the copy out of that place (empty once waited for)
  Event restored_[kRing];    // the copy back into it (empty once waited for)
  long copies_out_ = 0, copies_in_ = 0;
};

}  // namespace anneal
