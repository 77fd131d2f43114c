#include "parallel/tensor_parallel.h"

#include <algorithm>
#include <cstdlib>

#include "core/check.h"

namespace anneal {

void CommTensorParallelGroup::AllReduceSum(const TensorView& x, const Event& ready) {
  if (!status_.ok()) return;
  const double t = comm_->size();
  bytes_ += 2.0 * (t - 1) / t * x.bytes();
  status_ = comm_->StartAllReduceSum(x, ready)->Wait();
}

void CommTensorParallelGroup::AllGather(const TensorView& in, const TensorView& out, const Event& ready) {
  if (!status_.ok()) return;
  bytes_ += (comm_->size() - 1.0) * in.bytes();
  status_ = comm_->StartAllGather(in, out, ready)->Wait();
}

void CommTensorParallelGroup::ReduceScatterSum(const TensorView& x, const TensorView& y, const Event& ready) {
  if (!status_.ok()) return;
  const size_t t = comm_->size(), n = static_cast<size_t>(x.numel());
  bytes_ += (t - 1.0) / t * x.bytes();
  status_ = comm_->StartReduceScatterSum(x, std::vector<size_t>(t, n / t), y, ready)->Wait();
}

void CommTensorParallelGroup::AllGatherInPlace(const TensorView& x, const Event& ready) {
  if (!status_.ok()) return;
  const size_t t = comm_->size(), n = static_cast<size_t>(x.numel());
  bytes_ += (t - 1.0) / t * x.bytes();
  status_ = comm_->StartAllGatherV(x, std::vector<size_t>(t, n / t), ready)->Wait();
}

}  // namespace anneal

