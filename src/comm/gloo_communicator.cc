// The Gloo (CPU, TCP) backend of Communicator. Gloo gives the transport, ring allreduce, broadcast,
// allgather and barrier, each with a timeout; what Debian's Gloo lacks is built here on its
// point-to-point unbound buffers: an uneven, deterministic reduce-scatter and all-gather (direct:
// each rank sends every owner its piece; owners sum in rank order), a store adapter, heartbeats and
// the diagnosis that names a lost rank.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <type_traits>

#include "core/progress.h"
#include "core/trace.h"
#include "comm/communicator.h"
#include "comm/sum_elem.h"
#include "comm/peer_monitor.h"
#include "comm/shm_group.h"

namespace anneal {

namespace {

using std::chrono::milliseconds;

// Gloo's rendezvous reads and writes through this adapter; failures become gloo::IoException, which
// connectFullMesh propagates to ConnectGloo.
class GlooStoreAdapter : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(anneal::Store* s, std::string prefix, milliseconds timeout)
      : s_(s), prefix_(std::move(prefix)), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    Status st = s_->Set(prefix_ + key, std::string(data.begin(), data.end()));
    if (!st.ok()) throw gloo::IoException(st.message());
  }
  std::vector<char> get(const std::string& key) override {
    auto v = s_->Get(prefix_ + key, timeout_);
    if (!v.ok()) throw gloo::IoException(v.status().message());
    return std::vector<char>(v->begin(), v->end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const milliseconds& timeout) override {
    for (const auto& k : keys) {
      auto v = s_->Get(prefix_ + k, timeout);
      if (!v.ok()) throw gloo::IoException(v.status().message());
    }
  }

 private:
  anneal::Store* s_;
  std::string prefix_;
  milliseconds timeout_;
};

// An operation's name for errors, formatted only when one happens ("allreduce of 1024 values"), and
// for the step profiler: op() ("allreduce") and the bytes it moves.
struct OpLabel {
  const char* text;
  long long n = -1;
  const char* unit = "";
  size_t bytes = 0;
  std::string str() const { return n < 0 ? text : std::string(text) + " " + std::to_string(n) + unit; }
  std::string op() const {
    const char* sp = std::strchr(text, ' ');
    return sp ? std::string(text, sp) : std::string(text);
  }
};

struct WorkState {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
  OpLabel what{""};
  bool collective = true;
};

class GlooCommunicator;

// A queued operation's handle. Must not outlive its communicator.
class QueuedWork : public Work {
 public:
  QueuedWork(std::shared_ptr<WorkState> s, GlooCommunicator* c) : s_(std::move(s)), comm_(c) {}
  Status Wait() override;

 private:
  std::shared_ptr<WorkState> s_;
  GlooCommunicator* comm_;
};

constexpr uint64_t kSlotPrefix = 0xA7ull << 56;  // our point-to-point slots, apart from Gloo's collectives

class GlooCommunicator : public Communicator {
 public:
  GlooCommunicator(anneal::Store* store, CommOptions o, std::shared_ptr<gloo::rendezvous::Context> ctx,
                   std::vector<std::string> addrs, std::unique_ptr<ShmGroup> shm)
      : o_(o), ctx_(std::move(ctx)), monitor_(store, o, std::move(addrs)), shm_(std::move(shm)) {
    worker_ = std::thread([this] { Loop(); });
  }
  ~GlooCommunicator() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  int rank() const override { return ctx_->rank; }
  int size() const override { return ctx_->size; }
  const std::string& group() const override { return o_.group; }

  std::unique_ptr<Work> StartAllReduceSum(float* x, size_t n) override { return AllReduce(x, n, "allreduce of"); }
  Status AllReduceSum(float* x, size_t n) override { return AllReduceNow(x, n, "allreduce of"); }
  Status AllReduceSum(double* x, size_t n) override { return AllReduceNow(x, n, "allreduce(f64) of"); }
  std::unique_ptr<Work> StartAllReduceSum(double* x, size_t n) override { return AllReduce(x, n, "allreduce(f64) of"); }

