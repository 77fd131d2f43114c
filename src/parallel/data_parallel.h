// DataParallel: data parallelism applied from outside the model (DESIGN.md: parallelism stays out of
// model code). The model's grad-ready hook feeds it ranges of the flat gradient buffer as backward
// finishes them; it packs them into buckets of about bucket_floats and starts each bucket's
// communication at once, on the communicator's thread, while backward goes on.
//
//   zero 0: every rank holds all optimizer state; buckets are allreduced (sum) on the last
//           micro-step of a step, and every rank runs the same full AdamW update.
//   zero 1: optimizer state is sharded: rank r owns the flat range shard(r) (contiguous, ~1/dp of
//           the parameters). On the last micro-step buckets are reduce-scattered (each rank
//           receives the sum of its own part), the rank updates its shard, then AllGatherParams
//           gives every rank the whole updated parameter vector.
//   zero 2: gradients are sharded too. The model has no full gradient buffer: DataParallel is its
//           GradSink, handing out one buffer per range (the embeddings, ln_f, each layer) when
//           backward first writes it; a released range is reduce-scattered at once, and once done
//           (at most kMaxInflight ranges later) this rank's part is added into a shard-sized
//           accumulator and the buffer freed. Every micro-step is reduced this way, so gradients
//           exist only as 1/dp shards plus the embeddings' buffer and a few layers in flight.
// The gradient sums are averages because the trainer scales the loss by 1/(B·T·accum·dp).
// A bf16 model (train.dtype = bf16, zero 0 and 1): each bucket of its bf16 gradients is widened
// (exactly) into an fp32 copy of the flat vector before it is reduced, so gradients are summed in
// fp32 and the optimizer (fp32 masters) reads fp32 sums. With zero 1 the optimizer keeps fp32 masters
// of its shard only: AllGatherParams gathers every shard's masters into the fp32 copy and each rank
// rounds the whole of it into its bf16 working copy (as the optimizer rounds its own shard), and a
// checkpoint reads and writes the whole fp32 vector there (GatherMasters, ScatterMasters). With zero 2
// the GradSink hands out bf16 ranges, each widened into an fp32 range buffer when released and
// reduce-scattered from there; there is no full fp32 copy during training: the masters are gathered
// a bucket at a time into a bucket-sized buffer and rounded into the working copy (the copy is made
// only when a checkpoint or the state hash needs the whole fp32 vector).
//   zero 3: parameters are sharded too (FSDP's full sharding). Each rank keeps the working parameters
//           of its shard only (this object holds them); DataParallel is the model's ParamSource:
//           a range (the embeddings, a layer, the head) is all-gathered when the model asks for it,
//           the next one prefetched on the communicator's thread while the current one computes, and
//           freed after use — every layer is gathered twice per micro-step (forward, backward) and
//           the embeddings and head once, held from the forward to the end of the backward.
//           Gradients go as with zero 2; the optimizer updates the shard in place, and nothing is
//           gathered after the update (the next forward's gathers read the new values).
// Shard groups (MiCS, dist.shard_group = K): comm is this rank's group of K consecutive data-parallel
// ranks, over which everything above is sharded; on the last micro-step, once the group's
// reduce-scatter is done, the reduced shard (zero 1: this rank's part of the gradients, zero 2 and 3:
// the accumulator) is allreduced with the dp/K ranks holding the same shard in the other groups.
// Every reduction is deterministic (Gloo's ring allreduce gives every rank the same bits; the
// reduce-scatter sums in rank order), so replicas never drift apart.
//
// Not thread-safe: call from the training thread (the hook runs there, inside Backward).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "model/decoder.h"

#include "core/status.h"
#include "comm/communicator.h"
#include "parallel/plan.h"
#include "tensor/device_array.h"

namespace anneal {

class DataParallel : public GradSink, public ParamSource {
 public:
  // Its buffers (the zero-2 accumulator and range buffers) come from `backend`, and its work is
  // ordered after the compute on `stream` (the model's).
  // comm: the ranks ZeRO shards over (all data-parallel ranks, or this rank's shard group);
  // replica: with shard groups, the ranks holding the same shard in the other groups (else null).
  DataParallel(Communicator* comm, Communicator* replica, Backend& backend, Stream stream, size_t total_floats,
               int zero, size_t bucket_floats);
  // dist.reduce_dtype = bf16 (a bf16 model only): gradients are reduced as bf16 (half the bytes; each
  // sum taken in fp32 and rounded once) instead of being widened to fp32 first; the reduced values are
  // widened for the optimizer (zero 0, 1: into the fp32 copy; zero 2, 3: each part as it is added to
  // the fp32 accumulator). Across shard groups the sums stay fp32. Call before Attach.
  void set_reduce_bf16(bool on) { reduce_bf16_ = on; }

