// ShmGroup: the ranks of a group that share one host, meeting in a POSIX shared-memory segment, for
// an allreduce without the network stack (what MPI's shared-memory transport does; Gloo has none).
//
// Segment: per rank three sequence counters (posted, reduced, done; each on its own cache line), one
// slot per rank (SlotBytes below), and one result area of the same size. A buffer is reduced chunk by chunk: every rank
// copies its chunk into its slot and posts; rank r sums part r of the chunk over all slots in rank
// order (deterministic, and the same bits for every rank) into the result; when all parts are
// reduced every rank copies the result out. Buffers up to kSmallBytes take one barrier: every rank
// sums all slots itself, in the same order. (Single-copy reads of the peers' buffers with
// process_vm_readv, as MPI does, were tried: 0.3x of this copy path here, so not kept.) Waiting spins briefly, then yields; every wait is bounded
// by the timeout, and a timeout names the rank that did not arrive.
//
// Create is collective and agrees on every rank: it returns null (use the network) unless every
// member is on this host (same host name, boot id and network namespace) and every member could map
// the segment.
// Not thread-safe: one operation at a time (the communicator's thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "comm/communicator.h"
#include "comm/store.h"

namespace anneal {

class ShmGroup {
 public:
  // A rank's slot, the chunk reduced per round: 1 MB for groups of up to 8 ranks, 256 KB beyond (the
  // segment holds n + 1 slots, and a container's /dev/shm is often 64 MB). Measured on this project's
  // 2-vCPU VM, 2 ranks, rounds interleaved, best: 1 MB slots 8.1 / 8.5-9.1 / 6.5-7.8 / 7.1 / 7.2 GB/s
  // at 1 / 4 / 16 / 64 / 256 MB, 256 KB slots 6.1 / 5.8 / 5.1 / 5.3 / 5.3 (three waits per chunk: a
  // quarter as many rounds); 512 KB was within 2 % of 1 MB, 2 MB too except 11 % faster at 4 MB.
  static size_t SlotBytes(int ranks) { return ranks <= 8 ? size_t{1} << 20 : size_t{256} << 10; }
  static constexpr size_t kSmallBytes = 64 * 1024;  // up to this, one barrier and a redundant sum

  static Result<std::unique_ptr<ShmGroup>> Create(Store* store, const CommOptions& o);
  ~ShmGroup();

  // In place: x <- sum over the group's ranks. On a timeout: a PeerError naming the missing rank.
  Status AllReduceSum(float* x, size_t n, std::chrono::milliseconds timeout);
  Status AllReduceSum(double* x, size_t n, std::chrono::milliseconds timeout);
  // The Communicator's uneven reduce-scatter and all-gather (comm/communicator.h), chunk by chunk:
  // for a reduce-scatter every rank copies the pieces the others own into its slot and each owner
  // sums its piece in rank order (its own values read from x); for an all-gather every owner copies
  // its piece into the result area and everyone copies the others' pieces out.
  Status ReduceScatterSum(const float* x, const std::vector<size_t>& counts, float* y, std::chrono::milliseconds timeout);
  // The same of bf16 values (comm/sum_elem.h: summed in fp32, rounded once).
  Status ReduceScatterSumBf16(const uint16_t* x, const std::vector<size_t>& counts, uint16_t* y,
                              std::chrono::milliseconds timeout);
  // Pieces counted in bytes (any dtype).
  Status AllGatherVBytes(void* x, const std::vector<size_t>& counts, std::chrono::milliseconds timeout);

 private:
  ShmGroup(void* base, size_t bytes, int rank, int size, std::vector<int> members);
  template <typename T>
  Status Reduce(T* x, size_t n, std::chrono::milliseconds timeout);
  template <typename E>
  Status ReduceScatter(const typename E::T* x, const std::vector<size_t>& counts, typename E::T* y,
                       std::chrono::milliseconds timeout);
  struct Header;
  Header* header(int r) const;
  char* slot(int r) const;
  char* result() const;
  // Waits until counter `which` of every rank is >= seq; a timeout names the first rank missing.
  Status WaitAll(int which, uint64_t seq, double deadline, const char* stage);  // deadline: MonotonicSeconds()

  void* base_;
  size_t bytes_;
  int rank_, size_;
  size_t slot_bytes_;  // SlotBytes(size_)
  std::vector<int> members_;  // global ranks, by group rank
  uint64_t seq_ = 0;
};

}  // namespace anneal
