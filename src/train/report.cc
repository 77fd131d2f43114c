#include "train/report.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstdarg>
#include <cstdio>

#include "core/checksum.h"
#include "data/dataset.h"
#include "data/shard.h"
#include "tensor/host_copy.h"

namespace anneal {

std::string Fmt(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof(buf), f, ap);
  va_end(ap);
  return buf;
}

namespace {

std::string HexFloat(double x) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%a", x);
  return buf;
}

// This process's peak resident set so far, MB.
double PeakRssMb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

}  // namespace

TrainerMetricsFile::TrainerMetricsFile(const std::string& dir, int rank) {
  if (!dir.empty()) {
    fd_ = ::open((dir + "/metrics-" + std::to_string(rank)).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }
}

TrainerMetricsFile::~TrainerMetricsFile() {
  if (fd_ >= 0) ::close(fd_);
}

void TrainerMetricsFile::Record(int64_t step, const std::vector<std::pair<std::string, double>>& values) const {
  if (fd_ < 0 || values.empty()) return;
  std::string line = std::to_string(step);
  char buf[64];
  for (const auto& [name, v] : values) {
    std::snprintf(buf, sizeof(buf), "%.17g", v);
    line += " " + name + "=" + buf;
  }
  line += "\n";
  // One write: O_APPEND places it whole at the end, and the agent reads complete lines only.
  (void)!::write(fd_, line.data(), line.size());
}

TrainReport::TrainReport(const TrainConfig& c, const Runtime& rt, LogFn log)
    : c_(c), rt_(rt), log_(std::move(log)), metrics_(rt.re.progress_dir, rt.re.rank) {
  flops_per_token_ = c.model.FlopsPerToken(c.data.seq_len);
}

void TrainReport::Start() {
  const TrainConfig& c = c_;
  const DecoderModel& model = *rt_.model;
  const int B = c.data.batch_size, T = c.data.seq_len;
  // The ceiling in the run's own dtype (the host: sgemm; a GPU: its bf16 or f32 GEMM).
  peak_ = (c.train.peak_gflops > 0 ? c.train.peak_gflops : rt_.be->MeasurePeakGflops(c.train.dtype)) * 1e9;
  if (c.train.dtype != DType::kF32) {
    log_(std::string("precision: parameters, gradients and activations in ") + DTypeName(c.train.dtype) +
         ", fp32 master weights and Adam moments in the optimizer, checkpoints in fp32");
  }
  log_(Fmt("model %s; data %s: %llu train windows of %d tokens; B=%d T=%d accum=%d, %d threads, kernels %s",
           c.model.ToString().c_str(), c.data.dir.c_str(), static_cast<unsigned long long>(rt_.data.train->num_samples()),
           T + 1, B, T, c.train.grad_accum, rt_.be->Threads(), rt_.be->name().c_str()));
  const double n = static_cast<double>(model.num_floats());
  const DistSection& d = c.dist;
  const std::string groups =
      rt_.pg->shard() < rt_.dp
          ? Fmt(" within shard groups of %d data-parallel ranks (%d groups holding replicas; rank 0 is in group %d/%d, %d/%d in it)",
                rt_.pg->shard(), rt_.dp / rt_.pg->shard(), rt_.pg->replica_rank(), rt_.dp / rt_.pg->shard(),
                rt_.pg->shard_rank(), rt_.pg->shard())
          : std::string();
  log_(Fmt("parallel: %d ranks (%s), dp %d x tp %d%s x pp %d, ZeRO %d%s, buckets of %.1f MB, collective timeout %.0f s; "
           "rank 0 holds %.0f of the model's %zu parameters",
           rt_.re.world, rt_.re.launcher.c_str(), rt_.dp, d.tp, rt_.shard.seq_parallel() ? " (sequence parallel)" : "", d.pp,
           d.zero, groups.c_str(), d.bucket_mb, d.timeout_s, n, c.model.NumParams()));
  log_("memory formula of rank 0: " + Formula(0, 0).Describe() + " (parallel/memory_plan.h)");
  if (d.pp > 1) {
    log_("pipeline: " + std::to_string(d.pp) + " stages, schedule " + d.schedule + ", " +
         std::to_string(c.train.grad_accum) + " micro-batches; " + rt_.plan->DescribeStages() +
         " (balanced by estimated forward FLOPs/token: 24C^2+4TC per layer, 2CV for the LM head)");
    if (c.train.grad_accum < d.pp) {
      log_(Fmt("pipeline: %d micro-batches for %d stages leaves each stage idle %.0f%% of the time; raise "
               "train.grad_accum",
               c.train.grad_accum, d.pp, 100.0 * (d.pp - 1) / (c.train.grad_accum + d.pp - 1)));
    }
  }
  log_(Fmt("MFU = tokens/s x FLOPs/token / (ranks x peak); FLOPs/token = 6N + 6*L*C*T = %.3g; peak %.0f GFLOP/s per rank "
           "(%s)%s",
           flops_per_token_, peak_ / 1e9, c.train.peak_gflops > 0 ? "train.peak_gflops" : "the GEMM measured at start",
           c.train.on_gpu() ? "; on a GPU also against 989 TFLOP/s (H100/H200 dense bf16)" : ""));
  // The unigram entropy of the training split (over at most its first 100M tokens): the loss of the
  // best model that ignores context, printed beside every validation loss (fastfile: not computed,
  // it would read the whole corpus).
  if (rt_.data.val && !rt_.data.remote) {
    auto h = UnigramEntropy(rt_.data.dir, "train");
    if (h.ok()) unigram_ = *h;
  }
}

Status TrainReport::Step(int step, double loss, const StepStats& s, double seconds) {
  if (step > 1) {
    idle_sum_ += rt_.engine->last_idle_seconds();
    busy_sum_ += rt_.engine->last_step_seconds();
  }
  const double tps = static_cast<double>(c_.data.batch_size) * c_.data.seq_len * c_.train.grad_accum * rt_.dp / seconds;
  if (step == 1) ANNEAL_RETURN_IF_ERROR(Memory());  // the activations are allocated now
  if (rt_.par && step == 1) comm_after_1_ = rt_.par->comm_bytes();
  if (rt_.par && step > 1) {
    comm_after_last_ = rt_.par->comm_bytes();
    ++comm_steps_;
  }
  if (step % c_.train.log_every == 0 || step == c_.train.steps) {
    const double mfu = 100.0 * tps / rt_.re.world * flops_per_token_ / peak_;
    const std::string of989 = c_.train.on_gpu()
                                  ? Fmt(" (of 989 TFLOP/s: %.1f%%)", 100.0 * tps / rt_.re.world * flops_per_token_ / 989e12)
                                  : std::string();
    log_(Fmt("step %5d/%d | loss %.6f (%s) | lr %.3e | grad norm %.4f | %.0f ms | %.0f tok/s | MFU %.1f%%%s", step,
             c_.train.steps, loss, HexFloat(loss).c_str(), s.lr, s.grad_norm, seconds * 1e3, tps, mfu, of989.c_str()));
    // The line's figures (rank 0's, the ones it prints), and every rank's own memory.
    std::vector<std::pair<std::string, double>> v;
    if (rt_.re.rank == 0) {
      v = {{"train_loss", loss}, {"lr", s.lr}, {"grad_norm", s.grad_norm}, {"tokens_per_s", tps}, {"mfu", mfu}};
    }
    v.push_back({"peak_rss_mb", PeakRssMb()});
    metrics_.Record(step, v);
  }
  return Status::Ok();
}

void TrainReport::Validation(int step, double v) const {
  if (rt_.re.rank == 0) metrics_.Record(step, {{"val_loss", v}});
  if (unigram_ < 0) return log_(Fmt("step %5d | val loss %.6f", step, v));
  log_(Fmt("step %5d | val loss %.6f | unigram entropy of the corpus %.4f nats/token%s", step, v, unigram_,
           unigram_ > 0 && v < unigram_ ? " (below it: the model uses context)" : ""));
}

// Every rank's parameters and activations, allocated and by formula.
MemoryTerms TrainReport::Formula(int pp_rank, int tp_rank) const {
  return RankMemory(*rt_.plan, MemoryInputsOf(c_), pp_rank, tp_rank);
}

Status TrainReport::Memory() {
  const TrainConfig& c = c_;
  const DecoderModel& model = *rt_.model;
  const int B = c.data.batch_size, T = c.data.seq_len, world = rt_.re.world;
  const Recompute rc = *ParseRecompute(c.train.recompute);
  const int local_layers = rt_.shard.end(rt_.plan->model()) - rt_.shard.layer_begin;
  constexpr int kFields = 7;
  double mine[kFields] = {static_cast<double>(model.num_floats()), static_cast<double>(model.ActivationFloatsAllocated()),
                          static_cast<double>(rt_.plan->model().ActivationFloats(B, T, rc, rt_.shard, model.slots(),
                                                                                 model.offload())),
                          ParallelPlan::KorthikantiBytes(c.model, B, T, c.dist.tp, local_layers, model.slots(), rc,
                                                         rt_.shard.seq_parallel()),
                          static_cast<double>(model.slots()), static_cast<double>(rt_.be->allocator().peak_bytes()),
                          Formula(rt_.pg->pp_rank(), rt_.pg->tp_rank()).Training()};
  std::vector<double> all(kFields * world);
  if (world > 1) {
    ANNEAL_RETURN_IF_ERROR(rt_.world()->AllGatherBytes(mine, sizeof(mine), all.data()));
  } else {
    std::copy(mine, mine + kFields, all.begin());
  }
  log_(Fmt("activation memory of rank 0: %.1f MB allocated, formula %.1f MB (ModelConfig::ActivationFloats, "
           "recompute %s, %d micro-batch slot%s)",
           all[1] * 4 / 1e6, all[2] * 4 / 1e6, c.train.recompute.c_str(), model.slots(), model.slots() == 1 ? "" : "s"));
  const int tp = c.dist.tp, pp = c.dist.pp;
  for (int r = 0; r < world; ++r) {
    const double* m = all.data() + kFields * r;
    log_(Fmt("memory of rank %d (dp %d, pp %d, tp %d): peak %.2f MB allocated in step 1 (the allocator's high-water "
             "mark), formula %.2f MB (%+.1f%%); its part of the model %.2f MB (%.0f parameters%s); activations %.2f MB allocated, "
             "formula %.2f MB (in floats, %d slot%s); Korthikanti et al. for its layers %.2f MB (fp16)",
             r, r / (tp * pp), (r / tp) % pp, r % tp, m[5] / 1e6, m[6] / 1e6, m[6] > 0 ? 100.0 * (m[5] - m[6]) / m[6] : 0.0,
             m[0] * SizeOf(c.train.dtype) / 1e6, m[0], c.dist.zero == 3 ? ", a 1/dp shard held between gathers" : "", m[1] * 4 / 1e6, m[2] * 4 / 1e6, static_cast<int>(m[4]), m[4] == 1 ? "" : "s", m[3] / 1e6));
  }
  return Status::Ok();
}

// Each stage's measured idle fraction (blocked on receives and sends), averaged over its ranks.
Status TrainReport::PipelineIdle(int steps_done) {
  const int pp = c_.dist.pp, tp = c_.dist.tp, world = rt_.re.world;
  double mine[2] = {idle_sum_, busy_sum_};
  std::vector<double> all(2 * world);
  ANNEAL_RETURN_IF_ERROR(rt_.world()->AllGatherBytes(mine, sizeof(mine), all.data()));
  std::vector<double> idle(pp, 0), busy(pp, 0);
  for (int r = 0; r < world; ++r) {
    const int stage = (r / tp) % pp;
    idle[stage] += all[2 * r];
    busy[stage] += all[2 * r + 1];
  }
  std::string per;
  for (int p = 0; p < pp; ++p) per += Fmt("%s stage %d %.1f%%", p ? "," : "", p, busy[p] > 0 ? 100.0 * idle[p] / busy[p] : 0.0);
  log_(Fmt("pipeline idle (blocked on receives/sends, steps 2..%d, schedule %s, m=%d):%s; theory (p-1)/(m+p-1) = "
           "%.1f%%",
           steps_done, c_.dist.schedule.c_str(), c_.train.grad_accum, per.c_str(),
           100.0 * (pp - 1) / (c_.train.grad_accum + pp - 1)));
  return Status::Ok();
}

Status TrainReport::Finish(int steps_done, const std::string& state_hash, double checkpoint_blocked_s, bool checkpoints) {
  if (checkpoints) log_(Fmt("checkpoints blocked training %.0f ms in all", checkpoint_blocked_s * 1e3));
  if (c_.dist.pp > 1 && rt_.re.world > 1) ANNEAL_RETURN_IF_ERROR(PipelineIdle(steps_done));
  const double rss = PeakRssMb();
  log_(Fmt("peak RSS of rank 0: %.1f MB", rss));
  metrics_.Record(steps_done, {{"peak_rss_mb", rss}});
  if (const std::string ops = rt_.model->backend().OpTimeTable(); !ops.empty()) log_(ops);
  if (rt_.tp_group) log_(Fmt("tensor parallelism: rank 0 sent %.1f MB in its group's collectives", rt_.tp_group->bytes() / 1e6));
  if (rt_.par && comm_steps_ > 0) {
    log_(Fmt("data parallelism: rank 0 handed its collectives %.2f MB a step (steps 2-%d; each collective's whole "
             "buffer)",
             static_cast<double>(comm_after_last_ - comm_after_1_) / comm_steps_ / 1e6, comm_steps_ + 1));
  }
  if (rt_.par && c_.dist.zero == 2) {
    log_(Fmt("ZeRO-2: at most %.1f MB of gradient buffers at once during backward (a full buffer: %.1f MB)",
             rt_.par->peak_buffer_floats() * 4 / 1e6, rt_.model->num_floats() * 4 / 1e6));
  }
  log_(std::string("state hash (parameters, Adam m and v") + (rt_.re.world > 1 ? " of rank 0" : "") + "): " + state_hash);
  return Status::Ok();
}

Result<std::string> StateHash(const DecoderModel& m, AdamW& opt, DataParallel* par) {
  Xxh64Stream h;
  auto take = [&h](const float* p, size_t n) {
    h.Update(std::string_view(reinterpret_cast<const char*>(p), n * sizeof(float)));
  };
  // The canonical fp32 parameters (the optimizer's masters where it keeps them), in order: streamed a
  // bucket at a time at ZeRO 3, where no rank holds them all.
  if (par && par->zero() == 3) {
    ANNEAL_RETURN_IF_ERROR(par->StreamParams(opt.MasterOr(par->OptimizerParams({})), take));
  } else {
    ANNEAL_ASSIGN_OR_RETURN(DevPtr full, GatherFullParams(m, opt, par));
    const HostRead params(m.backend(), full, m.num_floats());
    take(params.data(), m.num_floats());
    if (par) par->ReleaseWide();
  }
  const HostRead mm(m.backend(), opt.m().data(), opt.m().size()), vv(m.backend(), opt.v().data(), opt.v().size());
  h.Update(std::string_view(reinterpret_cast<const char*>(mm.data()), opt.m().size() * sizeof(float)));
  h.Update(std::string_view(reinterpret_cast<const char*>(vv.data()), opt.v().size() * sizeof(float)));
  return HexU64(h.Digest());
}

Result<double> UnigramEntropy(const std::string& dataset_dir, const std::string& split) {
  ANNEAL_ASSIGN_OR_RETURN(DatasetInfo info, LoadDataset(Env::Default(), dataset_dir));
  std::vector<uint64_t> counts;
  uint64_t total = 0;
  constexpr uint64_t kMaxTokens = 100000000;
  for (const auto& s : info.shards) {
    if (s.split != split || total >= kMaxTokens) continue;
    ANNEAL_ASSIGN_OR_RETURN(auto r, ShardReader::Open(Env::Default(), JoinPath(dataset_dir, s.file)));
    for (uint64_t i = 0; i < r->tokens() && total < kMaxTokens; ++i) {
      uint32_t t = r->Token(i);
      if (t >= counts.size()) counts.resize(t + 1, 0);
      ++counts[t];
      ++total;
    }
  }
  if (total == 0) return InvalidInput("dataset " + dataset_dir + " has no " + split + " tokens");
  double h = 0;
  for (uint64_t c : counts) {
    if (c) h -= static_cast<double>(c) / total * std::log(static_cast<double>(c) / total);
  }
  return h;
}

}  // namespace anneal
