// The NCCL (GPU) backend of Communicator. Buffers are device memory on the communicator's GPU; every
// operation is enqueued on the communicator's own CUDA stream and returns at once (NCCL is
// asynchronous by itself), with a CUDA event marking its end.
//
// NCCL has no timeouts of its own. A watchdog thread polls every outstanding operation: done when its
// event has completed; failed when ncclCommGetAsyncError reports an error, or when it has run longer
// than the timeout. On a failure the watchdog calls ncclCommAbort (which unblocks the stream), records
// the error — naming the group, the operation and the lost ranks through the PeerMonitor — and the
// error surfaces at the next Wait; every later operation fails at once. The communicator is created
// non-blocking, so a peer that never arrives at initialization times out too.
// Uneven reduce-scatter and all-gather are grouped ncclReduce / ncclBroadcast calls, one per piece.
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "comm/communicator.h"
#include "comm/peer_monitor.h"
#include "core/clock.h"
#include "core/progress.h"

namespace anneal {

namespace {

using std::chrono::milliseconds;

std::string Where(const char* file, int line) { return std::string(file) + ":" + std::to_string(line); }

#define ANNEAL_CUDA_STATUS(expr)                                                                             \
  [&]() -> Status {                                                                                          \
    cudaError_t e_ = (expr);                                                                                 \
    if (e_ == cudaSuccess) return Status::Ok();                                                              \
    return Internal(std::string(#expr) + " failed at " + Where(__FILE__, __LINE__) + ": " +                  \
                    cudaGetErrorString(e_) + " (check the GPU with nvidia-smi and CUDA_VISIBLE_DEVICES)"); \
  }()

#define ANNEAL_NCCL_STATUS(expr)                                                                               \
  [&]() -> Status {                                                                                            \
    ncclResult_t r_ = (expr);                                                                                  \
    if (r_ == ncclSuccess || r_ == ncclInProgress) return Status::Ok();                                        \
    return PeerError(std::string(#expr) + " failed at " + Where(__FILE__, __LINE__) + ": " +                   \
                     ncclGetErrorString(r_) + (ncclGetLastError(nullptr) ? std::string(" — ") + ncclGetLastError(nullptr) : "")); \
  }()

struct Op {
  std::string what;
  cudaEvent_t done = nullptr;
  double started = 0;
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  Status status;
};

class NcclWork : public Work {
 public:
  explicit NcclWork(std::shared_ptr<Op> op) : op_(std::move(op)) {}
  Status Wait() override {
    std::unique_lock<std::mutex> l(op_->mu);
    op_->cv.wait(l, [&] { return op_->finished; });
    return op_->status;
  }

 private:
  std::shared_ptr<Op> op_;
};

class ReadyWork : public Work {
 public:
  explicit ReadyWork(Status s) : s_(std::move(s)) {}
  Status Wait() override { return s_; }

 private:
  Status s_;
};

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(Store* store, CommOptions o, ncclComm_t comm, cudaStream_t stream, int device, float* scratch,
                   std::vector<std::string> addrs)
      : o_(o), comm_(comm), stream_(stream), device_(device), scratch_(scratch), monitor_(store, o, std::move(addrs)) {
    watchdog_ = std::thread([this] { Watchdog(); });
  }
  ~NcclCommunicator() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    watchdog_.join();
    cudaSetDevice(device_);
    if (aborted_) {
      // ncclCommAbort already freed the communicator.
    } else {
      cudaStreamSynchronize(stream_);
      ncclCommDestroy(comm_);
    }
    cudaFree(scratch_);
    cudaStreamDestroy(stream_);
  }
  int rank() const override { return GroupRankOf(o_); }
  int size() const override { return static_cast<int>(o_.members.size()); }
  const std::string& group() const override { return o_.group; }
  Device device() const override { return Device::Cuda(device_); }
  // The compute stream's event (a cudaEvent_t) orders this communicator's stream after it.
  void WaitFor(const Event& ready) override {
    if (ready.handle) cudaStreamWaitEvent(stream_, static_cast<cudaEvent_t>(ready.handle), 0);
  }

  std::unique_ptr<Work> StartAllReduceSum(float* x, size_t n) override {
    return Launch("allreduce of " + std::to_string(n) + " floats",
                  [&] { return ncclAllReduce(x, x, n, ncclFloat32, ncclSum, comm_, stream_); });
  }
  std::unique_ptr<Work> StartAllReduceSum(double* x, size_t n) override {
    return Launch("allreduce(f64) of " + std::to_string(n) + " values",
                  [&] { return ncclAllReduce(x, x, n, ncclFloat64, ncclSum, comm_, stream_); });
  }
  std::unique_ptr<Work> StartReduceScatterSum(const float* x, const std::vector<size_t>& counts, float* y) override {
    return ReduceScatter(x, counts, y, ncclFloat32, sizeof(float));
  }
  // NCCL reduces bf16 in bf16 as the data moves (no fp32 accumulation across ranks).
  std::unique_ptr<Work> StartReduceScatterSumBf16(const uint16_t* x, const std::vector<size_t>& counts,
                                                   uint16_t* y) override {
    return ReduceScatter(x, counts, y, ncclBfloat16, sizeof(uint16_t));
  }
  // One ncclReduce per owner's piece (uneven pieces), each to its owner.
  std::unique_ptr<Work> ReduceScatter(const void* x, const std::vector<size_t>& counts, void* y, ncclDataType_t t,
                                      size_t elem) {
    return Launch("reduce-scatter", [&] {
      const char* in = static_cast<const char*>(x);
      size_t off = 0;
      ncclResult_t r = ncclGroupStart();
      for (int p = 0; p < size() && r == ncclSuccess; ++p) {
        if (counts[p] > 0) {
          r = ncclReduce(in + off * elem, p == rank() ? y : nullptr, counts[p], t, ncclSum, p, comm_, stream_);
        }
        off += counts[p];
      }
      ncclResult_t e = ncclGroupEnd();
      return r != ncclSuccess ? r : e;
    });
  }
  std::unique_ptr<Work> StartAllGatherVBytes(void* x, const std::vector<size_t>& counts) override {
    return Launch("all-gather", [&] {
      char* bytes = static_cast<char*>(x);
      size_t off = 0;
      ncclResult_t r = ncclGroupStart();
      for (int p = 0; p < size() && r == ncclSuccess; ++p) {
        if (counts[p] > 0) r = ncclBroadcast(bytes + off, bytes + off, counts[p], ncclUint8, p, comm_, stream_);
        off += counts[p];
      }
      ncclResult_t e = ncclGroupEnd();
      return r != ncclSuccess ? r : e;
    });
  }
  std::unique_ptr<Work> StartBroadcast(void* x, size_t bytes, int root) override {
    return Launch("broadcast from rank " + std::to_string(root),
                  [&] { return ncclBroadcast(x, x, bytes, ncclUint8, root, comm_, stream_); });
  }
  std::unique_ptr<Work> StartAllGatherBytes(const void* in, size_t bytes, void* out) override {
    return Launch("all-gather", [&] { return ncclAllGather(in, out, bytes, ncclUint8, comm_, stream_); });
  }
  std::unique_ptr<Work> StartSend(const void* x, size_t bytes, int peer) override {
    return Launch("send to rank " + std::to_string(peer),
                  [&] { return ncclSend(x, bytes, ncclUint8, peer, comm_, stream_); });
  }
  std::unique_ptr<Work> StartRecv(void* x, size_t bytes, int peer) override {
    return Launch("receive from rank " + std::to_string(peer),
                  [&] { return ncclRecv(x, bytes, ncclUint8, peer, comm_, stream_); });
  }
  std::unique_ptr<Work> StartBarrier() override {
    return Launch("barrier", [&] { return ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream_); });
  }

