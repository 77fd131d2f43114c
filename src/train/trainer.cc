#include "train/trainer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/progress.h"
#include "core/trace.h"
#include "train/checkpoint_tensors.h"
#include "train/checkpoints.h"
#include "train/profiler.h"
#include "train/report.h"
#include "train/setup.h"

namespace anneal {

namespace {

// <ANNEAL_PROGRESS_DIR>/rank-<RANK> (RankContract::progress_dir), rewritten in place after every step with "<step> <seconds> <sum of
// all step seconds>": how
// the agent sees each rank's step time (agent/node_metrics.h). Nothing when the variable is unset.
class RankProgressFile {
 public:
  RankProgressFile(const std::string& dir, int rank) {
    if (!dir.empty()) fd_ = ::open((dir + "/rank-" + std::to_string(rank)).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  }
  ~RankProgressFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  void Record(int64_t step, double seconds) {
    if (fd_ < 0) return;
    char buf[96];
    total_ += seconds;
    const int n = std::snprintf(buf, sizeof(buf), "%lld %.6f %.6f\n", static_cast<long long>(step), seconds, total_);
    // Padded to a fixed width so a shorter record never leaves the tail of a longer one behind.
    std::string rec(buf, static_cast<size_t>(n));
    rec.resize(64, ' ');
    rec.back() = '\n';
    (void)!::pwrite(fd_, rec.data(), rec.size(), 0);
  }

 private:
  int fd_ = -1;
  double total_ = 0;
};

// The mean validation loss over train.eval_batches batches (the same on every rank: batch i is
// evaluated by data-parallel rank i mod dp, the losses summed over the world); NaN when a rank
// failed (the next step reports it); -1 without validation data.
double Evaluate(const TrainConfig& c, Runtime& rt) {
  DataLoader* val = rt.data.val.get();
  if (!val) return -1;
  const int B = c.data.batch_size, T = c.data.seq_len;
  (void)val->Seek(LoaderPosition{c.data.seed, 0});
  std::vector<uint32_t> batch;
  std::vector<int32_t> in, tgt;
  double sum = 0;
  const int n = std::min<uint64_t>(c.train.eval_batches, std::max<uint64_t>(1, val->num_samples() / B));
  // ZeRO-3 gathers parameters in every forward, a collective: every rank runs as many forwards (a rank
  // out of batches repeats one uncounted, as FSDP's uneven inputs must).
  const bool together = rt.par && rt.par->zero() == 3 && rt.dp > 1;
  const int rounds = together ? (n + rt.dp - 1) / rt.dp * rt.dp : n;
  for (int i = 0; i < rounds; ++i) {
    if (i < n) val->Next(&batch);
    if (i % rt.dp != rt.pg->dp_rank()) continue;
    if (i < n || in.empty()) SplitBatch(batch, B, T, &in, &tgt);
    auto l = rt.engine->Evaluate(in.data(), tgt.data());
    if (!rt.model->status().ok() || !l.ok()) return std::nan("");
    if (rt.par && !rt.par->TakeError().ok()) return std::nan("");
    if (rt.loss_owner() && i < n) sum += *l;
  }
  if (rt.world() && !rt.world()->AllReduceSum(&sum, 1).ok()) return std::nan("");
  return sum / n;
}

// Counts a skipped update; a run of train.max_bad_steps of them in a row ends the run.
Status CountSkip(const TrainConfig& c, const StepOutcome& o, TrainerState* st, const TrainReport& report) {
  if (!o.stats.skipped) {
    st->bad_steps = 0;
    return Status::Ok();
  }
  ++st->bad_steps;
  ++st->skipped_total;
  report.Line(Fmt("step %d: non-finite %s, update skipped (%d in a row, %llu in all)", st->step + 1,
                  std::isfinite(o.loss) ? "gradients" : "loss", st->bad_steps,
                  static_cast<unsigned long long>(st->skipped_total)));
  if (st->bad_steps < c.train.max_bad_steps) return Status::Ok();
  return Internal(Fmt("training diverged: %d steps in a row with non-finite loss or gradients (train.max_bad_steps); "
                      "lower optim.lr or raise optim.warmup_steps, and resume from the last checkpoint",
                      st->bad_steps));
}

// The loop: a step (train/step_plan.h), its report, validation and checkpoints at their intervals,
// until train.steps, or a stop the ranks agreed on (a signal, train.max_seconds): then a checkpoint.
Status Loop(const TrainConfig& c, Runtime& rt, const std::atomic<bool>& stop, Clock& clock, TrainCheckpoints& ckpt,
            TrainReport& report, TrainerState* st, TrainResult* res, StepProfiler& profiler) {
  RankProgressFile progress(rt.re.progress_dir, rt.re.rank);
  StopSignals signals;
  signals.requested = &stop;
  signals.clock = &clock;
  if (c.train.max_seconds > 0) signals.deadline = clock.Monotonic() + c.train.max_seconds;
  // With several ranks they stop together: both reasons are agreed on in each step.
  bool signal_agreed = false, timeout_agreed = false;
  while (st->step < c.train.steps) {
    const bool by_signal = rt.re.world > 1 ? signal_agreed : signals.Requested();
    if (by_signal || (rt.re.world > 1 ? timeout_agreed : signals.OutOfTime())) {
      res->stopped = true;
      report.Line(by_signal ? "stop requested: saving a checkpoint" : "max_seconds reached: saving a checkpoint");
      break;
    }
    profiler.BeforeStep(st->step + 1);
    {
      trace::Span span("step", "step ", st->step + 1);  // the profiled step's root: everything below
      profiler.BeginDeviceStep();
      const double t0 = clock.Monotonic();
      ANNEAL_ASSIGN_OR_RETURN(StepOutcome o, rt.step->Run(st->step, signals));
      signal_agreed = o.stop_requested;
      timeout_agreed = o.out_of_time;
      ANNEAL_RETURN_IF_ERROR(CountSkip(c, o, st, report));
      ++st->step;
      res->last_loss = o.loss;
      const double dt = clock.Monotonic() - t0;
      progress.Record(st->step, dt);
      ANNEAL_RETURN_IF_ERROR(report.Step(st->step, o.loss, o.stats, dt));
      if (c.train.eval_every > 0 && st->step % c.train.eval_every == 0 && rt.data.val) {
        trace::Span eval("eval", "validation");
        res->last_val_loss = Evaluate(c, rt);
        report.Validation(st->step, res->last_val_loss);
      }
      if (c.checkpoint.every > 0 && st->step % c.checkpoint.every == 0) ANNEAL_RETURN_IF_ERROR(ckpt.Save(rt, st, false));
    }
    ANNEAL_RETURN_IF_ERROR(profiler.AfterStep(st->step));
  }
  return profiler.Finish();
}

CheckpointLineage LineageOf(const TrainConfig& c, const Runtime& rt) {
  CheckpointLineage lineage;
  nlohmann::json cj = nlohmann::json::object();
  for (const auto& [key, value] : c.values) cj[key] = value;
  lineage.config_json = cj.dump();
  lineage.dataset_dir = c.data.dir;
  lineage.dataset_hash = rt.data.train->info().inputs_hash;
  lineage.dataset_tokenizer = rt.data.train->info().tokenizer;
  return lineage;
}

}  // namespace

Result<EvalResult> RunEvaluation(const TrainConfig& c, const LogFn& log_all) {
  if (c.checkpoint.init_from.empty()) return InvalidInput("nothing to evaluate: give a checkpoint or a Hugging Face folder");
  ANNEAL_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, SetUpRuntime(c));
  const LogFn log = [&](const std::string& line) {
    if (rt->re.rank == 0) log_all(line);
  };
  if (!rt->data.val) {
    return InvalidInput("dataset " + c.data.dir + " has no " + c.data.eval_split + " split" +
                        (c.data.eval_split == "val" ? ": prepare it with anneal prep --val-fraction, or evaluate another split"
                                                    : " long enough for one row"));
  }
  ANNEAL_ASSIGN_OR_RETURN(auto ckpt, TrainCheckpoints::Open(c.checkpoint, c.dist.timeout_s, *rt, LineageOf(c, *rt), log));
  ANNEAL_ASSIGN_OR_RETURN(std::string from, ckpt->InitFrom(*rt));
  log("evaluating " + from);
  EvalResult r;
  r.loss = Evaluate(c, *rt);
  if (std::isnan(r.loss)) return rt->model->status().ok() ? Internal("evaluation failed on a rank") : rt->model->status();
  const uint64_t B = c.data.batch_size;
  r.batches = static_cast<int>(std::min<uint64_t>(c.train.eval_batches, std::max<uint64_t>(1, rt->data.val->num_samples() / B)));
  r.tokens = static_cast<uint64_t>(r.batches) * B * c.data.seq_len;
  return r;
}

// Setup, resume, the loop, the last validation and checkpoint, the report.
Result<TrainResult> RunTraining(const TrainConfig& c, const std::atomic<bool>& stop, const LogFn& log_all, Clock& clock) {
  ANNEAL_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, SetUpRuntime(c));
  const LogFn log = [&](const std::string& line) {  // rank 0 speaks for the job; the others report only errors
    if (rt->re.rank == 0) log_all(line);
  };
  ANNEAL_ASSIGN_OR_RETURN(auto ckpt, TrainCheckpoints::Open(c.checkpoint, c.dist.timeout_s, *rt, LineageOf(c, *rt), log, clock));
  TrainerState st;
  st.loader = rt->data.train->position();
  TrainResult res;
  ANNEAL_ASSIGN_OR_RETURN(res.last_checkpoint, ckpt->Resume(*rt, &st));
  if (!res.last_checkpoint.empty()) log("resumed from " + res.last_checkpoint + " at step " + std::to_string(st.step));
  if (res.last_checkpoint.empty()) {  // a fresh run: its weights from train.init_from, when given
    ANNEAL_ASSIGN_OR_RETURN(std::string from, ckpt->InitFrom(*rt));
    if (!from.empty()) log("initialized the weights from " + from + " (fresh optimizer)");
  }
  // Resumed (so the checkpoint matched this run's model and lineage) with no step left to train.
  const bool nothing_to_do = !res.last_checkpoint.empty() && st.step >= c.train.steps;
  if (nothing_to_do) {
    log(Fmt("nothing to do: the newest checkpoint, %s, is at step %d and train.steps is %d, so this run would "
            "train no step. To train further, raise train.steps (e.g. --set train.steps=%d): it resumes from that "
            "checkpoint; to start afresh, --set train.resume=none or another train.checkpoint_dir.",
            res.last_checkpoint.c_str(), st.step, c.train.steps, 2 * st.step));
  }
  TrainReport report(c, *rt, log);
  if (!nothing_to_do) {
    report.Start();
    ckpt->Reserve(*rt);
    rt->be->allocator().ResetPeak();  // the training's peak from here (set-up, a checkpoint's load apart)
    StepProfiler profiler(c, *rt, log);
    ANNEAL_RETURN_IF_ERROR(Loop(c, *rt, stop, clock, *ckpt, report, &st, &res, profiler));
    if (rt->data.val && (c.train.eval_every == 0 || st.step % c.train.eval_every != 0)) {
      res.last_val_loss = Evaluate(c, *rt);
      report.Validation(st.step, res.last_val_loss);
    }
    ANNEAL_RETURN_IF_ERROR(ckpt->Save(*rt, &st, true));
    if (ckpt->enabled()) res.last_checkpoint = ckpt->last_path();
  }
  res.steps_done = st.step;
  ANNEAL_ASSIGN_OR_RETURN(res.state_hash, StateHash(*rt->model, *rt->opt, rt->par.get()));
  ANNEAL_RETURN_IF_ERROR(report.Finish(st.step, res.state_hash, ckpt->blocked_seconds(), ckpt->enabled()));
  return res;
}

}  // namespace anneal
