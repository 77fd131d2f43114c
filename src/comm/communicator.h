// Communicator: the collectives of one process group (DESIGN.md src/comm), asynchronous, every one
// bounded by a timeout.
//
// Semantics (all ranks of the group must issue the same operations in the same order):
//   AllReduceSum(x, n)             x (n) <- sum over ranks of x                       in place
//   ReduceScatterSum(x, counts, y) y (counts[rank]) <- sum over ranks of x's piece `rank`, where
//                                  x is split into consecutive pieces of counts[0], counts[1], ...
//                                  (uneven and empty pieces allowed); the sum is taken in rank
//                                  order 0, 1, ..., so it is deterministic
//                                  (bf16: each value summed in fp32 in rank order, rounded once;
//                                  NCCL's bf16 reduction rounds as it goes)
//   AllGatherV(x, counts)          x's piece `r` (as in ReduceScatterSum) <- rank r's piece  in place
//                                  (AllGatherVBytes: the same with pieces counted in bytes, any dtype)
//   Broadcast(x, bytes, root), AllGatherBytes, Send/Recv (point to point), Barrier
// Start* return a Work at once; the operation runs on the communicator's own thread (the CPU
// backend, Gloo, has no asynchronous API), so it overlaps the caller's compute. Buffers must stay
// valid and untouched until Wait() returns.
//
// Device buffers: the runtime calls the forms that take TensorViews of the communicator's device()
// memory and the Event of the compute stream that wrote them; the work waits for that event before
// it reads (WaitFor: a GPU communicator's stream waits on it; on the host an op is complete when it
// returns, so there is nothing to wait for and these forms are exactly the pointer forms).
// ConnectCommunicator picks the implementation by device.
//
// Failure: an operation that does not complete within the timeout, or whose peer's connection
// breaks, fails with a PeerError (exit 3) naming the group, the operation and the ranks that were
// lost — found from the heartbeats each rank keeps in the rendezvous store (a frozen or dead rank's
// counter stops) and from the peer address in the transport's error. After a failure the
// communicator is broken: every later operation fails at once with the first error. Never a hang.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "comm/store.h"
#include "tensor/stream.h"
#include "tensor/view.h"

namespace anneal {

class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the operation completed or failed.
  virtual Status Wait() = 0;
};

struct CommOptions {
  std::string group = "world";        // the group's name in errors and store keys ("dp", "world")
  std::vector<int> members;           // global ranks of the group in group-rank order (empty = all)
  int global_rank = 0;
  int world_size = 1;
  std::chrono::milliseconds timeout{300000};  // every operation, and connecting
  std::string bind_addr;              // this rank's address for peers; empty = the one routing to the store
  std::string master_addr;            // a shared-folder store: the host whose route gives the bind address
  bool shared_memory = true;          // reduce through shared memory among the members on one host
  std::chrono::milliseconds heartbeat_interval{1000};
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;  // rank within the group
  virtual int size() const = 0;
  virtual const std::string& group() const = 0;

  virtual std::unique_ptr<Work> StartAllReduceSum(float* x, size_t n) = 0;
  virtual std::unique_ptr<Work> StartAllReduceSum(double* x, size_t n) = 0;
  virtual std::unique_ptr<Work> StartReduceScatterSum(const float* x, const std::vector<size_t>& counts, float* y) = 0;
  // The same of bf16 values (their bits).
  virtual std::unique_ptr<Work> StartReduceScatterSumBf16(const uint16_t* x, const std::vector<size_t>& counts,
                                                         uint16_t* y) = 0;
  // Pieces of byte_counts[r] bytes (a bf16 parameter range is gathered as it is, two bytes a value).
  virtual std::unique_ptr<Work> StartAllGatherVBytes(void* x, const std::vector<size_t>& byte_counts) = 0;
  std::unique_ptr<Work> StartAllGatherV(float* x, const std::vector<size_t>& counts) {
    std::vector<size_t> bytes(counts);
    for (size_t& b : bytes) b *= sizeof(float);
    return StartAllGatherVBytes(x, bytes);
  }
  virtual std::unique_ptr<Work> StartBroadcast(void* x, size_t bytes, int root) = 0;
  // out (size() * bytes) <- every rank's `in` (bytes), in rank order.
  virtual std::unique_ptr<Work> StartAllGatherBytes(const void* in, size_t bytes, void* out) = 0;
  virtual std::unique_ptr<Work> StartSend(const void* x, size_t bytes, int peer) = 0;
  virtual std::unique_ptr<Work> StartRecv(void* x, size_t bytes, int peer) = 0;
  virtual std::unique_ptr<Work> StartBarrier() = 0;

