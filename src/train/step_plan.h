// One optimizer step of this rank, as an explicit plan of phases (no callbacks into the trainer):
//
//   1. fetch     train.grad_accum micro-batches from the loader (every stage of a pipeline reads
//                alike, so the loaders of a data-parallel replica move together)
//   2. forward   ┐ each micro-batch through this rank's stage, in the pipeline schedule's order
//   3. backward  ┘ (parallel/pipeline.h); data parallelism's buckets leave as backward produces
//                them (its grad-ready hook or GradSink, parallel/data_parallel.h)
//   4. tied-embedding sync, after the last micro-batch's backward: the first and last stage sum
//                wte's gradient (the lookup's and the LM head's) — before 5, which then includes it
//   5. reduce    data parallelism's last bucket starts, every bucket is waited for
//   6. loss      normalised in one place (LossScale) and agreed over the world together with the
//                ranks' stop flags, so every rank stops at the same step
//   7. update    the global gradient norm over what each rank accounts for, AdamW on this rank's
//                shard (skipped when non-finite), ZeRO's all-gather of the parameters
#pragma once

#include "tensor/device_array.h"

#include <atomic>
#include <vector>

#include "comm/communicator.h"
#include "core/clock.h"
#include "core/status.h"
#include "data/loader.h"
#include "model/decoder.h"
#include "optim/adamw.h"
#include "parallel/data_parallel.h"
#include "parallel/pipeline.h"
#include "parallel/tensor_parallel.h"

namespace anneal {

// Loss normalisation, the one place: every gradient is the average over the global batch's
// B·T·accum·dp positions (the loss kernel scales each position's gradient by Gradient()); the logged
// loss is the mean of the micro-batches' mean losses, averaged over the data-parallel replicas.
struct LossScale {
  int B = 1, T = 1, accum = 1, dp = 1;
  float Gradient() const { return 1.0f / (static_cast<float>(B) * T * accum * dp); }
  double Local(double sum_of_micro_means) const { return sum_of_micro_means / accum; }
  double Global(double sum_over_replicas) const { return sum_over_replicas / dp; }
};

// What a step works on; the plan owns none of it.
struct StepParts {
  DecoderModel* model = nullptr;
  PipelineEngine* pipeline = nullptr;
  DataLoader* loader = nullptr;            // null: batches of token 0 (kernels/cost: nothing is computed)
  AdamW* optimizer = nullptr;
  DataParallel* par = nullptr;             // null: one replica without ZeRO
  Communicator* embedding = nullptr;       // the tied wte's first and last stage (null unless in one)
  Communicator* world = nullptr;           // null with one rank
  CommTensorParallelGroup* tp = nullptr;   // null without tensor parallelism
  const ParamInfo* tied = nullptr;         // wte, when a pipeline's first and last stage both hold it
  int dp_rank = 0;
  bool loss_owner = true;  // the last stage's first tensor-parallel rank: its loss is the one counted
  LossScale scale;
};

// Why a run may stop, read where the ranks agree (phase 6): a signal, and train.max_seconds.
struct StopSignals {
  const std::atomic<bool>* requested = nullptr;
  Clock* clock = &Clock::Real();
  double deadline = 0;  // clock->Monotonic() at which the run is out of time; 0 = none
  bool Requested() const { return requested && requested->load(); }
  bool OutOfTime() const { return deadline > 0 && clock->Monotonic() >= deadline; }
};

struct StepOutcome {
  double loss = 0;  // the global batch's
  StepStats stats;
  bool stop_requested = false, out_of_time = false;  // on any rank
};

class StepPlan {
 public:
  explicit StepPlan(const StepParts& parts) : p_(parts) {}
  // Runs phases 1–7 for optimizer step `step` (0-based); the outcome's stop reasons are the world's.
  Result<StepOutcome> Run(int step, const StopSignals& stop);

 private:
  void Fetch();
  Result<double> ForwardBackward();
  Status SyncTiedEmbedding();
  Status Agree(StepOutcome* o, const StopSignals& stop);
  Result<StepStats> Update(int step, double loss);
  // The squared gradient norm over what this rank accounts for (see step_plan.cc).
  double LocalSumSquares(DevPtr g, size_t begin, size_t end) const;

  StepParts p_;
  std::vector<uint32_t> batch_;
  std::vector<std::vector<int32_t>> in_, tgt_;
  DeviceArray tied_wide_;  // a bf16 pipeline: the tied embedding's gradient summed in fp32
};

}  // namespace anneal