  int zero() const { return zero_; }
  int dp() const { return comm_->size() * (replica_ ? replica_->size() : 1); }
  // This rank's place among the replicas of its shard (0 without shard groups): replica 0 alone
  // accounts for the shard in sums over the world (the gradient norm).
  int replica_rank() const { return replica_ ? replica_->rank() : 0; }
  Communicator& comm() { return *comm_; }
  // The part of the flat vector whose optimizer state this rank holds: [shard_begin, shard_end).
  // With zero 0 it is everything.
  size_t shard_begin() const { return zero_ == 0 ? 0 : begin_[comm_->rank()]; }
  size_t shard_end() const { return zero_ == 0 ? total_ : begin_[comm_->rank()] + count_[comm_->rank()]; }
  // Each rank's shard is the parallel plan's (ParallelPlan::ZeroShardBegin / ZeroShardCount).

  // Before a micro-step's backward: grads is the model's flat gradient buffer, f32 or bf16 (null with
  // zero 2, where this object is the model's GradSink).
  void BeginBackward(DevPtr grads, bool last_micro_step);
  // GradSink (zero 2): ranges of the model's dtype (a bf16 model's are widened at Release).
  DevPtr Acquire(size_t begin, size_t end) override;
  void Release(size_t begin, size_t end) override;
  // Most floats of gradient buffers held at once during the last backward (zero 2).
  size_t peak_buffer_floats() const { return peak_buffer_floats_; }
  // ParamSource (zero 3): ranges of the model's dtype, gathered from every rank's shard.
  DevPtr Gather(size_t begin, size_t end) override;
  void Prefetch(size_t begin, size_t end) override;
  void Free(size_t begin, size_t end) override;
  // Bytes this rank handed to its collectives since the start (each collective's whole buffer: its
  // allreduces, reduce-scatters and all-gathers, checkpoints' gathers included).
  size_t comm_bytes() const { return comm_bytes_; }
  // The working parameters the optimizer updates, at element shard_begin(): this rank's shard
  // (zero 3), else the model's flat vector `params` from shard_begin().
  DevPtr OptimizerParams(DevPtr params) const;
  // The first communication error since the last call (zero 3: a gather's, which a forward pass
  // without a backward — evaluation — learns here), and clears it.
  Status TakeError();
  // The model's grad-ready hook.
  void GradsReady(size_t begin, size_t end);
  // Feeds on the model's backward: as its GradSink with zero 2, through its grad-ready hook
  // otherwise. hold_embedding (a pipeline whose first and last stage both hold the tied wte): the
  // range backward reports at flat position 0 (the embeddings, last in backward order) is held out of
  // the buckets until ReleaseHeld(), called once the two stages summed its gradient.
  // Zero 3: this rank's parameter shard is made here, from the model's parameters when it was built
  // whole, else zero (then initialize it: model->InitWeights(seed, OptimizerParams({}), shard_begin(),
  // shard_end()), or load a checkpoint).
  void Attach(DecoderModel* model, bool hold_embedding);
  void ReleaseHeld();
  // After the backward: starts the last bucket and waits for all of them (a peer failure is a
  // PeerError). With zero 2, adds this micro-step's reduced shard into the accumulator and zeroes
  // the model's buffer.
  Status EndBackward();
  // What the optimizer updates from, pointing at element shard_begin(): the full reduced
  // gradients (zero 0), this rank's reduced part of them (zero 1), or the accumulator (zero 2).
  float* OptimizerGrads();
  // Zero 2: clears the accumulator (after the optimizer step).
  void ResetAccumulator();
  // After the optimizer updated params[shard]: gives every rank every shard (zero 1, 2). params is
  // the model's working copy; a bf16 one comes from the fp32 masters (`master`: this rank's shard).
  Status AllGatherParams(DevPtr params, DevPtr master);
  // bf16 with zero 1 and 2: every rank's fp32 master shard into the fp32 copy (a collective), which then
  // holds the whole parameter vector (wide()) until the next backward widens gradients into it.
  Status GatherMasters(DevPtr master);
  // The whole fp32 vector a bucket at a time: every rank's part of each bucket of [0, total) gathered
  // from `master` (this rank's fp32 shard) into a bucket-sized buffer, then each(lo, n, bucket) while
  // it holds [lo, lo + n) (a collective). zero 2 rounds each bucket into the working copy; zero 3
  // streams the vector into the state hash (StreamParams) — no whole fp32 vector either way.
  Status GatherByBucket(DevPtr master, const std::function<void(size_t lo, size_t n, const float* bucket)>& each);
  // zero 3: the whole fp32 parameter vector, in order, to `take` on the host, a bucket at a time.
  Status StreamParams(DevPtr master, const std::function<void(const float* host, size_t n)>& take);
  // The reverse, after the whole fp32 vector was loaded into wide(): this rank's shard into master,
  // the whole vector rounded into the working copy params.
  void ScatterMasters(DevPtr master, DevPtr params);
  // The fp32 copy of the flat vector (bf16 models; null otherwise), made on first use (at Attach below
  // zero 2) (null when it cannot be allocated).
  DevPtr wide();
  // Frees the fp32 copy where training does not use it (ZeRO 2: made only for a checkpoint, a load or
  // the state hash), once `copied` (a device-staged snapshot still reading it) has passed.
  void ReleaseWide(const Event& copied = Event{});
  // A bf16 model's data parallelism (the gradients are widened into fp32 before they are reduced).
  bool narrow_model() const { return narrow_model_; }
  // The next widening of gradients into wide() waits, on the compute stream, for `e` (a checkpoint
  // snapshot still copying it).
  void WaitBeforeNextWiden(const Event& e) { widen_fence_ = e; }