  std::unique_ptr<Work> StartReduceScatterSum(const float* x, const std::vector<size_t>& counts, float* y) override {
    return ReduceScatter<F32Sum>(x, counts, y, " floats");
  }
  std::unique_ptr<Work> StartReduceScatterSumBf16(const uint16_t* x, const std::vector<size_t>& counts,
                                                   uint16_t* y) override {
    return ReduceScatter<Bf16Sum>(x, counts, y, " bf16 values");
  }
  // Every rank sends each other rank its piece and sums its own pieces in fp32, in rank order.
  template <typename E>
  std::unique_ptr<Work> ReduceScatter(const typename E::T* x, const std::vector<size_t>& counts, typename E::T* y,
                                      const char* unit) {
    using T = typename E::T;
    return Enqueue({"reduce-scatter of", static_cast<long long>(Sum(counts)), unit, Sum(counts) * sizeof(T)}, [=, this](uint32_t tag) {
      if (shm_) {
        Status st = std::is_same_v<E, F32Sum>
                        ? shm_->ReduceScatterSum(reinterpret_cast<const float*>(x), counts, reinterpret_cast<float*>(y), o_.timeout)
                        : shm_->ReduceScatterSumBf16(reinterpret_cast<const uint16_t*>(x), counts,
                                                     reinterpret_cast<uint16_t*>(y), o_.timeout);
        if (!st.ok()) throw gloo::IoException(st.message());
        return;
      }
      const int n = size(), me = rank();
      const std::vector<size_t> offs = Offsets(counts);
      std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> sends, recvs(n);
      for (int p = 0; p < n; ++p) {
        if (p == me || counts[p] == 0) continue;
        sends.push_back(ctx_->createUnboundBuffer(const_cast<T*>(x + offs[p]), counts[p] * sizeof(T)));
        sends.back()->send(p, kSlotPrefix | tag);
      }
      const size_t mine = counts[me];
      std::vector<T> tmp(mine * n);
      if (mine > 0) {
        for (int p = 0; p < n; ++p) {
          if (p == me) continue;
          recvs[p] = ctx_->createUnboundBuffer(tmp.data() + mine * p, mine * sizeof(T));
          recvs[p]->recv(p, kSlotPrefix | tag);
        }
        for (int p = 0; p < n; ++p) {
          if (p != me && !recvs[p]->waitRecv(nullptr, o_.timeout)) throw gloo::IoException("receive aborted");
        }
        const T* own = x + offs[me];
        for (size_t i = 0; i < mine; ++i) {  // in fp32, rank order 0..n-1: deterministic
          float acc = 0.0f;
          for (int p = 0; p < n; ++p) acc += E::Load(p == me ? own[i] : tmp[mine * p + i]);
          y[i] = E::Store(acc);
        }
      }
      for (auto& s : sends) {
        if (!s->waitSend(nullptr, o_.timeout)) throw gloo::IoException("send aborted");
      }
    });
  }

  std::unique_ptr<Work> StartAllGatherVBytes(void* x, const std::vector<size_t>& counts) override {
    return Enqueue({"all-gather of", static_cast<long long>(Sum(counts)), " bytes", Sum(counts)}, [=, this](uint32_t tag) {
      if (shm_) {
        Status st = shm_->AllGatherVBytes(x, counts, o_.timeout);
        if (!st.ok()) throw gloo::IoException(st.message());
        return;
      }
      const int n = size(), me = rank();
      const std::vector<size_t> offs = Offsets(counts);
      char* bytes = static_cast<char*>(x);
      std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> sends, recvs;
      for (int p = 0; p < n; ++p) {
        if (p == me || counts[p] == 0) continue;
        recvs.push_back(ctx_->createUnboundBuffer(bytes + offs[p], counts[p]));
        recvs.back()->recv(p, kSlotPrefix | tag);
      }
      if (counts[me] > 0) {
        for (int p = 0; p < n; ++p) {
          if (p == me) continue;
          // One buffer per destination: an unbound buffer carries one pending operation at a time.
          sends.push_back(ctx_->createUnboundBuffer(bytes + offs[me], counts[me]));
          sends.back()->send(p, kSlotPrefix | tag);
        }
      }
      for (auto& r : recvs) {
        if (!r->waitRecv(nullptr, o_.timeout)) throw gloo::IoException("receive aborted");
      }
      for (auto& s : sends) {
        if (!s->waitSend(nullptr, o_.timeout)) throw gloo::IoException("send aborted");
      }
    });
  }