namespace anneal {

TensorParallelLayers::TensorParallelLayers(const ModelConfig& config, const ModelShard& shard, TensorParallelGroup* group,
                                           Backend& backend, DType compute)
    : cd_(compute),
      c_(config),
      shard_(shard),
      group_(group),
      be_(backend),
      st_(backend.DefaultStream()),
      Vl_(config.padded_vocab / shard.tp),
      v0_(shard.tp_rank * (config.padded_vocab / shard.tp)) {
  ANNEAL_CHECK(group && shard.tp >= 2 && config.padded_vocab % shard.tp == 0, "a tensor-parallel shape ParallelPlan should have refused");
}

Status TensorParallelLayers::Prepare(size_t N) {
  if (N == N_) return Status::Ok();
  N_ = N;
  const size_t C = c_.n_embd, R = shard_.seq_parallel() ? N / shard_.tp : N;
  if (shard_.seq_parallel()) {
    ANNEAL_RETURN_IF_ERROR(gather_.Assign(be_, N * C, "sequence-parallel gather (B,T,C)", cd_));
    ANNEAL_RETURN_IF_ERROR(rows_.Assign(be_, R * C, "sequence-parallel rows", cd_));
    ANNEAL_RETURN_IF_ERROR(ln_grads_.Assign(be_, 2 * C, "sequence-parallel LayerNorm gradients", cd_));
  }
  if (shard_.last(c_)) {
    ANNEAL_RETURN_IF_ERROR(stats_.Assign(be_, 2 * N, "vocabulary-parallel loss statistics", DType::kF64));
    ANNEAL_RETURN_IF_ERROR(
        gathered_.Assign(be_, 2 * N * shard_.tp, "vocabulary-parallel loss statistics", DType::kF64));
  }
  return Status::Ok();
}

size_t TensorParallelLayers::ScratchFloats() const {
  return gather_.size() + rows_.size() + ln_grads_.size() + 2 * (stats_.size() + gathered_.size());
}

DevPtr TensorParallelLayers::ColumnInput(DevPtr x, size_t N) {
  if (!shard_.seq_parallel()) return x;
  const size_t C = c_.n_embd, R = N / shard_.tp;
  DevPtr g = gather_.ptr();
  be_.Copy(st_, F(g + shard_.tp_rank * R * C, R, C), F(x, R, C));
  group_->AllGatherInPlace(F(g, N * C), Ready());
  return g;
}

void TensorParallelLayers::ReduceRows(DevPtr part, DevPtr out, size_t N) {
  const size_t C = c_.n_embd;
  if (shard_.seq_parallel()) group_->ReduceScatterSum(F(part, N * C), F(out, N * C / shard_.tp), Ready());
  else group_->AllReduceSum(F(part, N * C), Ready());  // in place: part is out
}

DevPtr TensorParallelLayers::ColumnInputGrad(DevPtr part, size_t N) {
  DevPtr rows = shard_.seq_parallel() ? rows_.ptr() : part;
  ReduceRows(part, rows, N);
  return rows;
}

void TensorParallelLayers::RowLinear(DevPtr out, DevPtr inp, DevPtr w, DevPtr b, int N, int K,
                                     DevPtr partial) {
  const int C = c_.n_embd, R = shard_.seq_parallel() ? N / shard_.tp : N;
  DevPtr part = shard_.seq_parallel() ? partial : out;  // (N,C) partial sums
  be_.LinearForward(st_, F(part, N, C), F(inp, N, K), F(w, C, K), TensorView());
  ReduceRows(part, out, N);
  if (b.p) be_.BiasAdd(st_, F(out, R, C), F(b, C));
}

void TensorParallelLayers::EmbeddingForward(DevPtr input, const int32_t* tokens, DevPtr wte, DevPtr wpe,
                                            int B, int T, DevPtr partial) {
  const int C = c_.n_embd, N = B * T;
  const bool sp = shard_.seq_parallel();
  const int R = sp ? N / shard_.tp : N, row0 = sp ? shard_.tp_rank * R : 0;
  // The rank holding a token's row contributes it, the others 0; summed over the group.
  DevPtr rows = sp ? partial : input;  // (N,C)
  be_.VocabEmbeddingForward(st_, F(rows, N, C), TensorView::I32(tokens, {N}, be_.device()), F(wte, Vl_, C), v0_);
  ReduceRows(rows, input, N);
  if (wpe.p) be_.AddPositions(st_, F(input, R, C), F(wpe, T, C), row0, T);
}

void TensorParallelLayers::EmbeddingBackward(DevPtr dwte, DevPtr dwpe, DevPtr dresidual, const int32_t* tokens,
                                             int B, int T) {
  const int C = c_.n_embd, N = B * T;
  // dwte rows of this slice's tokens; dwpe (replicated, the same on every rank of the group).
  DevPtr dall = ColumnInput(dresidual, N);  // every row
  be_.VocabEmbeddingBackward(st_, F(dwte, Vl_, C), dwpe.p ? F(dwpe, c_.max_seq_len, C) : TensorView(), F(dall, N, C),
                             TensorView::I32(tokens, {N}, be_.device()), v0_, T);
}

double TensorParallelLayers::Loss(DevPtr logits, DevPtr losses, const int32_t* targets, int N, float dscale) {
  const int tp = shard_.tp;
  const int nreal = std::clamp(c_.vocab_size - v0_, 0, Vl_);  // columns of this slice that are real tokens
  const TensorView lg = F(logits, N, Vl_), tg = TensorView::I32(targets, {N}, be_.device());
  const TensorView stats = TensorView::F64(stats_.f64(), {N, 2}, be_.device());
  // This slice's log-sum-exp and target logit per row (0 when another slice holds the target).
  be_.VocabLossStats(st_, stats, lg, tg, v0_, nreal);
  group_->AllGather(stats, TensorView::F64(gathered_.f64(), {tp, N, 2}, be_.device()), Ready());
  // Every rank combines the slices in rank order: the same loss, bit for bit.
  return be_.VocabLossCombine(st_, lg, F(losses, N), stats, TensorView::F64(gathered_.f64(), {tp, N, 2}, be_.device()),
                              tg, v0_, nreal, dscale);
}

void TensorParallelLayers::SumOverGroup(DevPtr x, size_t n) { group_->AllReduceSum(F(x, n), Ready()); }

void TensorParallelLayers::NormBackward(NormKind kind, DevPtr dinp, DevPtr dw, DevPtr db, DevPtr dout, DevPtr inp,
                                        DevPtr w, DevPtr mean, DevPtr rstd, int rows) {
  const int C = c_.n_embd;
  const bool rms = kind == NormKind::kRmsNorm;
  auto backward = [&](DevPtr gw, DevPtr gb) {
    if (rms) {
      be_.RmsNormBackward(st_, F(dinp, rows, C), F(gw, C), F(dout, rows, C), F(inp, rows, C), F(w, C), F(rstd, rows));
    } else {
      be_.LayerNormBackward(st_, F(dinp, rows, C), F(gw, C), F(gb, C), F(dout, rows, C), F(inp, rows, C), F(w, C),
                            F(mean, rows), F(rstd, rows));
    }
  };
  if (!shard_.seq_parallel()) return backward(dw, db);
  // Only this micro-batch's contribution is summed over the group (the gradients accumulate).
  DevPtr t = ln_grads_.ptr();
  const int n = rms ? C : 2 * C;
  be_.Zero(st_, F(t, n));
  backward(t, t + C);
  group_->AllReduceSum(F(t, n), Ready());
  be_.Accumulate(st_, F(dw, C), F(t, C));
  if (!rms) be_.Accumulate(st_, F(db, C), F(t + C, C));
}

}  // namespace anneal
