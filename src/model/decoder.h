// DecoderModel: a decoder-only transformer's forward and backward, written out layer by layer as ops
// of a Backend (tensor/backend.h), each given views of the model's buffers and the model's stream.
// One model for every family (model/family.h): the family decides the blocks (config.blocks: which
// norm, positions learned or rotary, which MLP, biases or none, how many key/value heads, a tied or
// untied head) and the canonical tensors; the model resolves each layer's tensors by role once
// (LayerParams) and runs the blocks it was given.
//
// Parallelism stays outside (DESIGN.md): src/parallel decides which part of the model a rank holds
// (a ModelShard: a tensor slice and a pipeline stage) and builds the model with the layers of that
// split (model/layer_parallel.h: parallel/tensor_parallel.h's TensorParallelLayers, or the whole
// width); the model runs the same math on the local widths and calls those layers where Megatron's
// split talks to its group (a column-parallel layer's input and input gradient, a row-parallel
// linear, the vocabulary-parallel embedding and loss, LayerNorm backward). Data parallelism hangs on
// the grad-ready hook or is the GradSink; pipeline stages exchange activations outside the model,
// through StageInput / StageOutput / InputGrad.
//
// Memory: all of it comes from the backend's allocator (DeviceArray). Parameters and gradients are
// each one flat fp32 buffer in ParamLayout order; activations live in slots, one per micro-batch in
// flight (a pipeline schedule keeps several), each allocated on its first use with a (B, T) shape.
// Pointers the model hands out (params(), Param(), logits(), StageOutput(), ...) point into the
// backend's memory: the host reads them directly only when backend().HostAccessible(), else through
// tensor/host_copy.h. An allocation that fails is kept in status() (the first one) and makes every
// later pass a no-op; callers check status() after a step. Not thread-safe (the ops use threads inside).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "model/activation_offload.h"
#include "model/config.h"
#include "model/layer_parallel.h"
#include "model/param_store.h"
#include "tensor/backend.h"
#include "tensor/device_array.h"

namespace anneal {

// Gradient storage handed out range by range (ZeRO-2: no rank holds a full gradient buffer). During
// Backward the model calls Acquire(begin, end) before it first writes a range's gradients and
// Release(begin, end) once they are final for this batch (the same ranges, in the same order, as the
// grad-ready hook); Acquire returns end-begin zeroed elements of the model's gradient dtype (its
// parameters' dtype) that stay valid until Release.
class GradSink {
 public:
  virtual ~GradSink() = default;
  virtual DevPtr Acquire(size_t begin, size_t end) = 0;
  virtual void Release(size_t begin, size_t end) = 0;
};

// Parameters handed out range by range (ZeRO-3: no rank holds the whole parameter vector). In a pass
// the model calls Gather(begin, end) before it first reads a range and Free(begin, end) once the pass
// is done with it (the GradSink's ranges: the embeddings, each layer, ln_f and the head); Gather
// returns end-begin elements of the model's dtype holding the whole range, valid until Free.
// Prefetch(begin, end) names the range the pass will Gather next, so its communication starts while
// the current range computes. Every data-parallel rank makes the same calls in the same order.
class ParamSource {
 public:
  virtual ~ParamSource() = default;
  virtual DevPtr Gather(size_t begin, size_t end) = 0;
  virtual void Prefetch(size_t begin, size_t end) = 0;
  virtual void Free(size_t begin, size_t end) = 0;
};

// The keys and values of earlier positions for decoding one sequence a position at a time (the
// generator's): (L, rows, n_kv_head * head size) each in the model's backend memory, plus the decode
// attention's scores; positions 0 .. rows-1 fit.
struct KvCache {
  DeviceArray k, v, scores;
  int rows = 0;
  // For `rows` positions (0 or more than max_seq_len: max_seq_len), keys and values in the model's
  // compute dtype t; errors name the allocation.
  Status Allocate(Backend& b, const ModelConfig& config, DType t, int rows = 0);
};

class DecoderModel {
 public:
  // compute: the dtype of the parameters, gradients and activations (the precision policy's working
  // dtype; LayerNorm and attention statistics and the losses stay fp32). bf16 needs a backend with
  // bf16 ops (ref emulates them) and, for now, the whole model on one rank.
  DecoderModel(const ModelConfig& config, Backend& backend, DType compute = DType::kF32);
  // One shard of the model, built with the layers of its tensor-parallel split: `layers` must be given
  // when shard.tp > 1 (parallel/tensor_parallel.h TensorParallelLayers) and outlive the model; null
  // means the whole width on this rank. config.padded_vocab must divide by shard.tp.
  // flat: which flat buffers it allocates — both, the parameters only (ZeRO-2 hands gradients out
  // range by range), or neither (ZeRO-3: a ParamSource holds the parameters; initialize its shard with
  // InitWeights(seed, dst, begin, end)); a model never holds a whole vector it will not use.
  enum class FlatBuffers { kBoth, kParamsOnly, kNone };
  DecoderModel(const ModelConfig& config, Backend& backend, const ModelShard& shard, LayerParallel* layers,
               DType compute = DType::kF32, FlatBuffers flat = FlatBuffers::kBoth);
  DecoderModel(const DecoderModel&) = delete;  // its ParamStore refers to its own layout
  DecoderModel& operator=(const DecoderModel&) = delete;
  const ModelShard& shard() const { return shard_; }