 private:
  template <typename Fn>
  std::unique_ptr<Work> Launch(const std::string& what, Fn&& enqueue) {
    std::lock_guard<std::mutex> l(mu_);
    if (!first_error_.ok()) return std::make_unique<ReadyWork>(first_error_);
    auto op = std::make_shared<Op>();
    op->what = what;
    op->started = MonotonicSeconds();
    Status s = ANNEAL_CUDA_STATUS(cudaSetDevice(device_));
    if (s.ok()) s = ANNEAL_NCCL_STATUS(enqueue());
    // A non-blocking communicator may still be issuing the call (ncclInProgress): the call is in
    // the stream only once the state leaves that, and the next call must wait for it too.
    for (ncclResult_t st = ncclInProgress; s.ok();) {
      ncclCommGetAsyncError(comm_, &st);
      if (st == ncclSuccess) break;
      if (st != ncclInProgress) s = PeerError(std::string("NCCL error: ") + ncclGetErrorString(st));
      else if (MonotonicSeconds() - op->started > o_.timeout.count() / 1000.0) s = PeerError("NCCL call not issued within the timeout");
      else std::this_thread::yield();
    }
    if (s.ok()) s = ANNEAL_CUDA_STATUS(cudaEventCreateWithFlags(&op->done, cudaEventDisableTiming));
    if (s.ok()) s = ANNEAL_CUDA_STATUS(cudaEventRecord(op->done, stream_));
    if (!s.ok()) {
      first_error_ = PeerError(monitor_.Diagnose(what, s.message(), 0));
      return std::make_unique<ReadyWork>(first_error_);
    }
    pending_.push_back(op);
    cv_.notify_all();
    return std::make_unique<NcclWork>(op);
  }

  static void Finish(Op& op, Status s) {
    if (op.done) cudaEventDestroy(op.done);
    std::lock_guard<std::mutex> l(op.mu);
    op.status = std::move(s);
    op.finished = true;
    op.cv.notify_all();
  }