  // ---- views of device memory ----
  // Where this communicator's buffers live (Gloo and shared memory: the host; NCCL: its GPU).
  virtual Device device() const { return Device::Cpu(); }
  // Work started after this call waits for `ready` (see the header comment).
  virtual void WaitFor(const Event& ready) { (void)ready; }
  // x: f32, f64 or bf16 (a bf16 allreduce is a bf16 reduce-scatter into place and an all-gather: half
  // the bytes of fp32 on the wire, each value rounded once). A view on another device than device(),
  // or of another dtype, fails the work.
  std::unique_ptr<Work> StartAllReduceSum(const TensorView& x, const Event& ready);
  // x, y: f32 or bf16 (both the same).

  std::unique_ptr<Work> StartReduceScatterSum(const TensorView& x, const std::vector<size_t>& counts,
                                              const TensorView& y, const Event& ready);
  // counts in elements of x's dtype (any dtype: the bytes are moved as they are).
  std::unique_ptr<Work> StartAllGatherV(const TensorView& x, const std::vector<size_t>& counts, const Event& ready);
  // out (size() x in) <- every rank's in, in rank order (any dtype).
  std::unique_ptr<Work> StartAllGather(const TensorView& in, const TensorView& out, const Event& ready);
  std::unique_ptr<Work> StartSend(const TensorView& x, int peer, const Event& ready);
  // ready: the compute stream's event after which x may be overwritten (its zeroing done, its last
  // reader finished) — a GPU communicator's stream waits for it before receiving.
  std::unique_ptr<Work> StartRecv(const TensorView& x, int peer, const Event& ready);

  // Blocking forms (a backend may run them without the queue when nothing else is pending).
  virtual Status AllReduceSum(float* x, size_t n) { return StartAllReduceSum(x, n)->Wait(); }
  virtual Status AllReduceSum(double* x, size_t n) { return StartAllReduceSum(x, n)->Wait(); }
  Status ReduceScatterSum(const float* x, const std::vector<size_t>& c, float* y) {
    return StartReduceScatterSum(x, c, y)->Wait();
  }
  Status AllGatherV(float* x, const std::vector<size_t>& c) { return StartAllGatherV(x, c)->Wait(); }
  Status Broadcast(void* x, size_t bytes, int root) { return StartBroadcast(x, bytes, root)->Wait(); }
  Status AllGatherBytes(const void* in, size_t bytes, void* out) { return StartAllGatherBytes(in, bytes, out)->Wait(); }
  Status Barrier() { return StartBarrier()->Wait(); }
};

// A communicator over Gloo's TCP transport. `store` carries the rendezvous (keys under
// "<group>/"), the heartbeats and the address table, and must outlive the communicator. Connecting
// is bounded by options.timeout too.
Result<std::unique_ptr<Communicator>> ConnectGloo(Store* store, const CommOptions& options);

// A communicator over NCCL on CUDA device `device` (buffers are device memory; see
// nccl_communicator.cc for the watchdog that gives NCCL its timeouts). Built when the CUDA toolkit
// and NCCL are found (ANNEAL_WITH_NCCL); otherwise, and on a machine without a GPU, an InvalidInput
// error saying so.
Result<std::unique_ptr<Communicator>> ConnectNccl(Store* store, const CommOptions& options, int device);
// Whether this build has NCCL and this machine a CUDA device.
bool NcclAvailable();

// The communicator for buffers on device `d`: Gloo (with shared memory within a host) for the host,
// NCCL for a GPU.
Result<std::unique_ptr<Communicator>> ConnectCommunicator(const Device& d, Store* store, const CommOptions& options);

// A Work that has already failed with `s` (a bad argument, a broken group).
std::unique_ptr<Work> FailedWork(Status s);

// The same group with one rank: every operation is a local copy (single-process runs).
std::unique_ptr<Communicator> MakeSoloCommunicator(const std::string& group);

}  // namespace anneal