  const ModelConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  Backend& backend() const { return be_; }
  const Stream& stream() const { return st_; }
  // Ok, or the first allocation that failed (naming the tensor and what to do).
  const Status& status() const { return status_; }
  DType compute_dtype() const { return cd_; }
  // The working parameters and their gradients (model/param_store.h).
  const ParamStore& store() const { return store_; }
  // The flat parameter and gradient buffers in the compute dtype (gradients: null in sink mode).
  DevPtr params_ptr() const { return store_.params(); }
  DevPtr grads_ptr() const { return store_.grads(); }
  // The same as fp32 pointers: fp32 models only (an invariant; bf16 models use the DevPtr forms).
  float* params() { return store_.params().f32(); }
  const float* params() const { return store_.params().f32(); }
  float* grads() { return store_.has_grads() ? store_.grads().f32() : nullptr; }
  const float* grads() const { return store_.has_grads() ? store_.grads().f32() : nullptr; }
  size_t num_floats() const { return store_.size(); }
  // One tensor's parameters and gradients; aborts on an unknown name (an invariant).
  DevPtr ParamPtr(const std::string& name) const;
  DevPtr GradPtr(const std::string& name);
  float* Param(const std::string& name) { return ParamPtr(name).f32(); }  // fp32 models
  float* Grad(const std::string& name) { return GradPtr(name).f32(); }

  // Activation recomputation (model/config.h: none, selective, full). All three give bit-identical
  // gradients (the same kernels on the same inputs, in the same order).
  void set_recompute(Recompute r) {
    recompute_ = r;
    for (Slot& s : slots_) s.B = s.T = 0;  // reallocate on the next Forward
    scratch_.N = 0;
  }
  // Micro-batches whose activations are held at once (default 1); slots are 0..n-1.
  void set_slots(int n) { slots_.resize(n); }
  // Activation offload (train.offload_activations; full recomputation and one slot only — the caller
  // checks): each layer's output (the next layer's input, all that full recomputation keeps) is copied
  // to host staging memory after the layer runs and brought back before the backward that recomputes
  // from it, so the device holds ModelConfig::kOffloadRing of them instead of every layer's. The copies
  // run on the backend's offload stream, overlapping the layers' compute (model/activation_offload.h).
  void set_offload(bool on);
  bool offload() const { return offload_ != nullptr; }
  const ActivationOffload* offloader() const { return offload_.get(); }
  int slots() const { return static_cast<int>(slots_.size()); }
  Recompute recompute() const { return recompute_; }

  // GPT-2's initialization from a seed (every family): N(0, 0.02) weights, N(0, 0.02/sqrt(2L)) for
  // the two residual projections, zero biases, norm weights 1; padded vocabulary rows zero. A shard gets exactly
  // its box of the whole model's values (the random stream runs over the canonical tensors in order).
  void InitWeights(uint64_t seed);
  // The same values' flat positions [begin, end) of this shard's layout, written to dst (end - begin
  // elements of the compute dtype): a ZeRO-3 rank's shard, without the whole vector anywhere.
  void InitWeights(uint64_t seed, DevPtr dst, size_t begin, size_t end);