 private:
  void Launch(size_t lo, size_t hi);
  void AddReady(size_t begin, size_t end);
  // Reduce-scatter of [lo, hi) from x (whose element 0 is flat position lo, f32 or bf16), in place.
  std::unique_ptr<Work> StartReduceScatter(DevPtr x, size_t lo, size_t hi);
  // Zero 0, 1 reducing bf16: the reduced values (all, or this rank's shard) into wide_.
  void WidenReduced();
  // Zero 2: waits for the oldest in-flight range, adds this rank's part into acc_, frees it.
  void RetireOldest();
  // Each rank's part of the flat range [lo, hi) (the shards are contiguous in rank order).
  std::vector<size_t> CountsIn(size_t lo, size_t hi) const;
  // Zero 3: a range's gather started (this rank's part copied in from pshard_), and its wait.
  struct GatheredRange {
    size_t begin, end;
    DeviceArray data;
    std::unique_ptr<Work> work;  // null once waited for
  };
  GatheredRange* StartGather(size_t begin, size_t end);
  GatheredRange* Find(size_t begin);
  void Finish(GatheredRange* g);
  static constexpr size_t kMaxInflight = 2;

  // Shard groups: the reduced shard allreduced across the groups (last micro-step).
  Status ReduceAcrossGroups();

  Communicator* comm_;
  Communicator* replica_;
  bool last_micro_step_ = false;
  size_t total_;
  int zero_;
  size_t bucket_floats_;
  std::vector<size_t> begin_, count_;  // shard of each rank
  float* grads_ = nullptr;  // what is reduced: the model's fp32 gradients, or wide_
  DevPtr narrow_;           // a bf16 model's gradients (widened into wide_ bucket by bucket), else null
  DeviceArray wide_;        // bf16 model: the fp32 copy of the flat vector
  DeviceArray gather_;      // bf16 model, zero 2: one bucket of fp32 masters being gathered
  bool narrow_model_ = false;
  bool reduce_bf16_ = false;  // reduce the bf16 gradients as they are (a narrow model only)
  bool ReduceNarrow() const { return narrow_model_ && reduce_bf16_; }
  Event widen_fence_;
  bool communicate_ = false;
  size_t pending_lo_ = 0, pending_hi_ = 0;  // ready, not yet launched: [lo, hi)
  bool hold_first_ = false;
  size_t held_lo_ = 0, held_hi_ = 0;  // the embeddings' range, held until ReleaseHeld
  std::vector<std::unique_ptr<Work>> inflight_;
  // Views of n floats at p on the backend's device; the compute stream's latest event.
  TensorView View(const float* p, size_t n) const {
    return TensorView::F32(p, {static_cast<int64_t>(n)}, be_.device());
  }
  Event Ready() const { return be_.RecordEvent(st_); }
  Backend& be_;
  Stream st_;
  DeviceArray acc_;  // zero 2: accumulated gradient shard
  struct RangeBuffer {
    size_t begin, end;
    DeviceArray data;    // fp32: what is reduce-scattered
    DeviceArray narrow;  // bf16 model: what backward writes, widened into data at Release
    std::unique_ptr<Work> work;  // set once released
  };
  // A pooled (or new) buffer of n elements of type t; aborts when it cannot be had (the GradSink
  // contract has no error path: it says what did not fit).
  DeviceArray TakeBuffer(std::vector<DeviceArray>* pool, size_t n, DType t, const char* what);
  std::vector<std::unique_ptr<RangeBuffer>> acquired_;         // zero 2: acquired, not yet released
  std::vector<std::unique_ptr<RangeBuffer>> inflight_ranges_;  // zero 2: released, oldest first
  std::vector<DeviceArray> pool_;         // retired range buffers, reused by the next Acquire of that size
  std::vector<DeviceArray> narrow_pool_;  // the same for a bf16 model's ranges
  size_t buffer_floats_ = 0, peak_buffer_floats_ = 0;
  DeviceArray pshard_;  // zero 3: this rank's working parameters (the model's dtype)
  std::vector<std::unique_ptr<GatheredRange>> gathered_;  // zero 3: started or held, in start order
  std::vector<DeviceArray> param_pool_;  // zero 3: freed range buffers, reused by the next gather of that size
  size_t comm_bytes_ = 0;
  Status first_error_;
};

}  // namespace anneal