  std::unique_ptr<Work> StartBroadcast(void* x, size_t bytes, int root) override {
    return Enqueue({"broadcast from rank", root, "", bytes}, [=, this](uint32_t tag) {
      gloo::BroadcastOptions opts(ctx_);
      opts.setOutput(static_cast<uint8_t*>(x), bytes);
      opts.setRoot(root);
      opts.setTag(tag);
      opts.setTimeout(o_.timeout);
      gloo::broadcast(opts);
    });
  }

  std::unique_ptr<Work> StartAllGatherBytes(const void* in, size_t bytes, void* out) override {
    return Enqueue({"all-gather", -1, "", bytes * size()}, [=, this](uint32_t tag) {
      gloo::AllgatherOptions opts(ctx_);
      opts.setInput(const_cast<uint8_t*>(static_cast<const uint8_t*>(in)), bytes);
      opts.setOutput(static_cast<uint8_t*>(out), bytes * size());
      opts.setTag(tag);
      opts.setTimeout(o_.timeout);
      gloo::allgather(opts);
    });
  }

  std::unique_ptr<Work> StartSend(const void* x, size_t bytes, int peer) override {
    return Enqueue({"send to rank", peer, "", bytes}, /*collective=*/false, [=, this](uint32_t) {
      auto b = ctx_->createUnboundBuffer(const_cast<void*>(x), bytes);
      b->send(peer, kSlotPrefix | (1ull << 40) | static_cast<uint64_t>(SeqTo(peer)));
      if (!b->waitSend(nullptr, o_.timeout)) throw gloo::IoException("send aborted");
    });
  }
  std::unique_ptr<Work> StartRecv(void* x, size_t bytes, int peer) override {
    return Enqueue({"receive from rank", peer, "", bytes}, /*collective=*/false, [=, this](uint32_t) {
      auto b = ctx_->createUnboundBuffer(x, bytes);
      b->recv(peer, kSlotPrefix | (1ull << 40) | static_cast<uint64_t>(SeqFrom(peer)));
      if (!b->waitRecv(nullptr, o_.timeout)) throw gloo::IoException("receive aborted");
    });
  }

  std::unique_ptr<Work> StartBarrier() override {
    return Enqueue({"barrier"}, [=, this](uint32_t tag) {
      gloo::BarrierOptions opts(ctx_);
      opts.setTag(tag);
      opts.setTimeout(o_.timeout);
      gloo::barrier(opts);
    });
  }

 private:
  // A blocking allreduce through shared memory while nothing is queued or running: run here, with no
  // task, handle or thread handoff (the small-message latency). It takes a tag like any collective,
  // so tags stay in step with ranks that went through the queue.
  template <typename T>
  Status AllReduceNow(T* x, size_t n, const char* what) {
    {
      std::unique_lock<std::mutex> l(mu_);
      if (!shm_ || busy_ || !queue_.empty()) {
        l.unlock();
        return AllReduce(x, n, what)->Wait();
      }
      if (!first_error_.ok()) return first_error_;
      busy_ = true;
      ++tag_;
    }
    const double t0 = MonotonicSeconds();
    const OpLabel label{what, static_cast<long long>(n), " values", n * sizeof(T)};
    std::optional<trace::Span> span;
    if (trace::Enabled()) span.emplace("comm", label.op(), trace::Args{{"bytes", static_cast<double>(label.bytes)}});
    const double t0_us = trace::Enabled() ? trace::NowUs() : 0;
    Status s = size() == 1 || n == 0 ? Status::Ok() : shm_->AllReduceSum(x, n, o_.timeout);
    if (trace::Enabled()) TraceOp(label, true, t0_us);
    if (!s.ok()) s = PeerError(monitor_.Diagnose(label.str(), s.message(),
                                                 MonotonicSeconds() - t0));
    std::lock_guard<std::mutex> l(mu_);
    if (!s.ok() && first_error_.ok()) first_error_ = s;
    busy_ = false;
    cv_.notify_all();
    return s;
  }