  // tokens, targets: (B, T), 1 <= T <= max_seq_len, ids < vocab_size (checked by the caller).
  // Returns the mean cross-entropy over B*T positions. With grad_scale != 0 the logits buffer is
  // turned into d(loss * grad_scale * B*T)/d(logits) for Backward (grad_scale = 1/(B*T*accum)).
  // The whole model's pass (slot 0); a shard of a pipeline uses ForwardStage.
  double Forward(const int32_t* tokens, const int32_t* targets, int B, int T, float grad_scale);
  // Logits (B, T, Vp) of the last Forward with grad_scale == 0.
  const float* logits() const { return slots_[0].logits.ptr().f32(); }  // fp32 models
  // Adds this batch's gradients into grads() (call ZeroGrad between optimizer steps).
  void Backward();
  // Decoding (the whole model only): `token` at position `pos` runs through the same layers as
  // Forward with B = T = 1, each layer's key and value written to row pos of `cache` and its
  // attention reading rows 0..pos; returns the logits (Vp) in backend memory (valid until the next
  // pass), or null when an allocation failed (status()). Runs in slot 0: a pass held there is lost.
  DevPtr DecodeStep(int32_t token, int pos, KvCache& cache);

  // Pipeline stages. A stage's forward of micro-batch slot `slot`: the first stage reads tokens; any
  // other reads StageInput(slot, B, T), which the caller fills (B, T, C) first. The last stage reads
  // targets and returns the mean loss (else 0). StageOutput(slot) (B, T, C) is a non-last stage's
  // result, valid until the slot's next forward. Stage buffers are in the compute dtype (a bf16
  // pipeline passes bf16 activations and gradients).
  DevPtr StageInput(int slot, int B, int T);
  double ForwardStage(int slot, const int32_t* tokens, const int32_t* targets, int B, int T, float grad_scale);
  DevPtr StageOutput(int slot) const { return OutputOf(slot); }
  // The slot's backward: the last stage starts from its loss, any other from dout (B, T, C) in the
  // compute dtype, the gradient of its output. Then InputGrad() (B, T, C) is the gradient of a
  // non-first stage's input, valid until the next BackwardStage.
  void BackwardStage(int slot, DevPtr dout);
  DevPtr InputGrad() const { return scratch_.dresidual.ptr(); }
  // Floats of StageInput / StageOutput / InputGrad for a (B, T) micro-batch: (B*T/tp) * C rows with
  // sequence parallelism (each rank passes its own rows), B*T*C otherwise.
  size_t StageFloats(int B, int T) const {
    const size_t N = static_cast<size_t>(B) * T;
    return (shard_.seq_parallel() ? N / shard_.tp : N) * config_.n_embd;
  }
  // Called during Backward each time a contiguous range [begin, end) of grads() is final for this
  // batch, in decreasing address order covering everything: ln_f, layer L-1, ..., layer 0, then
  // the embeddings (wte is final only after the encoder's backward). Data parallelism hangs its
  // gradient communication here, so it overlaps the rest of the backward pass. Empty = none.
  void set_grad_ready_hook(std::function<void(size_t begin, size_t end)> hook) { grad_ready_ = std::move(hook); }
  // Gradients go to `sink` range by range instead of grads(), whose buffer is freed (grads() is then
  // null and ZeroGrad does nothing). The sink must outlive the model's Backward calls.
  void set_grad_sink(GradSink* sink);
  // Parameters come from `source` range by range instead of params(), whose buffer is freed (params()
  // is then null; the source took its values first). Forward gathers the embeddings and the head
  // (ln_f, an untied lm_head) for the whole pass — a Forward with grad_scale != 0 keeps them for its
  // Backward, which frees them at its end — and each layer just before it runs, prefetching the next,
  // freeing it after; Backward gathers each layer again (recomputation reads the same gathered range).
  // Decoding and ParamPtr need the whole vector (they abort in source mode).
  void set_param_source(ParamSource* source);
  void ZeroGrad();
  // Floats of activation memory currently allocated (ModelConfig::ActivationFloats is its formula).
  size_t ActivationFloatsAllocated() const;

