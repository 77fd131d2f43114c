#include "comm/shm_group.h"

#include "comm/sum_elem.h"

#include <fcntl.h>
#include <immintrin.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <thread>

#include "core/checksum.h"
#include "comm/peer_monitor.h"
#include "core/clock.h"

namespace anneal {

namespace {

constexpr size_t kLine = 64;

// Host name, boot id and network namespace: ranks in different network namespaces (containers,
// pods, the multi-host tests' "hosts") are different hosts even on one machine.
std::string HostIdentity() {
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string boot;
  std::getline(f, boot);
  char netns[128] = {0};
  const ssize_t len = ::readlink("/proc/self/ns/net", netns, sizeof(netns) - 1);
  return std::string(host) + "/" + boot + "/" + (len > 0 ? std::string(netns, static_cast<size_t>(len)) : "?");
}

}  // namespace

struct ShmGroup::Header {
  alignas(kLine) std::atomic<uint64_t> posted;
  alignas(kLine) std::atomic<uint64_t> reduced;
  alignas(kLine) std::atomic<uint64_t> done;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory counters must be lock-free");

ShmGroup::Header* ShmGroup::header(int r) const { return reinterpret_cast<Header*>(static_cast<char*>(base_) + r * sizeof(Header)); }
char* ShmGroup::slot(int r) const {
  return static_cast<char*>(base_) + size_ * sizeof(Header) + static_cast<size_t>(r) * slot_bytes_;
}
char* ShmGroup::result() const { return slot(size_); }

ShmGroup::ShmGroup(void* base, size_t bytes, int rank, int size, std::vector<int> members)
    : base_(base), bytes_(bytes), rank_(rank), size_(size), slot_bytes_(SlotBytes(size)), members_(std::move(members)) {}

ShmGroup::~ShmGroup() { ::munmap(base_, bytes_); }

Result<std::unique_ptr<ShmGroup>> ShmGroup::Create(Store* store, const CommOptions& o) {
  const int me = GroupRankOf(o), n = static_cast<int>(o.members.size());
  if (!o.shared_memory) return std::unique_ptr<ShmGroup>();
  // 1. Same host? Every member's identity, from the store.
  const std::string id = HostIdentity();
  ANNEAL_RETURN_IF_ERROR(store->Set(o.group + "/shm/host/" + std::to_string(me), id));
  bool same = true;
  for (int r = 0; r < n; ++r) {
    ANNEAL_ASSIGN_OR_RETURN(std::string v, store->Get(o.group + "/shm/host/" + std::to_string(r), o.timeout));
    same &= v == id;
  }
  if (!same || n < 2) return std::unique_ptr<ShmGroup>();
  // 2. Group rank 0 creates the segment (a name unique to this store prefix and group), the others open it.
  ANNEAL_ASSIGN_OR_RETURN(std::string nonce, me == 0 ? Result<std::string>(HexU64(Xxh64(id + std::to_string(::getpid()) +
                                                                                      std::to_string(static_cast<int64_t>(WallSeconds() * 1e9)))))
                                                     : store->Get(o.group + "/shm/name", o.timeout));
  const std::string name = "/anneal-" + nonce;
  const size_t bytes = n * sizeof(Header) + static_cast<size_t>(n + 1) * SlotBytes(n);
  int fd = -1;
  if (me == 0) {
    fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0 && ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) ::close(fd), fd = -1;
    ANNEAL_RETURN_IF_ERROR(store->Set(o.group + "/shm/name", nonce));
  } else {
    fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  }
  void* base = fd >= 0 ? ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (fd >= 0) ::close(fd);
  // 3. Everyone says whether it mapped the segment; rank 0 unlinks it once all have (or gave up).
  ANNEAL_RETURN_IF_ERROR(store->Set(o.group + "/shm/ok/" + std::to_string(me), base != MAP_FAILED ? "1" : "0"));
  bool all = true;
  for (int r = 0; r < n; ++r) {
    ANNEAL_ASSIGN_OR_RETURN(std::string v, store->Get(o.group + "/shm/ok/" + std::to_string(r), o.timeout));
    all &= v == "1";
  }
  if (me == 0) ::shm_unlink(name.c_str());
  if (!all) {
    if (base != MAP_FAILED) ::munmap(base, bytes);
    return std::unique_ptr<ShmGroup>();
  }
  return std::unique_ptr<ShmGroup>(new ShmGroup(base, bytes, me, n, o.members));
}

Status ShmGroup::WaitAll(int which, uint64_t seq, double deadline, const char* stage) {
  for (int r = 0; r < size_; ++r) {
    Header* h = header(r);
    std::atomic<uint64_t>& c = which == 0 ? h->posted : which == 1 ? h->reduced : h->done;
    for (uint64_t spins = 0; c.load(std::memory_order_acquire) < seq; ++spins) {
      if (spins < 2000) {
        _mm_pause();
        continue;
      }
      std::this_thread::yield();
      if ((spins & 1023) == 0 && MonotonicSeconds() > deadline) {
        return PeerError("timed out in shared memory waiting for rank " + std::to_string(members_[r]) + " to " + stage);
      }
    }
  }
  return Status::Ok();
}

template <typename T>
Status ShmGroup::Reduce(T* x, size_t n, std::chrono::milliseconds timeout) {
  const double deadline = MonotonicSeconds() + std::chrono::duration<double>(timeout).count();
  const size_t chunk = slot_bytes_ / sizeof(T);
  if (n * sizeof(T) <= kSmallBytes) {
    // Latency-bound: one barrier. Everyone posts, then everyone sums all slots itself, in rank order
    // (the same bits on every rank). Our slot may be rewritten only once every rank has finished
    // reading the previous operation's slots ("done").
    const uint64_t seq = ++seq_;
    ANNEAL_RETURN_IF_ERROR(WaitAll(2, seq - 1, deadline, "finish the previous operation"));
    std::memcpy(slot(rank_), x, n * sizeof(T));
    header(rank_)->posted.store(seq, std::memory_order_release);
    ANNEAL_RETURN_IF_ERROR(WaitAll(0, seq, deadline, "post its data"));
    const T* s0 = reinterpret_cast<const T*>(slot(0));
    for (size_t i = 0; i < n; ++i) x[i] = s0[i];
    for (int p = 1; p < size_; ++p) {
      const T* sp = reinterpret_cast<const T*>(slot(p));
      for (size_t i = 0; i < n; ++i) x[i] += sp[i];
    }
    header(rank_)->done.store(seq, std::memory_order_release);
    return Status::Ok();
  }
  T* out = reinterpret_cast<T*>(result());
  for (size_t off = 0; off < n; off += chunk) {
    const size_t len = std::min(chunk, n - off);
    const uint64_t seq = ++seq_;
    const size_t per = (len + size_ - 1) / size_;
    auto part_lo = [&](int r) { return std::min(len, per * r); };
    auto part_hi = [&](int r) { return std::min(len, per * r + per); };
    const size_t lo = part_lo(rank_), hi = part_hi(rank_);
    // Everyone must be done with the previous chunk (reading our slot, copying the result out)
    // before we overwrite our slot, and later the result.
    ANNEAL_RETURN_IF_ERROR(WaitAll(2, seq - 1, deadline, "finish the previous chunk"));
    // Only the parts the others reduce go to our slot; our own part we read from x itself.
    for (int p = 0; p < size_; ++p) {
      if (p != rank_) std::memcpy(slot(rank_) + part_lo(p) * sizeof(T), x + off + part_lo(p), (part_hi(p) - part_lo(p)) * sizeof(T));
    }
    header(rank_)->posted.store(seq, std::memory_order_release);
    ANNEAL_RETURN_IF_ERROR(WaitAll(0, seq, deadline, "post its data"));
    // Our part of the chunk, summed in rank order into the result area.
    auto src = [&](int p) { return p == rank_ ? x + off : reinterpret_cast<const T*>(slot(p)); };
    const T* s0 = src(0);
    for (size_t i = lo; i < hi; ++i) out[i] = s0[i];
    for (int p = 1; p < size_; ++p) {
      const T* sp = src(p);
      for (size_t i = lo; i < hi; ++i) out[i] += sp[i];
    }
    header(rank_)->reduced.store(seq, std::memory_order_release);
    std::memcpy(x + off + lo, out + lo, (hi - lo) * sizeof(T));  // our own part, while the others finish
    ANNEAL_RETURN_IF_ERROR(WaitAll(1, seq, deadline, "reduce its part"));
    std::memcpy(x + off, out, lo * sizeof(T));  // the parts the other ranks reduced
    std::memcpy(x + off + hi, out + hi, (len - hi) * sizeof(T));
    header(rank_)->done.store(seq, std::memory_order_release);
  }
  return Status::Ok();
}

template <typename E>
Status ShmGroup::ReduceScatter(const typename E::T* x, const std::vector<size_t>& counts, typename E::T* y,
                               std::chrono::milliseconds timeout) {
  using T = typename E::T;
  const double deadline = MonotonicSeconds() + std::chrono::duration<double>(timeout).count();
  std::vector<size_t> lo(size_ + 1, 0);
  for (int r = 0; r < size_; ++r) lo[r + 1] = lo[r] + counts[r];
  const size_t total = lo[size_], chunk = slot_bytes_ / sizeof(T);
  const size_t my_lo = lo[rank_], my_hi = lo[rank_ + 1];
  // y may alias x's own piece: own values are read at index i before y[i - my_lo] is written.
  for (size_t a = 0; a < total; a += chunk) {
    const size_t b = std::min(total, a + chunk);
    const uint64_t seq = ++seq_;
    ANNEAL_RETURN_IF_ERROR(WaitAll(2, seq - 1, deadline, "finish the previous chunk"));
    T* mine = reinterpret_cast<T*>(slot(rank_));
    // The others' pieces of [a, b) go to our slot (ours stays in x).
    if (a < my_lo) std::memcpy(mine, x + a, (std::min(b, my_lo) - a) * sizeof(T));
    if (b > my_hi) {
      const size_t from = std::max(a, my_hi);
      std::memcpy(mine + (from - a), x + from, (b - from) * sizeof(T));
    }
    header(rank_)->posted.store(seq, std::memory_order_release);
    ANNEAL_RETURN_IF_ERROR(WaitAll(0, seq, deadline, "post its data"));
    const size_t s_lo = std::max(a, my_lo), s_hi = std::min(b, my_hi);
    for (size_t i = s_lo; i < s_hi; ++i) {  // in fp32, rank order 0..n-1: deterministic
      float acc = E::Load(rank_ == 0 ? x[i] : reinterpret_cast<const T*>(slot(0))[i - a]);
      for (int p = 1; p < size_; ++p) acc += E::Load(p == rank_ ? x[i] : reinterpret_cast<const T*>(slot(p))[i - a]);
      y[i - my_lo] = E::Store(acc);
    }
    header(rank_)->done.store(seq, std::memory_order_release);
  }
  return Status::Ok();
}

Status ShmGroup::ReduceScatterSum(const float* x, const std::vector<size_t>& counts, float* y,
                                  std::chrono::milliseconds timeout) {
  return ReduceScatter<F32Sum>(x, counts, y, timeout);
}

Status ShmGroup::ReduceScatterSumBf16(const uint16_t* x, const std::vector<size_t>& counts, uint16_t* y,
                                      std::chrono::milliseconds timeout) {
  return ReduceScatter<Bf16Sum>(x, counts, y, timeout);
}

Status ShmGroup::AllGatherVBytes(void* xv, const std::vector<size_t>& counts, std::chrono::milliseconds timeout) {
  const double deadline = MonotonicSeconds() + std::chrono::duration<double>(timeout).count();
  char* x = static_cast<char*>(xv);
  std::vector<size_t> lo(size_ + 1, 0);
  for (int r = 0; r < size_; ++r) lo[r + 1] = lo[r] + counts[r];
  const size_t total = lo[size_], chunk = slot_bytes_;
  const size_t my_lo = lo[rank_], my_hi = lo[rank_ + 1];
  char* out = reinterpret_cast<char*>(result());
  for (size_t a = 0; a < total; a += chunk) {
    const size_t b = std::min(total, a + chunk);
    const uint64_t seq = ++seq_;
    ANNEAL_RETURN_IF_ERROR(WaitAll(2, seq - 1, deadline, "finish the previous chunk"));
    const size_t s_lo = std::max(a, my_lo), s_hi = std::min(b, my_hi);
    if (s_lo < s_hi) std::memcpy(out + (s_lo - a), x + s_lo, s_hi - s_lo);
    header(rank_)->posted.store(seq, std::memory_order_release);
    ANNEAL_RETURN_IF_ERROR(WaitAll(0, seq, deadline, "post its piece"));
    if (a < s_lo || s_lo >= s_hi) std::memcpy(x + a, out, (s_lo < s_hi ? s_lo : b) - a);
    if (s_lo < s_hi && s_hi < b) std::memcpy(x + s_hi, out + (s_hi - a), b - s_hi);
    header(rank_)->done.store(seq, std::memory_order_release);
  }
  return Status::Ok();
}

Status ShmGroup::AllReduceSum(float* x, size_t n, std::chrono::milliseconds timeout) { return Reduce(x, n, timeout); }
Status ShmGroup::AllReduceSum(double* x, size_t n, std::chrono::milliseconds timeout) { return Reduce(x, n, timeout); }

}  // namespace anneal
