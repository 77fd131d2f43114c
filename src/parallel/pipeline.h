// Pipeline parallelism: the schedules (which micro-batch each stage runs forward or backward, in what
// order) and the engine that runs one training step's micro-batches through this rank's stage.
//
// Schedules for stage s of p over m micro-batches:
//   gpipe  F0 F1 ... F(m-1) B0 B1 ... B(m-1): all m micro-batches' activations held at once.
//   1f1b   warm-up min(p-s-1, m) forwards, then alternate one forward and one backward, then the
//          remaining backwards: at most min(p-s, m) micro-batches held (PipeDream-Flush / Megatron).
// Both give the same gradients (the same micro-batches, summed); the bubble, the idle fraction of a
// stage, is (p-1)/(m+p-1) for both when stage times are equal — 1F1B saves memory, not time.
//
// Communication: activations go to stage s+1 and gradients to stage s-1 point to point, through two
// communicators of the pipeline group (one per direction, each with its own thread, so a send waiting
// for its receiver in one direction never blocks the other). Sends are asynchronous (the next
// micro-batch's compute overlaps them); each receive is posted as soon as its buffer is free, so it
// overlaps the compute before it is needed. The engine measures the time it spends blocked on them:
// the stage's idle time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "comm/communicator.h"
#include "model/decoder.h"

namespace anneal {

struct PipeAction {
  bool forward = true;
  int micro = 0;
  bool operator==(const PipeAction& o) const { return forward == o.forward && micro == o.micro; }
};

// The actions of stage `stage` of `stages`, in order; schedule is "1f1b" or "gpipe".
std::vector<PipeAction> PipelineSchedule(const std::string& schedule, int stage, int stages, int micro_batches);
// The activation slots the schedule needs on that stage (micro-batches in flight at once).
int PipelineSlots(const std::string& schedule, int stage, int stages, int micro_batches);
// "F0 F1 B0 F2 B1 B2"
std::string ScheduleString(const std::vector<PipeAction>& actions);

class PipelineEngine {
 public:
  struct Options {
    std::string schedule = "1f1b";
    int stage = 0, stages = 1;
    int micro_batches = 1;
    int B = 1, T = 1;
    float grad_scale = 1.0f;
  };
  // fwd and bwd: the pipeline group (group rank = stage) twice, for the two directions; null when
  // stages == 1. Sets the model's slots.
  PipelineEngine(DecoderModel* model, Communicator* fwd, Communicator* bwd, const Options& o);
  ~PipelineEngine();

  // One step, driven by its caller in actions() order (train/step_plan.h): Begin, then Forward or
  // Backward for each action, then End. Forward takes micro-batch `micro`'s tokens and targets (B*T
  // each); Backward returns once the input gradient is on its way to the previous stage. End waits
  // for the sends and returns the sum of the micro-batches' mean losses on the last stage, 0 elsewhere.
  Status Begin();
  Status Forward(int micro, const int32_t* in, const int32_t* tgt);
  Status Backward(int micro);
  Result<double> End();
  // A forward pass with no gradient through every stage (validation): the mean loss on the last
  // stage, 0 elsewhere. Nothing may be in flight.
  Result<double> Evaluate(const int32_t* in, const int32_t* tgt);

  // The last Step's wall time and the part of it spent blocked on receives and sends.
  double last_step_seconds() const { return step_s_; }
  double last_idle_seconds() const { return idle_s_; }
  const std::vector<PipeAction>& actions() const { return actions_; }

 private:
  Status WaitTimed(std::unique_ptr<Work>& w);
  void PostReceives();
  // A view of `n` elements of a stage buffer on the model's device; the compute stream's latest event.
  TensorView StageView(DevPtr p, size_t n) const {
    return TensorView(p.p, p.t, {static_cast<int64_t>(n)}, model_->backend().device());
  }
  Event Ready() const { return model_->backend().RecordEvent(model_->stream()); }
  DecoderModel* model_;
  Communicator *fwd_, *bwd_;
  Options o_;
  int slots_ = 1;
  std::vector<PipeAction> actions_;
  std::vector<std::unique_ptr<Work>> send_out_;  // per slot: the send of its output
  // The stage's gradient buffers, in the model's backend memory.
  DeviceArray grad_send_[2], grad_recv_[2];
  Status status_;  // an allocation of those that failed
  std::unique_ptr<Work> grad_send_work_[2];
  double step_s_ = 0, idle_s_ = 0;
  // The step in progress: the micro-batch whose activations each slot holds, the receives posted,
  // the actions done and the receives posted so far in each direction, the last stage's loss sum.
  double t0_ = 0;
  std::vector<int> owner_;
  std::vector<std::unique_ptr<Work>> recv_in_;
  std::unique_ptr<Work> recv_grad_;
  int fdone_ = 0, bdone_ = 0, next_in_ = 0, next_grad_ = 0;
  double loss_ = 0;
};

}  // namespace anneal