  template <typename T>
  std::unique_ptr<Work> AllReduce(T* x, size_t n, const char* what) {
    return Enqueue({what, static_cast<long long>(n), " values", n * sizeof(T)}, [=, this](uint32_t tag) {
      if (size() == 1 || n == 0) return;
      if (shm_) {  // every member on this host: through shared memory
        Status s = shm_->AllReduceSum(x, n, o_.timeout);
        if (!s.ok()) throw gloo::IoException(s.message());
        return;
      }
      if (n * sizeof(T) <= kDirectAllReduceBytes) return DirectAllReduce(x, n, tag);
      gloo::AllreduceOptions opts(ctx_);
      opts.setOutput(x, n);
      opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<T>));
      opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      opts.setTag(tag);
      opts.setTimeout(o_.timeout);
      gloo::allreduce(opts);
    });
  }

  // Small buffers are latency-bound: Gloo's ring spends several notification round trips per
  // operation (measured ~1.6 ms for 1 KB on 2 ranks here, bench/allreduce). Below this size every
  // rank sends its whole buffer to every peer once and sums all of them in rank order — one message
  // each way, and the same bits on every rank.
  static constexpr size_t kDirectAllReduceBytes = 256 << 10;
  template <typename T>
  void DirectAllReduce(T* x, size_t n, uint32_t tag) {
    const int size_ = size(), me = rank();
    std::vector<T> all(n * size_);
    std::copy(x, x + n, all.begin() + n * me);
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> sends, recvs;
    for (int p = 0; p < size_; ++p) {
      if (p == me) continue;
      recvs.push_back(ctx_->createUnboundBuffer(all.data() + n * p, n * sizeof(T)));
      recvs.back()->recv(p, kSlotPrefix | tag);
      sends.push_back(ctx_->createUnboundBuffer(all.data() + n * me, n * sizeof(T)));
      sends.back()->send(p, kSlotPrefix | tag);
    }
    for (auto& r : recvs) {
      if (!r->waitRecv(nullptr, o_.timeout)) throw gloo::IoException("receive aborted");
    }
    for (size_t i = 0; i < n; ++i) {
      T acc = 0;
      for (int p = 0; p < size_; ++p) acc += all[n * p + i];
      x[i] = acc;
    }
    for (auto& sd : sends) {
      if (!sd->waitSend(nullptr, o_.timeout)) throw gloo::IoException("send aborted");
    }
  }

  static size_t Sum(const std::vector<size_t>& c) {
    size_t s = 0;
    for (size_t v : c) s += v;
    return s;
  }
  static std::vector<size_t> Offsets(const std::vector<size_t>& c) {
    std::vector<size_t> o(c.size(), 0);
    for (size_t i = 1; i < c.size(); ++i) o[i] = o[i - 1] + c[i - 1];
    return o;
  }
  // Point-to-point sequence numbers per peer (both ends count the same way), on the worker thread.
  uint32_t SeqTo(int p) { return seq_to_[p]++ & 0xFFFFFF; }
  uint32_t SeqFrom(int p) { return seq_from_[p]++ & 0xFFFFFF; }

  // Collectives take the next tag (every rank issues the same collectives in the same order, so tags
  // agree); point-to-point operations are matched by per-peer sequence numbers instead.
  std::unique_ptr<Work> Enqueue(OpLabel what, std::function<void(uint32_t)> fn) {
    return Enqueue(what, true, std::move(fn));
  }
  std::unique_ptr<Work> Enqueue(OpLabel what, bool collective, std::function<void(uint32_t)> fn) {
    auto st = std::make_shared<WorkState>();
    st->what = what;
    st->collective = collective;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!first_error_.ok()) return FailedWork(first_error_);
      queue_.push_back({what, collective, std::move(fn), st});
    }
    cv_.notify_all();
    return std::make_unique<QueuedWork>(st, this);
  }

  // The worker runs queued tasks in order; a thread waiting on the task at the front of the queue
  // may run it itself (TryRunInline) instead, saving two thread handoffs on small operations.
  // busy_ keeps it one task at a time, so collectives still run in issue order.
  void Loop() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [&] { return (stopping_ && !busy_) || (!queue_.empty() && !busy_); });
      if (queue_.empty()) return;
      RunFront(l);
    }
  }

  // Called with mu_ held, the front task claimable; returns with mu_ held.
  void RunFront(std::unique_lock<std::mutex>& l) {
    Task t = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    const uint32_t tag = t.collective ? (tag_++ & 0x7FFFFFFF) : 0;
    Status s = first_error_;
    l.unlock();
    if (s.ok()) {
      const double t0 = MonotonicSeconds();
      const double t0_us = trace::Enabled() ? trace::NowUs() : 0;
      try {
        t.fn(tag);
      } catch (const std::exception& e) {
        s = PeerError(monitor_.Diagnose(t.what.str(), e.what(), MonotonicSeconds() - t0));
      }
      if (t0_us > 0 && trace::Enabled()) TraceOp(t.what, t.collective, t0_us);
    }
    {
      std::lock_guard<std::mutex> sl(t.state->mu);
      t.state->status = s;
      t.state->done = true;
      t.state->cv.notify_all();
    }
    l.lock();
    if (!s.ok() && first_error_.ok()) first_error_ = s;
    busy_ = false;
    cv_.notify_all();
  }

  // The operation's run on the communicator's track (one at a time: busy_), with its bytes and group.
  void TraceOp(const OpLabel& what, bool collective, double t0_us) {
    trace::Complete(track_, collective ? "comm" : "pipeline", what.op(), t0_us, trace::NowUs() - t0_us,
                    {{"bytes", static_cast<double>(what.bytes)}}, o_.group);
  }

 public:
  void TryRunInline(const WorkState* state) {
    std::unique_lock<std::mutex> l(mu_);
    if (!busy_ && !queue_.empty() && queue_.front().state.get() == state) RunFront(l);
  }

 private:
  struct Task {
    OpLabel what;
    bool collective = true;
    std::function<void(uint32_t)> fn;
    std::shared_ptr<WorkState> state;
  };

  CommOptions o_;
  std::shared_ptr<gloo::rendezvous::Context> ctx_;
  PeerMonitor monitor_;
  std::unique_ptr<ShmGroup> shm_;  // null unless the whole group is on this host
  std::map<int, uint32_t> seq_to_, seq_from_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool stopping_ = false;
  bool busy_ = false;   // a task is running (on the worker or inline)
  uint32_t tag_ = 1;    // the next collective's tag
  Status first_error_;
  int track_ = trace::Track("comm " + o_.group);  // the step profiler's track of this group's operations
  std::thread worker_;
};

