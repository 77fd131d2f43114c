// The trainer's third part: what a run says (rank 0's voice; every figure that needs other ranks is
// gathered here): the configuration lines at the start, a line per step (loss also as a hex float,
// lr, grad norm, ms, tokens/s, MFU), every rank's memory after the first step, validation lines beside
// the corpus's unigram entropy, and at the end the pipeline's measured idle time, peak RSS, tensor
// and ZeRO-2 traffic and buffers, and the state hash. The same figures go to the agent, over steps, through
// TrainerMetricsFile.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "optim/adamw.h"
#include "parallel/memory_plan.h"
#include "train/checkpoint_tensors.h"
#include "train/config.h"
#include "train/setup.h"

namespace anneal {

std::string Fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));

// $ANNEAL_PROGRESS_DIR/metrics-<RANK> (docs/formats/job-store.md): one line per record,
// "<step> <name>=<value> ...\n", appended with one write each (%.17g: the doubles exactly; NaN and
// infinities as printf spells them); the agent reads the complete lines and ships each value as a
// metric point of that step (agent/node_metrics.h). Nothing when dir is empty (no agent).
class TrainerMetricsFile {
 public:
  TrainerMetricsFile(const std::string& dir, int rank);
  ~TrainerMetricsFile();
  TrainerMetricsFile(const TrainerMetricsFile&) = delete;
  TrainerMetricsFile& operator=(const TrainerMetricsFile&) = delete;
  void Record(int64_t step, const std::vector<std::pair<std::string, double>>& values) const;

 private:
  int fd_ = -1;
};

class TrainReport {
 public:
  TrainReport(const TrainConfig& c, const Runtime& rt, LogFn log);
  void Line(const std::string& s) const { log_(s); }
  // The configuration lines; measures the backend's peak GEMM rate unless train.peak_gflops is set.
  void Start();
  // After each step: the step line every train.log_every steps (and at the last), and at those steps
  // the metrics record (rank 0: train_loss, lr, grad_norm, tokens_per_s, mfu as the line prints them;
  // every rank: peak_rss_mb); after the first step, every rank's memory (all ranks call it: it gathers).
  Status Step(int step, double loss, const StepStats& s, double seconds);
  // The validation line, and rank 0's val_loss record.
  void Validation(int step, double val_loss) const;
  // The end: pipeline idle (all ranks call it: it gathers), peak RSS (also each rank's last peak_rss_mb
  // record, at steps_done), traffic, the state hash.
  Status Finish(int steps_done, const std::string& state_hash, double checkpoint_blocked_s, bool checkpoints);

 private:
  Status Memory();
  // The memory formula of this layout's rank (pp_rank, tp_rank) (parallel/memory_plan.h).
  MemoryTerms Formula(int pp_rank, int tp_rank) const;
  Status PipelineIdle(int steps_done);

  const TrainConfig& c_;
  const Runtime& rt_;
  LogFn log_;
  TrainerMetricsFile metrics_;
  double flops_per_token_ = 0, peak_ = 0;
  double unigram_ = -1;  // the training split's unigram entropy (-1: not computed)
  double idle_sum_ = 0, busy_sum_ = 0;  // pipeline: blocked time and step time, from step 2 on
  size_t comm_after_1_ = 0, comm_after_last_ = 0;  // DataParallel::comm_bytes() after step 1 and the last step
  int comm_steps_ = 0;                              // steps between them
};

// XXH64 of the whole fp32 parameter vector and this rank's Adam moments (all of them unless ZeRO
// shards them) — the same value whatever the layout of the same training. With data parallelism a
// collective (every data-parallel rank calls it): sharded masters are gathered, and at ZeRO 3 the
// vector is streamed a bucket at a time.
Result<std::string> StateHash(const DecoderModel& m, AdamW& opt, DataParallel* par);

// Unigram entropy (nats/token) of a dataset split: the loss of the best model that ignores context.
Result<double> UnigramEntropy(const std::string& dataset_dir, const std::string& split);

}  // namespace anneal
