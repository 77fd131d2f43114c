// Tensor parallelism (Megatron): a group's collectives (TensorParallelGroup; CommTensorParallelGroup
// over a Communicator, blocking, in the caller's thread — the group is on one host in every sensible
// layout, where the Gloo communicator takes its shared-memory path; the first failure is kept, later
// calls do nothing, and status() reports it: the trainer checks after each step, exit 3 naming the
// lost rank) and the layers a model shard is built with (TensorParallelLayers). Not thread-safe.
#pragma once

#include "core/status.h"
#include "comm/communicator.h"
#include "model/decoder.h"
#include "model/layer_parallel.h"
#include "tensor/device_array.h"

namespace anneal {

// The collectives of a tensor-parallel group (CommTensorParallelGroup below implements them over a
// Communicator). Every rank of the group makes the same calls in the same order. A failure is kept
// by the implementation and reported by the caller after the step (a broken group fails every later
// call at once), so the model's methods stay free of error plumbing.
class TensorParallelGroup {
 public:
  virtual ~TensorParallelGroup() = default;
  // Buffers are views of the model's backend memory; `ready` is the event of the compute stream after
  // the op that wrote them (the collective waits for it; on the host it is empty: already done).
  // When a call returns its output may be read by the next op on the compute stream.
  // x (n) <- the sum over the group; the same bits on every rank.
  virtual void AllReduceSum(const TensorView& x, const Event& ready) = 0;
  // out (size, n) f64 <- every rank's in (n) f64, in rank order.
  virtual void AllGather(const TensorView& in, const TensorView& out, const Event& ready) = 0;
  // Sequence parallelism, n divisible by size: y (n / size) <- this rank's piece (pieces in rank
  // order) of the sum over the group of x (n).
  virtual void ReduceScatterSum(const TensorView& x, const TensorView& y, const Event& ready) = 0;
  // x (n): this rank's piece (n / size floats at rank * n / size) given, every other piece filled in.
  virtual void AllGatherInPlace(const TensorView& x, const Event& ready) = 0;
};

class CommTensorParallelGroup : public TensorParallelGroup {
 public:
  explicit CommTensorParallelGroup(Communicator* comm) : comm_(comm) {}
  void AllReduceSum(const TensorView& x, const Event& ready) override;
  void AllGather(const TensorView& in, const TensorView& out, const Event& ready) override;
  void ReduceScatterSum(const TensorView& x, const TensorView& y, const Event& ready) override;
  void AllGatherInPlace(const TensorView& x, const Event& ready) override;
  const Status& status() const { return status_; }
  // Bytes this rank sent into the group's collectives (allreduce: 2(t-1)/t of the buffer, all-gather
  // and reduce-scatter: (t-1)/t of the whole, as a ring moves them), for bench/tp_overhead.
  double bytes() const { return bytes_; }

 private:
  Communicator* comm_;
  Status status_;
  double bytes_ = 0;
};

// Megatron's tensor parallelism for a model shard (model/layer_parallel.h): column-parallel
// linears (q, k, v, mlp.fc) take every row and give this rank's columns, their input gradient summed
// over the group; row-parallel linears (attn.proj, mlp.proj) sum partial products over the group
// before the bias; the embedding and the tied LM head split the vocabulary (each rank embeds the
// tokens it holds, the loss combines every slice's log-sum-exp in rank order); with sequence
// parallelism the residual stream, LayerNorms and residual adds hold 1/tp of the rows, column inputs
// are all-gathered and row outputs reduce-scattered, and LayerNorm weight gradients are summed over
// the group per micro-batch. Every rank gets the same bits. `group` must outlive this; its failures
// are kept by the group (CommTensorParallelGroup::status) and reported after the step.
class TensorParallelLayers : public LayerParallel {
 public:
  // compute: the model's dtype (its sequence-parallel buffers are of it; bf16 collectives sum in fp32
  // and round once, comm/communicator.h).
  TensorParallelLayers(const ModelConfig& config, const ModelShard& shard, TensorParallelGroup* group, Backend& backend,
                       DType compute = DType::kF32);
  Status Prepare(size_t N) override;
  size_t ScratchFloats() const override;
  DevPtr ColumnInput(DevPtr x, size_t N) override;
  DevPtr ColumnInputGrad(DevPtr part, size_t N) override;
  void RowLinear(DevPtr out, DevPtr inp, DevPtr w, DevPtr b, int N, int K, DevPtr partial) override;
  void EmbeddingForward(DevPtr input, const int32_t* tokens, DevPtr wte, DevPtr wpe, int B, int T,
                        DevPtr partial) override;
  void EmbeddingBackward(DevPtr dwte, DevPtr dwpe, DevPtr dresidual, const int32_t* tokens, int B,
                         int T) override;
  double Loss(DevPtr logits, DevPtr losses, const int32_t* targets, int N, float dscale) override;
  void SumOverGroup(DevPtr x, size_t n) override;
  void NormBackward(NormKind kind, DevPtr dinp, DevPtr dw, DevPtr db, DevPtr dout, DevPtr inp, DevPtr w,
                         DevPtr mean, DevPtr rstd, int rows) override;

 private:
  TensorView F(DevPtr p, int64_t n) const { return TensorView(p.p, p.t, {n}, be_.device()); }
  TensorView F(DevPtr p, int64_t r, int64_t c) const { return TensorView(p.p, p.t, {r, c}, be_.device()); }
  Event Ready() const { return be_.RecordEvent(st_); }
  // part (N, C) summed over the group into out: this rank's rows (sequence parallel), or in place.
  void ReduceRows(DevPtr part, DevPtr out, size_t N);

  DType cd_;
  ModelConfig c_;
  ModelShard shard_;
  TensorParallelGroup* group_;
  Backend& be_;
  Stream st_;
  int Vl_, v0_;
  size_t N_ = 0;
  DeviceArray gather_, rows_, ln_grads_;  // sequence parallelism: (N,C) gathered, (R,C) rows, (2C)
  DeviceArray stats_, gathered_;          // the last stage: the loss's (N,2) and (tp,N,2) f64 statistics
};

}  // namespace anneal
