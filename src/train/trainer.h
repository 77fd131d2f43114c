// The trainer (the built-in entrypoint of `anneal train`) in three parts: setup builds the rank's
// runtime from the config (train/setup.h), the loop runs the step plan (train/step_plan.h) with
// validation, checkpoints (train/checkpoints.h), resume and stopping on request, and the report
// says what happened (train/report.h). One rank of a (dp, tp, pp) world (a single process when the
// world is 1).
//
// Determinism: for a given config, seed and thread count a run is bit-reproducible, and a run
// resumed from a checkpoint continues exactly as the uninterrupted run would (tests/e2e/resume_test.sh
// compares every logged loss as hex floats and a hash of parameters and both Adam moments).
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "core/clock.h"
#include "core/status.h"
#include "train/config.h"

namespace anneal {

struct TrainResult {
  int steps_done = 0;
  double last_loss = 0;
  double last_val_loss = -1;
  std::string last_checkpoint;
  bool stopped = false;  // by request (signal) or max_seconds
  std::string state_hash;  // XXH64 of parameters and both Adam moments at the end
};

// Runs training. `stop` is polled between steps: when set, a checkpoint is saved and the run ends.
// Lines go to `log` (stdout in the CLI).
// `clock` decides train.max_seconds and the checkpoint waits, and times the steps.
Result<TrainResult> RunTraining(const TrainConfig& c, const std::atomic<bool>& stop,
                                const std::function<void(const std::string&)>& log, Clock& clock = Clock::Real());

struct EvalResult {
  double loss = 0;       // mean cross-entropy per token
  int batches = 0;       // validation batches evaluated (each B x T tokens)
  uint64_t tokens = 0;
};
// Evaluates the weights of c.checkpoint.init_from (a checkpoint or a Hugging Face folder) on
// c.train.eval_batches batches of the validation split, exactly as the trainer's validation does
// (the same batches for the same data.seed, batch size and length), at c's layout. Errors when the
// dataset has no validation split (exit 2).
Result<EvalResult> RunEvaluation(const TrainConfig& c, const std::function<void(const std::string&)>& log);

}  // namespace anneal
