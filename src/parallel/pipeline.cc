#include "parallel/pipeline.h"

#include <algorithm>
#include <cstring>

#include "core/progress.h"

namespace anneal {

std::vector<PipeAction> PipelineSchedule(const std::string& schedule, int stage, int stages, int m) {
  std::vector<PipeAction> out;
  if (schedule == "gpipe") {
    for (int i = 0; i < m; ++i) out.push_back({true, i});
    for (int i = 0; i < m; ++i) out.push_back({false, i});
    return out;
  }
  const int warmup = std::min(stages - stage - 1, m);
  for (int i = 0; i < warmup; ++i) out.push_back({true, i});
  for (int j = 0; j < m - warmup; ++j) {
    out.push_back({true, warmup + j});
    out.push_back({false, j});
  }
  for (int j = m - warmup; j < m; ++j) out.push_back({false, j});
  return out;
}

int PipelineSlots(const std::string& schedule, int stage, int stages, int m) {
  return schedule == "gpipe" ? m : std::min(stages - stage, m);
}

std::string ScheduleString(const std::vector<PipeAction>& actions) {
  std::string out;
  for (const PipeAction& a : actions) {
    if (!out.empty()) out += ' ';
    out += a.forward ? 'F' : 'B';
    out += std::to_string(a.micro);
  }
  return out;
}

PipelineEngine::PipelineEngine(DecoderModel* model, Communicator* fwd, Communicator* bwd, const Options& o)
    : model_(model), fwd_(fwd), bwd_(bwd), o_(o) {
  actions_ = PipelineSchedule(o.schedule, o.stage, o.stages, o.micro_batches);
  slots_ = PipelineSlots(o.schedule, o.stage, o.stages, o.micro_batches);
  model_->set_slots(slots_);
  send_out_.resize(slots_);
  const size_t NC = model->StageFloats(o.B, o.T);
  Backend& be = model->backend();
  if (o.stage > 0) {
    for (auto& b : grad_send_) {
      if (status_.ok()) status_ = b.Assign(be, NC, "the pipeline's input-gradient send buffers", model->compute_dtype());
    }
  }
  if (o.stage < o.stages - 1 && status_.ok()) {
    status_ = grad_recv_[0].Assign(be, NC, "the pipeline's output-gradient receive buffer", model->compute_dtype());
  }
}

PipelineEngine::~PipelineEngine() = default;

Status PipelineEngine::WaitTimed(std::unique_ptr<Work>& w) {
  if (!w) return Status::Ok();
  const double t0 = MonotonicSeconds();
  Status s = w->Wait();
  idle_s_ += MonotonicSeconds() - t0;
  w.reset();
  return s;
}

Status PipelineEngine::Begin() {
  ANNEAL_RETURN_IF_ERROR(status_);
  t0_ = MonotonicSeconds();
  idle_s_ = 0;
  owner_.assign(slots_, -1);
  recv_in_.clear();
  recv_in_.resize(slots_);
  recv_grad_.reset();
  fdone_ = bdone_ = next_in_ = next_grad_ = 0;
  loss_ = 0;
  return Status::Ok();
}

// Receives are posted in each direction's natural order (after the send before them), as soon as
// their buffer is free: a forward input once its slot's previous micro-batch went backward, the next
// output gradient once the previous backward consumed its buffer.
void PipelineEngine::PostReceives() {
  const int m = o_.micro_batches, s = o_.stage;
  const size_t nf = model_->StageFloats(o_.B, o_.T);
  while (s > 0 && next_in_ < m && next_in_ <= fdone_ && owner_[next_in_ % slots_] < 0 && !recv_in_[next_in_ % slots_]) {
    const int slot = next_in_ % slots_;
    recv_in_[slot] = fwd_->StartRecv(StageView(model_->StageInput(slot, o_.B, o_.T), nf), s - 1, Ready());
    ++next_in_;
  }
  if (s < o_.stages - 1 && next_grad_ < m && next_grad_ <= bdone_ && !recv_grad_) {
    recv_grad_ = bwd_->StartRecv(grad_recv_[0].View(), s + 1, Ready());
    ++next_grad_;
  }
}

Status PipelineEngine::Forward(int micro, const int32_t* in, const int32_t* tgt) {
  PostReceives();
  const int s = o_.stage, slot = micro % slots_;
  ANNEAL_RETURN_IF_ERROR(WaitTimed(send_out_[slot]));  // the slot's previous output has left
  if (s > 0) ANNEAL_RETURN_IF_ERROR(WaitTimed(recv_in_[slot]));
  owner_[slot] = micro;
  const double l = model_->ForwardStage(slot, in, tgt, o_.B, o_.T, o_.grad_scale);
  if (s == o_.stages - 1) {
    loss_ += l;
  } else {
    send_out_[slot] = fwd_->StartSend(StageView(model_->StageOutput(slot), model_->StageFloats(o_.B, o_.T)), s + 1, Ready());
  }
  ++fdone_;
  return Status::Ok();
}

Status PipelineEngine::Backward(int micro) {
  PostReceives();
  const int s = o_.stage, slot = micro % slots_;
  const bool last = s == o_.stages - 1;
  if (!last) ANNEAL_RETURN_IF_ERROR(WaitTimed(recv_grad_));
  model_->BackwardStage(slot, last ? DevPtr{} : grad_recv_[0].ptr());
  if (s > 0) {  // the input gradient leaves for the previous stage (double-buffered)
    const int b = micro % 2;
    ANNEAL_RETURN_IF_ERROR(WaitTimed(grad_send_work_[b]));
    model_->backend().Copy(model_->stream(), grad_send_[b].View(),
                           StageView(model_->InputGrad(), model_->StageFloats(o_.B, o_.T)));
    grad_send_work_[b] = bwd_->StartSend(grad_send_[b].View(), s - 1, Ready());
  }
  owner_[slot] = -1;
  ++bdone_;
  return Status::Ok();
}

Result<double> PipelineEngine::End() {
  for (auto& w : send_out_) ANNEAL_RETURN_IF_ERROR(WaitTimed(w));
  for (auto& w : grad_send_work_) ANNEAL_RETURN_IF_ERROR(WaitTimed(w));
  step_s_ = MonotonicSeconds() - t0_;
  return loss_;
}

Result<double> PipelineEngine::Evaluate(const int32_t* in, const int32_t* tgt) {
  const int s = o_.stage, B = o_.B, T = o_.T;
  const size_t nf = model_->StageFloats(B, T);
  if (s > 0) ANNEAL_RETURN_IF_ERROR(fwd_->StartRecv(StageView(model_->StageInput(0, B, T), nf), s - 1, Ready())->Wait());
  const double loss = model_->ForwardStage(0, in, tgt, B, T, 0.0f);
  if (s < o_.stages - 1) {
    ANNEAL_RETURN_IF_ERROR(fwd_->StartSend(StageView(model_->StageOutput(0), nf), s + 1, Ready())->Wait());
  }
  return s == o_.stages - 1 ? loss : 0.0;
}

}  // namespace anneal
