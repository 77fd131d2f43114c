#include "model/activation_offload.h"

#include <string>

namespace anneal {

ActivationOffload::ActivationOffload(Backend& backend, Stream compute)
    : be_(backend), compute_(compute), copy_(backend.OffloadStream()) {
  for (int& h : holds_) h = -1;
}

ActivationOffload::~ActivationOffload() {
  if (host_) {
    be_.Synchronize(copy_);
    be_.FreeHostStaging(host_);
  }
}

Status ActivationOffload::Reserve(int layers, size_t bytes_each) {
  for (int p = 0; p < kRing; ++p) {
    holds_[p] = -1;
    copied_[p] = restored_[p] = Event{};
  }
  if (host_ && layers == layers_ && bytes_each == bytes_each_) return Status::Ok();
  if (host_) {
    be_.Synchronize(copy_);
    be_.FreeHostStaging(host_);
  }
  const size_t bytes = static_cast<size_t>(layers) * bytes_each;
  host_ = be_.AllocateHostStaging(bytes);
  layers_ = host_ ? layers : 0;
  bytes_each_ = host_ ? bytes_each : 0;
  if (!host_) return Failed("out of host memory for the offloaded activations (" + std::to_string(bytes) + " bytes)");
  return Status::Ok();
}

void ActivationOffload::AfterCompute() { be_.WaitEvent(copy_, be_.RecordEvent(compute_)); }

void ActivationOffload::BeforeWrite(int i) {
  const int p = i % kRing;
  be_.WaitEvent(compute_, copied_[p]);
  be_.WaitEvent(compute_, restored_[p]);
  copied_[p] = restored_[p] = Event{};
  holds_[p] = i;
}

void ActivationOffload::CopyOut(int i, const TensorView& place) {
  if (i + kRing >= layers_) return;  // never evicted before its backward: no place takes it
  AfterCompute();
  be_.CopyToHost(Host(i), place, copy_);
  copied_[i % kRing] = be_.RecordEvent(copy_);
  ++copies_out_;
}

void ActivationOffload::Prefetch(int i, const TensorView& place) {
  const int p = i % kRing;
  if (holds_[p] == i) return;
  AfterCompute();  // the place's last reader and writer were issued to compute before now
  be_.CopyFromHost(place, Host(i), copy_);  // after the copy out of layer i: the same stream
  restored_[p] = be_.RecordEvent(copy_);
  holds_[p] = i;
  ++copies_in_;
}

void ActivationOffload::EnsureResident(int i, const TensorView& place) {
  Prefetch(i, place);
  const int p = i % kRing;
  be_.WaitEvent(compute_, restored_[p]);
  restored_[p] = Event{};
}

}  // namespace anneal