 private:
  // The per-layer activations of `n` layers (every layer of a slot, or one layer shared by all slots
  // under full recomputation).
  // fch is GPT-2's fc output or Llama's gate, `up` SwiGLU's second input, fch_gelu the activation's
  // output (GELU or SwiGLU); the means exist for LayerNorm only.
  struct LayerActs {
    size_t n = 0;
    DeviceArray ln1, ln1_mean, ln1_rstd, q, k, v, atty, lse, attproj, resid2, ln2, ln2_mean, ln2_rstd, fch, up,
        fch_gelu, fcproj;
  };
  // Where one local layer's tensors live in the flat buffers, by role (npos: the family has none).
  static constexpr size_t kNone = static_cast<size_t>(-1);
  struct LayerParams {
    size_t at[static_cast<size_t>(Role::kCount)];
    size_t operator[](Role r) const { return at[static_cast<size_t>(r)]; }
  };
  // One micro-batch in flight.
  struct Slot {
    int B = 0, T = 0;
    DeviceArray input;   // (B,T,C): the embeddings (first stage) or the previous stage's output
    DeviceArray resid3;  // (nl,B,T,C): every local layer's output
    LayerActs layers;    // empty under full recomputation (shared_ instead)
    DeviceArray lnf, lnf_mean, lnf_rstd, logits, losses;  // last stage
    DeviceArray tokens, targets;  // (B,T) i32
    bool have_grad_logits = false;
  };
  struct Scratch {
    size_t N = 0;
    DeviceArray dresidual, dln, dq, dk, dv, datty, dfch, dfch_gelu, dup, dkv_w;
  };
  void EnsureSlot(int slot, int B, int T);
  void AllocLayers(LayerActs* a, size_t n, size_t N, bool own_gelu);
  // Local layer i (global layer_begin + i) of slot `slot`: reads its input, writes resid3[i], keeps
  // its activations in `a` at layer index `li`.
  // With `kv` (decoding, B = T = 1) the layer's key and value go to the cache's row `pos` and its
  // attention reads the cached rows 0..pos.
  void LayerForward(Slot& slot, int i, LayerActs& a, int li, KvCache* kv = nullptr, int pos = 0);
  // Backward, in pieces: the LM head and ln_f; local layer i; its attention block.
  void HeadBackward(Slot& s, int slot);
  void LayerBackward(Slot& s, int i);
  void AttentionBlockBackward(Slot& s, int i, int li, LayerActs& a);
  void ZeroScratch(const DeviceArray& v);
  // The flat gradient ranges backward finishes: local layer i's first position, acquiring a range
  // from the GradSink, and handing a finished one to the hook or the sink.
  size_t LayerStart(int i) const;
  void AcquireRange(size_t begin, size_t end);
  void RangeReady(size_t begin, size_t end);
  // Source mode: a range's parameters gathered (a no-op when held already), the next range's gather
  // started, a range freed; the embeddings' and the head's ranges (held through a training pass).
  void GatherRange(size_t begin, size_t end);
  void PrefetchRange(size_t begin, size_t end);
  void FreeRange(size_t begin, size_t end);
  void FreeRootRanges();
  // Layer i's range (i == nl_: the head's).
  size_t RangeEnd(int i) const { return i < nl_ ? LayerStart(i + 1) : layout_.total_floats(); }
  // The buffers holding slot's layer i activations (kept or recomputed) and their index.
  LayerActs& ActsOf(Slot& slot) { return recompute_ == Recompute::kFull ? shared_ : slot.layers; }
  // Slice of a per-layer activation array for layer l: (N * width) floats.
  static DevPtr L(const DeviceArray& a, int l, size_t width) {
    return a.empty() ? DevPtr{} : a.ptr() + static_cast<size_t>(l) * width;
  }
  // The stage output of slot (B,T,C) in the compute dtype.
  DevPtr OutputOf(int slot) const;
  // Local layer i's output (R,C) in slot s (with offload: its place in the device ring).
  DevPtr LayerOut(const Slot& s, int i) const;
  TensorView LayerOutView(const Slot& s, int i) const;
  // Views of the model's buffers on its backend's device: a matrix (r, c), a vector (n), a (B, T, C)
  // tensor, token ids.
  TensorView M(DevPtr p, int64_t r, int64_t c) const { return TensorView(p.p, p.t, {r, c}, be_.device()); }
  TensorView M(DevPtr p, int64_t n) const { return TensorView(p.p, p.t, {n}, be_.device()); }
  TensorView M3(DevPtr p, int64_t B, int64_t T, int64_t C) const {
    return TensorView(p.p, p.t, {B, T, C}, be_.device());
  }
  TensorView Ids(const int32_t* p, int64_t n) const { return TensorView::I32(p, {n}, be_.device()); }
  TensorView Ids(const int32_t* p, int64_t B, int64_t T) const { return TensorView::I32(p, {B, T}, be_.device()); }
  // a <- n zeroed elements; the first failure is kept in status_.
  void Alloc(DeviceArray& a, size_t n, const char* what, DType t);
  void Alloc(DeviceArray& a, size_t n, const char* what) { Alloc(a, n, what, cd_); }
  // A tensor's parameters and gradients by flat offset (the gradient in the GradSink's range in sink mode).
  DevPtr P(size_t off) const;
  DevPtr G(size_t off);
  // A bias view, or none where the family has no biases.
  TensorView Bias(size_t off, int64_t n) const { return off == kNone ? TensorView() : M(P(off), n); }
  TensorView BiasGrad(size_t off, int64_t n) { return off == kNone ? TensorView() : M(G(off), n); }
  // out (R,C) = inp (N,K) @ W^T + b for a row-parallel projection (the attention's, the MLP's).
  void RowParallelLinear(DevPtr out, DevPtr inp, size_t w, size_t b, int N, int K);
  // The family's norm over `rows` rows: out = norm(inp) with its statistics (mean: LayerNorm only);
  // and with a residual add first (resid = a + b).
  void NormForward(DevPtr out, DevPtr mean, DevPtr rstd, DevPtr inp, size_t w, size_t b, int rows);
  void ResidualNormForward(DevPtr resid, DevPtr out, DevPtr mean, DevPtr rstd, DevPtr a, DevPtr b, size_t w,
                           size_t bias, int rows);
  // The norm's backward of the parameters w (and b) over this rank's rows.
  void NormBackward(DevPtr dinp, size_t w, size_t b, DevPtr dout, DevPtr inp, DevPtr mean, DevPtr rstd, int rows);
  // Rotary embedding of q (B,T,Cl) and k (B,T,Ckv/tp) at positions pos0.. (backward: the inverse).
  void RotateQK(DevPtr q, DevPtr k, int B, int T, int pos0, bool inverse);
  // The activation of the MLP's hidden layer: out = GELU(fch) or silu(fch) * up.
  void MlpActivation(DevPtr out, DevPtr fch, DevPtr up, size_t n);
  // The LM head's matrix: wte when tied, lm_head otherwise.
  size_t HeadWeight() const { return config_.tie_embeddings ? wte_ : lm_head_; }