// The caller's wait is a span on its own track: exposed communication ("comm") or, for the pipeline's
// sends and receives, pipeline idle time ("pipeline").
Status QueuedWork::Wait() {
  std::optional<trace::Span> span;  // its name is made only while the profiler records
  if (trace::Enabled()) {
    span.emplace(s_->collective ? "comm" : "pipeline", "wait " + s_->what.op(), trace::Args{{"bytes", static_cast<double>(s_->what.bytes)}});
  }
  comm_->TryRunInline(s_.get());
  std::unique_lock<std::mutex> l(s_->mu);
  s_->cv.wait(l, [&] { return s_->done; });
  return s_->status;
}

}  // namespace

Result<std::unique_ptr<Communicator>> ConnectGloo(Store* store, const CommOptions& options) {
  ANNEAL_ASSIGN_OR_RETURN(CommOptions o, ResolveMembers(options));
  const int grank = GroupRankOf(o), gsize = static_cast<int>(o.members.size());
  const std::string bind = o.bind_addr.empty() ? DefaultBindAddress(*store, o.master_addr) : o.bind_addr;
  ANNEAL_RETURN_IF_ERROR(PublishAddress(store, o, bind));
  std::shared_ptr<gloo::rendezvous::Context> ctx;
  try {
    gloo::transport::tcp::attr attr(bind.c_str());
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    ctx = std::make_shared<gloo::rendezvous::Context>(grank, gsize);
    ctx->setTimeout(o.timeout);
    GlooStoreAdapter adapter(store, o.group + "/gloo/", o.timeout);
    ctx->connectFullMesh(adapter, dev);
  } catch (const std::exception& e) {
    return PeerError("group '" + o.group + "' (ranks " + JoinInts(o.members) + ") could not connect rank " +
                     std::to_string(o.global_rank) + " on " + bind + " to its peers within " +
                     std::to_string(o.timeout.count() / 1000) + " s: " + e.what());
  }
  ANNEAL_ASSIGN_OR_RETURN(std::unique_ptr<ShmGroup> shm, ShmGroup::Create(store, o));
  return std::unique_ptr<Communicator>(
      new GlooCommunicator(store, o, std::move(ctx), ReadAddresses(store, o), std::move(shm)));
}

}  // namespace anneal