  // Polls the outstanding operations every millisecond (every 100 ms when idle).
  void Watchdog() {
    cudaSetDevice(device_);
    std::unique_lock<std::mutex> l(mu_);
    while (!stopping_ || !pending_.empty()) {
      cv_.wait_for(l, pending_.empty() ? milliseconds(100) : milliseconds(1));
      while (!pending_.empty()) {
        std::shared_ptr<Op> op = pending_.front();
        const cudaError_t q = cudaEventQuery(op->done);
        if (q == cudaSuccess) {
          pending_.pop_front();
          Finish(*op, Status::Ok());
          continue;
        }
        std::string failure;
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(comm_, &async);
        if (q != cudaErrorNotReady) {
          failure = std::string("CUDA error: ") + cudaGetErrorString(q);
        } else if (async != ncclSuccess && async != ncclInProgress) {
          failure = std::string("NCCL error: ") + ncclGetErrorString(async);
        } else if (MonotonicSeconds() - op->started > o_.timeout.count() / 1000.0) {
          failure = "timed out after " + std::to_string(o_.timeout.count() / 1000) + " s (dist.timeout_s)";
        } else if (stopping_) {
          failure = "the communicator was destroyed with the operation outstanding";
        }
        if (failure.empty()) break;  // the oldest is still running: later ones cannot be done either
        // Abort: NCCL kernels stop, the stream drains, and every outstanding operation fails.
        ncclCommAbort(comm_);
        aborted_ = true;
        const double secs = MonotonicSeconds() - op->started;
        l.unlock();
        const Status err = PeerError(monitor_.Diagnose(op->what, failure, secs));
        l.lock();
        first_error_ = err;
        for (auto& p : pending_) Finish(*p, err);
        pending_.clear();
      }
    }
  }

  CommOptions o_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  int device_;
  float* scratch_;
  PeerMonitor monitor_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Op>> pending_;
  Status first_error_;
  bool stopping_ = false;
  std::atomic<bool> aborted_{false};
  std::thread watchdog_;
};

}  // namespace

bool NcclAvailable() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

Result<std::unique_ptr<Communicator>> ConnectNccl(Store* store, const CommOptions& options, int device) {
  ANNEAL_ASSIGN_OR_RETURN(CommOptions o, ResolveMembers(options));
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    return InvalidInput("the NCCL backend needs a CUDA GPU and this machine has none (cudaGetDeviceCount: " +
                        std::string(cudaGetErrorString(cudaGetDeviceCount(&count))) + "); use the Gloo backend");
  }
  if (device < 0 || device >= count) {
    return InvalidInput("GPU " + std::to_string(device) + " does not exist (" + std::to_string(count) +
                        " visible; check CUDA_VISIBLE_DEVICES)");
  }
  ANNEAL_RETURN_IF_ERROR(ANNEAL_CUDA_STATUS(cudaSetDevice(device)));
  const int grank = GroupRankOf(o), gsize = static_cast<int>(o.members.size());
  // Rank 0 of the group makes the id; the others read it from the store.
  ncclUniqueId id;
  const std::string key = o.group + "/nccl/id";
  if (grank == 0) {
    ANNEAL_RETURN_IF_ERROR(ANNEAL_NCCL_STATUS(ncclGetUniqueId(&id)));
    ANNEAL_RETURN_IF_ERROR(store->Set(key, std::string(id.internal, sizeof(id.internal))));
  } else {
    ANNEAL_ASSIGN_OR_RETURN(std::string v, store->Get(key, o.timeout));
    if (v.size() != sizeof(id.internal)) return Internal("NCCL id in the store has the wrong size");
    std::memcpy(id.internal, v.data(), sizeof(id.internal));
  }
  ANNEAL_RETURN_IF_ERROR(PublishAddress(store, o, o.bind_addr.empty() ? DefaultBindAddress(*store, o.master_addr) : o.bind_addr));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // so initialization can time out and be aborted
  ncclComm_t comm = nullptr;
  ANNEAL_RETURN_IF_ERROR(ANNEAL_NCCL_STATUS(ncclCommInitRankConfig(&comm, gsize, id, grank, &config)));
  const double t0 = MonotonicSeconds();
  for (;;) {
    ncclResult_t state = ncclInProgress;
    ncclCommGetAsyncError(comm, &state);
    if (state == ncclSuccess) break;
    if (state != ncclInProgress || MonotonicSeconds() - t0 > o.timeout.count() / 1000.0) {
      ncclCommAbort(comm);
      return PeerError("group '" + o.group + "' (ranks " + JoinInts(o.members) + ") could not initialize NCCL on rank " +
                       std::to_string(o.global_rank) + " within " + std::to_string(o.timeout.count() / 1000) + " s: " +
                       (state == ncclInProgress ? std::string("a peer never arrived") : ncclGetErrorString(state)));
    }
    Clock::Real().SleepFor(0.001);
  }
  cudaStream_t stream = nullptr;
  float* scratch = nullptr;
  Status s = ANNEAL_CUDA_STATUS(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (s.ok()) s = ANNEAL_CUDA_STATUS(cudaMalloc(&scratch, sizeof(float)));
  if (!s.ok()) {
    ncclCommDestroy(comm);
    return s;
  }
  return std::unique_ptr<Communicator>(
      new NcclCommunicator(store, o, comm, stream, device, scratch, ReadAddresses(store, o)));
}

}  // namespace anneal