  ModelConfig config_;
  DType cd_ = DType::kF32;  // the compute dtype
  ModelShard shard_;
  std::unique_ptr<WholeModelLayers> whole_;  // the layers when none are given
  LayerParallel* layers_;
  int nl_ = 0;                 // local layers
  int Cl_ = 0, Ckvl_ = 0, Fl_ = 0, Hl_ = 0, Vl_ = 0;  // local widths (q, k and v, the MLP, heads, vocabulary)
  bool kv_replicated_ = false;     // every tp rank holds all key/value heads (tp does not divide n_kv_head)
  size_t kv_row0_ = 0;             // then: the first row of the one head this rank uses
  size_t KvWeightFloats() const;
  std::vector<LayerParams> lp_;   // per local layer
  size_t wte_ = kNone, wpe_ = kNone, normf_w_ = kNone, normf_b_ = kNone, lm_head_ = kNone;
  DeviceArray rope_cos_, rope_sin_;  // (maxT, head size / 2) f32 when the family is rotary
  ParamLayout layout_;
  Backend& be_;
  Stream st_;
  ParamStore store_;  // after layout_: built over it
  std::vector<Slot> slots_;
  LayerActs shared_;  // full recomputation: one layer's buffers for every slot
  DeviceArray gelu_shared_;  // selective recomputation: one GELU buffer
  Scratch scratch_;
  Status status_;
  Recompute recompute_ = Recompute::kNone;
  std::unique_ptr<ActivationOffload> offload_;  // train.offload_activations: the ring and its copies
  std::function<void(size_t, size_t)> grad_ready_;
  GradSink* sink_ = nullptr;
  struct ActiveRange {
    size_t begin, end;
    DevPtr data;
  };
  std::vector<ActiveRange> active_;  // sink mode: ranges acquired and not yet released
  ParamSource* source_ = nullptr;
  std::vector<ActiveRange> gathered_;  // source mode: parameter ranges gathered and not yet freed
};

}  // namespace anneal
