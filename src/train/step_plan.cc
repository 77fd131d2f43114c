#include "train/step_plan.h"

#include <cmath>

#include "core/trace.h"
#include "tensor/device_trace.h"

namespace anneal {

Result<StepOutcome> StepPlan::Run(int step, const StopSignals& stop) {
  Fetch();                                                   // 1
  p_.model->ZeroGrad();
  ANNEAL_ASSIGN_OR_RETURN(const double sum, ForwardBackward());  // 2-5
  ANNEAL_RETURN_IF_ERROR(p_.model->status());   // an activation that did not fit (named, with what to do)
  if (p_.loader) ANNEAL_RETURN_IF_ERROR(p_.loader->status());  // a remote shard read that failed (fastfile)
  if (p_.tp) ANNEAL_RETURN_IF_ERROR(p_.tp->status());
  StepOutcome o;
  o.loss = p_.scale.Local(sum);                              // 6
  ANNEAL_RETURN_IF_ERROR(Agree(&o, stop));
  ANNEAL_ASSIGN_OR_RETURN(o.stats, Update(step, o.loss));   // 7
  return o;
}

void StepPlan::Fetch() {
  trace::Span span("data", "fetch");
  const int B = p_.scale.B, T = p_.scale.T;
  in_.resize(p_.scale.accum);
  tgt_.resize(p_.scale.accum);
  for (int m = 0; m < p_.scale.accum; ++m) {
    if (!p_.loader) {  // no data: batches of token 0 (the step cost model, whose ops compute nothing)
      in_[m].assign(static_cast<size_t>(B) * T, 0);
      tgt_[m].assign(static_cast<size_t>(B) * T, 0);
      continue;
    }
    p_.loader->Next(&batch_);
    SplitBatch(batch_, B, T, &in_[m], &tgt_[m]);
  }
}

Result<double> StepPlan::ForwardBackward() {
  trace::Span span("schedule", "forward-backward");  // the pipeline engine's step (its idle fraction's whole)
  PipelineEngine& pipe = *p_.pipeline;
  ANNEAL_RETURN_IF_ERROR(pipe.Begin());
  for (const PipeAction& a : pipe.actions()) {
    if (a.forward) {
      ANNEAL_RETURN_IF_ERROR(pipe.Forward(a.micro, in_[a.micro].data(), tgt_[a.micro].data()));
      continue;
    }
    const bool last = a.micro == p_.scale.accum - 1;
    if (p_.par) p_.par->BeginBackward(p_.model->grads_ptr(), last);
    ANNEAL_RETURN_IF_ERROR(pipe.Backward(a.micro));
    if (last && p_.tied) ANNEAL_RETURN_IF_ERROR(SyncTiedEmbedding());
    if (p_.par) ANNEAL_RETURN_IF_ERROR(p_.par->EndBackward());
  }
  return pipe.End();
}

Status StepPlan::SyncTiedEmbedding() {
  if (p_.embedding) {
    Backend& be = p_.model->backend();
    const Stream& st = p_.model->stream();
    const DevPtr g = p_.model->grads_ptr() + p_.tied->offset;
    const int64_t n = static_cast<int64_t>(p_.tied->stored_size);
    const TV gv(g.p, g.t, {n}, be.device());
    if (g.t == DType::kF32) {
      ANNEAL_RETURN_IF_ERROR(p_.embedding->StartAllReduceSum(gv, be.RecordEvent(st))->Wait());
    } else {  // bf16: widened (exactly) into fp32, summed there, rounded back
      if (tied_wide_.size() != static_cast<size_t>(n)) {
        ANNEAL_RETURN_IF_ERROR(tied_wide_.Assign(be, n, "the tied embedding's fp32 gradient (a bf16 pipeline)"));
      }
      be.Copy(st, tied_wide_.View(), gv);
      ANNEAL_RETURN_IF_ERROR(p_.embedding->StartAllReduceSum(tied_wide_.View(), be.RecordEvent(st))->Wait());
      be.Copy(st, gv, tied_wide_.View());
    }
  }
  if (p_.par) p_.par->ReleaseHeld();  // now data parallelism reduces the summed range too
  return Status::Ok();
}

// With several ranks: the global batch's loss (the loss owners' sum over the replicas) and whether
// any rank was asked to stop or ran out of time, in one allreduce.
Status StepPlan::Agree(StepOutcome* o, const StopSignals& stop) {
  if (!p_.world) return Status::Ok();
  double agg[3] = {p_.loss_owner ? o->loss : 0.0, stop.Requested() ? 1.0 : 0.0, stop.OutOfTime() ? 1.0 : 0.0};
  ANNEAL_RETURN_IF_ERROR(p_.world->AllReduceSum(agg, 3));
  o->loss = p_.scale.Global(agg[0]);
  o->stop_requested = agg[1] > 0;
  o->out_of_time = agg[2] > 0;
  return Status::Ok();
}

// The global gradient norm (for clipping) over every parameter once, then this rank's update of
// what it holds (with ZeRO its shard, then every rank gathers all). A non-finite loss skips it.
Result<StepStats> StepPlan::Update(int step, double loss) {
  device_trace::Span span(p_.model->backend().timing_marks(), p_.model->stream(), "optimizer", "optimizer");
  DataParallel* par = p_.par;
  StepStats s;
  if (!std::isfinite(loss)) {
    if (par) par->ResetAccumulator();
    s.skipped = true;
    s.lr = LearningRate(p_.optimizer->options(), step);
    return s;
  }
  DecoderModel& m = *p_.model;
  const size_t b = par ? par->shard_begin() : 0, e = par ? par->shard_end() : m.num_floats();
  const DevPtr g = par ? DevPtr{par->OptimizerGrads(), DType::kF32} : m.grads_ptr();
  double ss = LocalSumSquares(g, b, e);
  if (p_.world) ANNEAL_RETURN_IF_ERROR(p_.world->AllReduceSum(&ss, 1));
  s = p_.optimizer->StepWithNorm(par ? par->OptimizerParams(m.params_ptr()) : m.params_ptr(), g, step, std::sqrt(ss));
  if (par && par->zero() > 0 && !s.skipped) {
    ANNEAL_RETURN_IF_ERROR(par->AllGatherParams(m.params_ptr(), p_.optimizer->master()));
  }
  if (par) par->ResetAccumulator();
  return s;
}

// Over the parameters this rank accounts for: its boxes of sharded tensors, replicated tensors on
// tensor-parallel rank 0, the tied wte on the first stage only (ParamInfo::owner), and with ZeRO only
// its shard (without ZeRO, data-parallel rank 0 alone: replicas hold the same).
double StepPlan::LocalSumSquares(DevPtr g, size_t begin, size_t end) const {
  const DecoderModel& m = *p_.model;
  Backend& be = m.backend();
  double ss = 0;
  if (p_.par && p_.par->zero() == 0 && p_.dp_rank != 0) return ss;
  if (p_.par && p_.par->replica_rank() != 0) return ss;  // shard groups: another group's replica of this shard
  std::vector<TV> parts;
  for (const ParamInfo& p : m.layout().params()) {
    if (!p.owner(m.shard())) continue;
    const size_t lo = std::max(begin, p.offset), hi = std::min(end, p.offset + p.stored_size);
    if (lo < hi) {
      const DevPtr at = g + (lo - begin);
      parts.emplace_back(at.p, at.t, std::initializer_list<int64_t>{static_cast<int64_t>(hi - lo)}, be.device());
    }
  }
  // One read back for every tensor; summed in the tensors' order, as one call per tensor would.
  std::vector<double> each(parts.size());
  be.SumSquaresEach(m.stream(), parts, each.data());
  for (double x : each) ss += x;
  return ss;
}

}  // namespace anneal
