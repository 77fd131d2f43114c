// LayerParallel: how the layers that tensor parallelism splits run on one rank — the points where
// Megatron's split talks to the group, as the model calls them. The model is written once against
// this interface, with no tensor-parallel branches of its own: the whole model (tp = 1) is built
// with WholeModelLayers (each method one plain backend op, or nothing), a tensor-parallel shard with
// parallel/tensor_parallel.h's TensorParallelLayers (column- and row-parallel linears, the
// vocabulary-parallel embedding and loss, sequence-parallel regions).
//
// Buffers are the model's, in its backend's memory; shapes in rows: N = B*T rows in all, R rows of
// the residual stream on this rank (N / tp under sequence parallelism, else N); C channels. The
// implementation owns the scratch its collectives need, allocated by Prepare for a batch shape.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/status.h"
#include "model/config.h"
#include "tensor/backend.h"

namespace anneal {

class LayerParallel {
 public:
  virtual ~LayerParallel() = default;
  // Scratch for batches of N rows (called when the shape changes); errors name the allocation.
  virtual Status Prepare(size_t N) = 0;
  // Floats of scratch held (activation memory accounting; f64 scratch counts twice).
  virtual size_t ScratchFloats() const = 0;

  // The input of a column-parallel linear, every row (N, C), from this rank's rows x (R, C): x itself,
  // or all ranks' rows gathered (sequence parallelism; valid until the next call).
  virtual DevPtr ColumnInput(DevPtr x, size_t N) = 0;
  // The input gradient of a column-parallel linear: `part` (N, C) holds this rank's columns'
  // contribution; returns this rank's rows (R, C) of its sum over the group (part itself, summed in
  // place, or a scratch buffer under sequence parallelism).
  virtual DevPtr ColumnInputGrad(DevPtr part, size_t N) = 0;
  // out (R, C) = inp (N, K) @ w^T + b for a row-parallel linear (w: (C, K); b null: no bias);
  // `partial` (N, C) is scratch the caller lends for the partial sums.
  virtual void RowLinear(DevPtr out, DevPtr inp, DevPtr w, DevPtr b, int N, int K,
                         DevPtr partial) = 0;
  // input (R, C) = the embedding of tokens (N) plus positions; wte (Vl, C) this rank's rows, wpe
  // (T, C) the positions' rows (decoding passes row pos alone, T = 1; null: no learned positions).
  // `partial` (N, C) is lent scratch.
  virtual void EmbeddingForward(DevPtr input, const int32_t* tokens, DevPtr wte, DevPtr wpe, int B, int T,
                                DevPtr partial) = 0;
  // dwte (Vl, C) += and dwpe += (null: none) from dresidual (R, C), the gradient of the embedding's output.
  virtual void EmbeddingBackward(DevPtr dwte, DevPtr dwpe, DevPtr dresidual, const int32_t* tokens, int B,
                                 int T) = 0;
  // The loss of logits (N, Vl) against targets (N): losses (N), their sum returned; with dscale != 0
  // the logits become their gradient (as Backend::CrossEntropy).
  virtual double Loss(DevPtr logits, DevPtr losses, const int32_t* targets, int N, float dscale) = 0;
  // x (n) <- its sum over the group, every rank the same (replicated key/value heads' gradients).
  virtual void SumOverGroup(DevPtr x, size_t n) = 0;
  // A norm's backward over this rank's rows (R, C): LayerNorm (dw, db, mean) or RMSNorm (dw; db and
  // mean null); dw, db (C) accumulate the weight gradients, summed over the group first where the rows
  // are split (sequence parallelism).
  virtual void NormBackward(NormKind kind, DevPtr dinp, DevPtr dw, DevPtr db, DevPtr dout, DevPtr inp, DevPtr w,
                            DevPtr mean, DevPtr rstd, int rows) = 0;
};

// The whole model on one rank (tp = 1): every method is the plain op.
class WholeModelLayers : public LayerParallel {
 public:
  WholeModelLayers(const ModelConfig& config, Backend& backend)
      : c_(config), be_(backend), st_(backend.DefaultStream()) {}
  Status Prepare(size_t) override { return Status::Ok(); }
  size_t ScratchFloats() const override { return 0; }
  DevPtr ColumnInput(DevPtr x, size_t) override { return x; }
  DevPtr ColumnInputGrad(DevPtr part, size_t) override { return part; }
  void RowLinear(DevPtr out, DevPtr inp, DevPtr w, DevPtr b, int N, int K, DevPtr) override;
  void EmbeddingForward(DevPtr input, const int32_t* tokens, DevPtr wte, DevPtr wpe, int B, int T,
                        DevPtr) override;
  void EmbeddingBackward(DevPtr dwte, DevPtr dwpe, DevPtr dresidual, const int32_t* tokens, int B,
                         int T) override;
  double Loss(DevPtr logits, DevPtr losses, const int32_t* targets, int N, float dscale) override;
  void SumOverGroup(DevPtr, size_t) override {}
  void NormBackward(NormKind kind, DevPtr dinp, DevPtr dw, DevPtr db, DevPtr dout, DevPtr inp, DevPtr w,
                    DevPtr mean, DevPtr rstd, int rows) override;

 private:
  TensorView F(DevPtr p, int64_t r, int64_t c) const { return TensorView(p.p, p.t, {r, c}, be_.device()); }
  TensorView F(DevPtr p, int64_t n) const { return TensorView(p.p, p.t, {n}, be_.device()); }
  TensorView Opt(DevPtr p, int64_t n) const { return p.p ? F(p, n) : TensorView(); }
  ModelConfig c_;
  Backend& be_;
  Stream st_;
};

}  // namespace anneal
