// Ordering handles of a backend's work. A Stream is a queue on one device: ops and copies given the
// same stream run in the order they were issued; an Event marks a point in a stream that another
// stream (or the host) waits for. On the host every op runs to completion when called, so the CPU
// backends' streams and events are empty handles and waiting is a no-op; on a GPU `handle` is the
// backend's native object (a cudaStream_t / cudaEvent_t), owned by the backend that made it.
#pragma once

#include "tensor/device.h"

namespace anneal {

struct Stream {
  void* handle = nullptr;  // null: the device's default stream (the host: run now)
  Device device;
  static Stream Host() { return {}; }
};

struct Event {
  void* handle = nullptr;  // null on the host: always complete
  Device device;
};

}  // namespace anneal
