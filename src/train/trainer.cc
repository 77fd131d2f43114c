#include "train/trainer.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "core/checksum.h"
#include "core/progress.h"
#include "data/loader.h"
#include "comm/communicator.h"
#include "parallel/data_parallel.h"
#include "comm/process_groups.h"
#include "comm/rank_env.h"
#include "comm/store.h"
#include "kernels/registry.h"
#include "model/gpt.h"
#include "optim/adamw.h"
#include "parallel/pipeline.h"
#include "data/channel.h"
#include "tensor/host_copy.h"
#include "parallel/plan.h"
#include "parallel/tensor_parallel.h"

namespace anneal {

namespace {

// $ANNEAL_PROGRESS_DIR/rank-<RANK>, rewritten in place after every step with "<step> <seconds> <sum of
// all step seconds>": how
// the agent sees each rank's step time (agent/node_metrics.h). Nothing when the variable is unset.
class RankProgressFile {
 public:
  explicit RankProgressFile(int rank) {
    const char* dir = std::getenv("ANNEAL_PROGRESS_DIR");
    if (dir && *dir) fd_ = ::open((std::string(dir) + "/rank-" + std::to_string(rank)).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
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

std::string Fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string Fmt(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof(buf), f, ap);
  va_end(ap);
  return buf;
}

std::string HexFloat(double x) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%a", x);
  return buf;
}

// Splits a (B, T+1) batch into inputs and targets (B, T).
void SplitBatch(const std::vector<uint32_t>& batch, int B, int T, std::vector<int32_t>* in, std::vector<int32_t>* tgt) {
  in->resize(static_cast<size_t>(B) * T);
  tgt->resize(static_cast<size_t>(B) * T);
  for (int b = 0; b < B; ++b) {
    const uint32_t* row = batch.data() + static_cast<size_t>(b) * (T + 1);
    for (int t = 0; t < T; ++t) {
      (*in)[static_cast<size_t>(b) * T + t] = static_cast<int32_t>(row[t]);
      (*tgt)[static_cast<size_t>(b) * T + t] = static_cast<int32_t>(row[t + 1]);
    }
  }
}

// XXH64 of the parameters and this rank's Adam moments (all of them unless ZeRO shards them).
std::string StateHash(const GptModel& m, AdamW& opt) {
  Xxh64Stream h;
  // The canonical fp32 parameters: the optimizer's masters where it keeps them.
  const HostRead params(m.backend(), opt.MasterOr(m.params_ptr()), m.num_floats());
  const HostRead mm(m.backend(), opt.m().data(), opt.m().size()), vv(m.backend(), opt.v().data(), opt.v().size());
  h.Update(std::string_view(reinterpret_cast<const char*>(params.data()), m.num_floats() * sizeof(float)));
  h.Update(std::string_view(reinterpret_cast<const char*>(mm.data()), opt.m().size() * sizeof(float)));
  h.Update(std::string_view(reinterpret_cast<const char*>(vv.data()), opt.v().size() * sizeof(float)));
  return HexU64(h.Digest());
}

}  // namespace

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

Result<TrainResult> RunTraining(const TrainConfig& c, const std::atomic<bool>& stop,
                                const std::function<void(const std::string&)>& log_all) {
  // The job layout, validated before anything is allocated (exit 2 naming each factor).
  ANNEAL_ASSIGN_OR_RETURN(RankEnv re, RankEnv::FromEnvironment());
  const int dp = c.dp > 0 ? c.dp : std::max(1, re.world / (c.tp * c.pp));
  ANNEAL_ASSIGN_OR_RETURN(ProcessGroups pg, ProcessGroups::Make(re.world, dp, c.pp, c.tp, re.rank));
  ParallelDims dims;
  dims.dp = dp;
  dims.tp = c.tp;
  dims.pp = c.pp;
  dims.zero = c.zero;
  dims.micro_batches = c.grad_accum;
  dims.schedule = c.schedule;
  dims.seq_len = c.seq_len;
  dims.batch = c.batch_size;
  dims.sequence_parallel = c.sequence_parallel;
  ANNEAL_ASSIGN_OR_RETURN(ParallelPlan plan, ParallelPlan::Make(c.model, dims));
  const ModelShard shard = plan.ShardOf(pg.pp_rank(), pg.tp_rank());
  const bool first_stage = pg.pp_rank() == 0, last_stage = pg.pp_rank() == c.pp - 1;
  // Rank 0 speaks for the job; the others report only errors.
  auto log = [&](const std::string& line) {
    if (re.rank == 0) log_all(line);
  };
  if (c.dtype != DType::kF32 && re.world > 1) {
    return InvalidInput("train.dtype = " + std::string(DTypeName(c.dtype)) + " runs on one rank for now, this is one of " +
                        std::to_string(re.world) + ": train with train.dtype=f32, or with one process");
  }
  Backend* be = BackendByName(c.kernels);  // checked by the config's validation
  be->SetThreads(c.threads);
  // One communicator per group this rank belongs to (each with its own thread): data parallel,
  // tensor parallel, the pipeline's two directions, the tied embedding's first and last stage, and
  // the whole world (the loss, the gradient norm, stop flags, checkpoint records).
  std::unique_ptr<Store> store_base;
  std::unique_ptr<PrefixStore> store;
  std::unique_ptr<Communicator> comm, tp_comm, fwd_comm, bwd_comm, emb_comm, world_owned;
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(c.timeout_s * 1000));
  auto connect = [&](const std::string& group, std::vector<int> members) -> Result<std::unique_ptr<Communicator>> {
    CommOptions co;
    // Several groups share a kind (dp groups {0,4} and {1,5}): the name tells them apart in the store
    // and in errors ("dp-1-5").
    co.group = group;
    if (!members.empty() && static_cast<int>(members.size()) < re.world) {
      for (int m : members) {
        co.group += '-';
        co.group += std::to_string(m);
      }
    }
    co.members = std::move(members);
    co.global_rank = re.rank;
    co.world_size = re.world;
    co.timeout = timeout;
    // The groups that carry tensors use the communicator of the backend's device; "world" carries
    // host scalars (the loss, the norm, stop flags, checkpoint records) and stays on the host's.
    return group == "world" ? ConnectGloo(store.get(), co) : ConnectCommunicator(be->device(), store.get(), co);
  };
  if (re.world > 1) {
    if (re.store.empty()) {
      return InvalidInput("this rank is one of " + std::to_string(re.world) + " (" + re.launcher +
                          ") but ANNEAL_STORE, the rendezvous store, is not set: start the ranks with `anneal launch`, "
                          "or set ANNEAL_STORE=host:port of a running store or file:///shared/folder");
    }
    ANNEAL_ASSIGN_OR_RETURN(store_base, OpenStore(re.store, timeout));
    store = std::make_unique<PrefixStore>(store_base.get(), re.StorePrefix());
    ANNEAL_ASSIGN_OR_RETURN(comm, connect("dp", pg.DpGroup()));
    if (c.tp > 1) {
      ANNEAL_ASSIGN_OR_RETURN(tp_comm, connect("tp", pg.TpGroup()));
    }
    if (c.pp > 1) {
      ANNEAL_ASSIGN_OR_RETURN(fwd_comm, connect("pp_fwd", pg.PpGroup()));
      ANNEAL_ASSIGN_OR_RETURN(bwd_comm, connect("pp_bwd", pg.PpGroup()));
      if (first_stage || last_stage) {
        ANNEAL_ASSIGN_OR_RETURN(emb_comm, connect("embedding", {pg.RankAt(pg.dp_rank(), 0, pg.tp_rank()),
                                                                pg.RankAt(pg.dp_rank(), c.pp - 1, pg.tp_rank())}));
      }
    }
    if (dp < re.world) {
      ANNEAL_ASSIGN_OR_RETURN(world_owned, connect("world", {}));
    }
  } else {
    comm = MakeSoloCommunicator("dp");
  }
  Communicator* world = world_owned ? world_owned.get() : comm.get();
  std::unique_ptr<CommTensorParallelGroup> tp_group;
  if (tp_comm) tp_group = std::make_unique<CommTensorParallelGroup>(tp_comm.get());
  const int threads = be->Threads();
  const int B = c.batch_size, T = c.seq_len;

  LoaderOptions lo;
  // The data channel: read in place, or copied to local disk first (local rank 0 copies).
  ChannelOptions chan;
  chan.mode = c.data_mode;
  chan.local_dir = c.data_local_dir;
  chan.parallel = c.data_parallel;
  chan.local_rank = re.local_rank;
  chan.quiet = re.rank != 0;
  ANNEAL_ASSIGN_OR_RETURN(const std::string data_dir, PrepareDataChannel(c.data_dir, chan));
  lo.dir = data_dir;
  if (c.data_mode == "fastfile") {
    ANNEAL_ASSIGN_OR_RETURN(lo.remote, OpenRemoteDataset(c.data_dir));
  }
  lo.batch = B;
  lo.seq_len = T;
  lo.seed = c.data_seed;
  lo.vocab_size = static_cast<uint32_t>(c.model.vocab_size);
  lo.verify_checksums = c.verify_checksums;
  lo.dp_rank = pg.dp_rank();
  lo.dp_size = dp;
  ANNEAL_ASSIGN_OR_RETURN(auto train, DataLoader::Open(Env::Default(), lo));  // checks the vocabulary
  std::unique_ptr<DataLoader> val;
  bool has_val = false;
  for (const auto& s : train->info().shards) has_val |= s.split == "val";
  if (has_val) {
    LoaderOptions vo = lo;
    vo.split = "val";
    vo.shuffle = false;
    vo.dp_rank = 0;  // every rank walks the same validation batches and evaluates its share of them
    vo.dp_size = 1;
    auto v = DataLoader::Open(Env::Default(), vo);
    if (v.ok()) val = std::move(v).value();  // a val split too short for one window: no validation
  }

  // parallelize(): the model is built as this rank's shard of it, then initialized (every rank
  // draws the whole model's random stream and keeps its box: the same values as one process).
  // Build the model with its tensor-parallel split's layers (the whole width when tp = 1).
  std::unique_ptr<TensorParallelLayers> tp_layers;
  if (tp_group) tp_layers = std::make_unique<TensorParallelLayers>(plan.model(), shard, tp_group.get(), *be);
  GptModel model(plan.model(), *be, shard, tp_layers.get(), c.dtype);
  model.set_recompute(*ParseRecompute(c.recompute));  // validated by the config
  model.InitWeights(c.seed);
  const ParamInfo* wte = model.layout().Find("wte.weight");
  const bool tied_sync = c.pp > 1 && wte;  // the first and last stage both hold wte
  // Data parallelism from outside the model: gradient buckets leave as backward produces them.
  std::unique_ptr<DataParallel> par;
  size_t deferred_lo = 0, deferred_hi = 0;  // pipeline: the embeddings' range waits for the tied sum
  if (dp > 1 || c.zero > 0) {
    par = std::make_unique<DataParallel>(comm.get(), *be, model.stream(), model.num_floats(), c.zero,
                                         static_cast<size_t>(c.bucket_mb * (1 << 20) / sizeof(float)));
    if (c.zero == 2) {
      model.set_grad_sink(par.get());  // no full gradient buffer: ranges come and go during backward
    } else {
      model.set_grad_ready_hook([&](size_t b, size_t e) {
        if (tied_sync && b == 0) {
          deferred_lo = b;
          deferred_hi = e;
          return;
        }
        par->GradsReady(b, e);
      });
    }
  }
  AdamW opt(model.layout(), *be, c.optim, par ? par->shard_begin() : 0, par ? par->shard_end() : SIZE_MAX);
  ANNEAL_RETURN_IF_ERROR(opt.status());
  // bf16: fp32 masters of the initial weights of the optimizer's shard.
  ANNEAL_RETURN_IF_ERROR(opt.UseMasterWeights(model.params_ptr() + opt.begin()));
  PipelineEngine::Options po;
  po.schedule = c.schedule;
  po.stage = pg.pp_rank();
  po.stages = c.pp;
  po.micro_batches = c.grad_accum;
  po.B = B;
  po.T = T;
  // Gradients are averaged over every sample of the global batch: B * T * accum * dp positions.
  po.grad_scale = 1.0f / (static_cast<float>(B) * T * c.grad_accum * dp);
  PipelineEngine engine(&model, fwd_comm.get(), bwd_comm.get(), po);
  TrainerState st;
  st.loader = train->position();
  CheckpointLineage lineage;
  {
    nlohmann::json cj = nlohmann::json::object();
    for (const auto& [key, value] : c.values) cj[key] = value;
    lineage.config_json = cj.dump();
    lineage.dataset_dir = c.data_dir;
    lineage.dataset_hash = train->info().inputs_hash;
  }
  TrainResult res;
  // Checkpoints go to a folder or an object store (s3://); written asynchronously by default.
  std::unique_ptr<ObjectStore> ckpt_store;
  if (!c.checkpoint_dir.empty()) {
    ANNEAL_ASSIGN_OR_RETURN(ckpt_store, OpenCheckpointStore(c.checkpoint_dir));
  }
  CheckpointOptions copts;
  copts.keep_last = c.checkpoint_keep;
  copts.keep_every = c.checkpoint_keep_every;
  copts.wait_s = c.timeout_s;
  std::unique_ptr<ObjectStore> staging;  // hierarchical upload: this instance's hand-over folder
  if (ckpt_store && c.checkpoint_hierarchical && re.local_world > 1) {
    const char* job = std::getenv("ANNEAL_JOB");
    ANNEAL_ASSIGN_OR_RETURN(staging, OpenObjectStore(JoinPath(c.checkpoint_staging_dir, "anneal-staging-" +
        HexU64(Xxh64(std::string(job ? job : "") + "|" + c.checkpoint_dir)))));
    copts.staging = staging.get();
    copts.local_rank = re.local_rank;
    copts.local_world = re.local_world;
  }
  AsyncCheckpointer checkpointer(ckpt_store.get(), copts);
  auto ckpt_path = [&](const std::string& name) {
    std::string dir = c.checkpoint_dir;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    return dir + "/" + name;
  };
  if (ckpt_store && c.resume == "auto") {
    ANNEAL_ASSIGN_OR_RETURN(auto newest, FindNewestCheckpoint(*ckpt_store));
    if (newest) {
      ANNEAL_RETURN_IF_ERROR(LoadCheckpoint(*ckpt_store, *newest, &model, &opt, &st));
      ANNEAL_RETURN_IF_ERROR(train->Seek(st.loader));
      log("resumed from " + ckpt_path(*newest) + " at step " + std::to_string(st.step));
      res.last_checkpoint = ckpt_path(*newest);
    }
  }
  const double flops_per_token =
      6.0 * static_cast<double>(c.model.NumParams()) + 6.0 * c.model.n_layer * c.model.n_embd * static_cast<double>(T);
  const double peak = (c.peak_gflops > 0 ? c.peak_gflops : be->MeasurePeakGflops(DType::kF32)) * 1e9;
  if (c.dtype != DType::kF32) {
    log(std::string("precision: parameters, gradients and activations in ") + DTypeName(c.dtype) +
        ", fp32 master weights and Adam moments in the optimizer, checkpoints in fp32");
  }
  log(Fmt("model %s; data %s: %llu train windows of %d tokens; B=%d T=%d accum=%d, %d threads, kernels %s",
          c.model.ToString().c_str(), c.data_dir.c_str(), static_cast<unsigned long long>(train->num_samples()), T + 1,
          B, T, c.grad_accum, threads, be->name().c_str()));
  {
    const double n = static_cast<double>(model.num_floats());
    std::string zero2;
    if (par && par->floats_held()) {
      zero2 = Fmt(" + ZeRO-2 accumulated-gradient shard %.1f MB (+ per-range gradient buffers during backward)",
                  par->floats_held() * 4 / 1e6);
    }
    log(Fmt("parallel: %d ranks (%s), dp %d x tp %d%s x pp %d, ZeRO %d, buckets of %.1f MB, collective timeout %.0f s; "
            "rank 0 holds %.0f of the model's %zu parameters; per-rank optimizer memory: params %.1f MB + grads %.1f MB "
            "+ Adam moments %.1f MB%s",
            re.world, re.launcher.c_str(), dp, c.tp, shard.seq_parallel() ? " (sequence parallel)" : "", c.pp, c.zero, c.bucket_mb, c.timeout_s, n,
            c.model.NumParams(), n * 4 / 1e6, model.grads_ptr() ? n * 4 / 1e6 : 0.0,
            (opt.m().size() + opt.v().size()) * 4 / 1e6, zero2.c_str()));
    if (c.pp > 1) {
      log("pipeline: " + std::to_string(c.pp) + " stages, schedule " + c.schedule + ", " +
          std::to_string(c.grad_accum) + " micro-batches; " + plan.DescribeStages() +
          " (balanced by estimated forward FLOPs/token: 24C^2+4TC per layer, 2CV for the LM head)");
      if (c.grad_accum < c.pp) {
        log(Fmt("pipeline: %d micro-batches for %d stages leaves each stage idle %.0f%% of the time; raise "
                "train.grad_accum",
                c.grad_accum, c.pp, 100.0 * (c.pp - 1) / (c.grad_accum + c.pp - 1)));
      }
    }
  }
  log(Fmt("MFU = tokens/s x FLOPs/token / (ranks x peak); FLOPs/token = 6N + 6*L*C*T = %.3g; peak %.0f GFLOP/s per rank "
          "(%s)",
          flops_per_token, peak / 1e9, c.peak_gflops > 0 ? "train.peak_gflops" : "sgemm measured at start"));

  // The unigram entropy of the training split (over at most its first 100M tokens): the loss of the
  // best model that ignores context, printed beside every validation loss.
  double unigram = -1;
  if (val && !lo.remote) {  // (fastfile: not computed, it would read the whole corpus)
    auto h = UnigramEntropy(data_dir, "train");
    if (h.ok()) unigram = *h;
  }
  auto val_line = [&](double v) {
    if (unigram < 0) return Fmt("step %5d | val loss %.6f", st.step, v);
    return Fmt("step %5d | val loss %.6f | unigram entropy of the corpus %.4f nats/token%s", st.step, v, unigram,
               unigram > 0 && v < unigram ? " (below it: the model uses context)" : "");
  };
  // Whether this rank's loss is the one counted: the last stage's first tensor-parallel rank.
  const bool loss_owner = last_stage && pg.tp_rank() == 0;
  auto evaluate = [&]() -> double {
    if (!val) return -1;
    LoaderPosition start{c.data_seed, 0};
    (void)val->Seek(start);
    std::vector<uint32_t> batch;
    std::vector<int32_t> in, tgt;
    double sum = 0;
    const int n = std::min<uint64_t>(c.eval_batches, std::max<uint64_t>(1, val->num_samples() / B));
    for (int i = 0; i < n; ++i) {
      val->Next(&batch);
      if (i % dp != pg.dp_rank()) continue;  // batch i is evaluated by dp rank i mod dp
      SplitBatch(batch, B, T, &in, &tgt);
      auto l = engine.Evaluate(in.data(), tgt.data());
      if (!model.status().ok()) return std::nan("");  // the next step reports it
      if (!l.ok()) return std::nan("");
      if (loss_owner) sum += *l;
    }
    if (re.world > 1 && !world->AllReduceSum(&sum, 1).ok()) return std::nan("");  // the next step reports it
    return sum / n;
  };
  CheckpointWriters writers;
  writers.rank = re.rank;
  writers.ranks = re.world;
  writers.zero = par ? c.zero : 0;
  writers.plan = &plan;
  // The snapshot buffers are faulted in on the checkpointer's thread while the first steps run.
  if (ckpt_store && c.checkpoint_async) checkpointer.Reserve(CheckpointImageSizes(model, &opt, writers));
  // A save snapshots this rank's part to host memory (training waits for that, and for the previous
  // save still being written) and writes it on the checkpointer's thread; the last one is waited for.
  std::string writing;  // the checkpoint being written in the background
  double blocked_s = 0;
  int saved_step = -1;
  auto save = [&](bool last) -> Status {
    if (!ckpt_store) return Status::Ok();
    const double t0 = MonotonicSeconds();
    if (st.step == saved_step) {  // the end of the run right after a periodic save: wait for it only
      ANNEAL_RETURN_IF_ERROR(checkpointer.Wait());
      blocked_s += MonotonicSeconds() - t0;
      log(Fmt("checkpoint %s%s (written in %.2f s)", res.last_checkpoint.c_str(), re.rank == 0 ? " committed" : "",
              checkpointer.last_write_seconds()));
      writing.clear();
      return Status::Ok();
    }
    saved_step = st.step;
    st.loader = train->position();
    st.updates = opt.updates();
    ANNEAL_RETURN_IF_ERROR(checkpointer.Wait());  // the previous one first (its buffers are reused)
    const double t_wait = MonotonicSeconds() - t0;
    ANNEAL_ASSIGN_OR_RETURN(CheckpointSnapshot snap, SnapshotCheckpoint(*ckpt_store, model, &opt, st, lineage, writers,
                                                                        copts, checkpointer.spare()));
    const double t_snap = MonotonicSeconds() - t0 - t_wait;
    ANNEAL_RETURN_IF_ERROR(checkpointer.Start(std::move(snap)));
    if (!writing.empty()) {
      log(Fmt("checkpoint %s committed (written in %.2f s)", ckpt_path(writing).c_str(), checkpointer.last_write_seconds()));
    }
    writing = CheckpointName(st.step);
    res.last_checkpoint = ckpt_path(writing);
    if (last || !c.checkpoint_async) {
      ANNEAL_RETURN_IF_ERROR(checkpointer.Wait());
      const double dt = MonotonicSeconds() - t0;
      blocked_s += dt;
      log(Fmt("checkpoint %s%s (training blocked %.0f ms, written in %.2f s)", res.last_checkpoint.c_str(),
              re.rank == 0 ? " committed" : "", dt * 1e3, checkpointer.last_write_seconds()));
      writing.clear();
    } else {
      const double dt = MonotonicSeconds() - t0;
      blocked_s += dt;
      log(Fmt("checkpoint %s: snapshot taken, training blocked %.0f ms (%.0f ms waiting for the previous write, "
              "%.0f ms copying); writing in the background",
              res.last_checkpoint.c_str(), dt * 1e3, t_wait * 1e3, t_snap * 1e3));
    }
    return Status::Ok();
  };
  // The squared gradient norm over the parameters this rank accounts for: its boxes of sharded
  // tensors, replicated tensors on tensor-parallel rank 0, the tied wte on the first stage only,
  // and with ZeRO only its shard (without ZeRO, data-parallel rank 0 alone: replicas hold the same).
  auto local_sum_squares = [&](DevPtr g, size_t begin, size_t end) {
    double ss = 0;
    if (!par || c.zero > 0 || pg.dp_rank() == 0) {
      for (const ParamInfo& p : model.layout().params()) {
        if (!p.owner(shard)) continue;
        const size_t lo = std::max(begin, p.offset), hi = std::min(end, p.offset + p.stored_size);
        if (lo < hi) {
          const DevPtr at = g + (lo - begin);
          ss += be->SumSquares(model.stream(), TV(at.p, at.t, {static_cast<int64_t>(hi - lo)}, be->device()));
        }
      }
    }
    return ss;
  };

  const double t_start = MonotonicSeconds();
  RankProgressFile progress(re.rank);
  std::vector<uint32_t> batch;
  // With several ranks they stop together: both reasons are agreed on after each step.
  bool signal_agreed = false, timeout_agreed = false;
  auto out_of_time = [&] { return c.max_seconds > 0 && MonotonicSeconds() - t_start >= c.max_seconds; };
  double idle_sum = 0, busy_sum = 0;  // pipeline: blocked time and step time, from step 2 on
  auto next_batch = [&](int, std::vector<int32_t>* in, std::vector<int32_t>* tgt) {
    train->Next(&batch);
    SplitBatch(batch, B, T, in, tgt);
  };
  auto before_backward = [&](int, bool last) {
    if (par) par->BeginBackward(model.grads(), last);
  };
  auto after_backward = [&](int, bool last) -> Status {
    if (last && tied_sync) {
      // The tied embedding: the first stage's gradient (from the lookup) plus the last stage's (from
      // the LM head), before data parallelism reduces it.
      if (emb_comm) {
        const TV g = TV::F32(model.grads() + wte->offset, {static_cast<int64_t>(wte->stored_size)}, be->device());
        ANNEAL_RETURN_IF_ERROR(emb_comm->StartAllReduceSum(g, be->RecordEvent(model.stream()))->Wait());
      }
      if (par && deferred_hi > deferred_lo) par->GradsReady(deferred_lo, deferred_hi);
      deferred_lo = deferred_hi = 0;
    }
    return par ? par->EndBackward() : Status::Ok();
  };
  while (st.step < c.steps) {
    const bool by_signal = re.world > 1 ? signal_agreed : stop.load();
    if (by_signal || (re.world > 1 ? timeout_agreed : out_of_time())) {
      res.stopped = true;
      log(by_signal ? "stop requested: saving a checkpoint" : "max_seconds reached: saving a checkpoint");
      break;
    }
    const double t0 = MonotonicSeconds();
    model.ZeroGrad();
    ANNEAL_ASSIGN_OR_RETURN(double loss, engine.Step(next_batch, before_backward, after_backward));
    ANNEAL_RETURN_IF_ERROR(model.status());  // an activation that did not fit (named, with what to do)
    ANNEAL_RETURN_IF_ERROR(train->status());  // a remote shard read that failed (fastfile)
    if (tp_group) ANNEAL_RETURN_IF_ERROR(tp_group->status());
    if (st.step > 0) {
      idle_sum += engine.last_idle_seconds();
      busy_sum += engine.last_step_seconds();
    }
    loss /= c.grad_accum;
    if (re.world > 1) {  // the global batch's loss, and whether any rank was asked to stop
      double agg[3] = {loss_owner ? loss : 0.0, stop.load() ? 1.0 : 0.0, out_of_time() ? 1.0 : 0.0};
      ANNEAL_RETURN_IF_ERROR(world->AllReduceSum(agg, 3));
      loss = agg[0] / dp;
      signal_agreed = agg[1] > 0;
      timeout_agreed = agg[2] > 0;
    }
    StepStats s;
    if (std::isfinite(loss)) {
      // The global gradient norm (for clipping) over every parameter once, then this rank's update of
      // what it holds (with ZeRO its shard, then every rank gathers all).
      const size_t b = par ? par->shard_begin() : 0, e = par ? par->shard_end() : model.num_floats();
      const DevPtr g = par ? DevPtr{par->OptimizerGrads(), DType::kF32} : model.grads_ptr();
      double ss = local_sum_squares(g, b, e);
      if (re.world > 1) ANNEAL_RETURN_IF_ERROR(world->AllReduceSum(&ss, 1));
      s = opt.StepWithNorm(model.params_ptr() + b, g, st.step, std::sqrt(ss));
      if (par && c.zero > 0 && !s.skipped) ANNEAL_RETURN_IF_ERROR(par->AllGatherParams(model.params()));
      if (par) par->ResetAccumulator();
    } else {
      if (par) par->ResetAccumulator();
      s.skipped = true;
      s.lr = LearningRate(c.optim, st.step);
    }
    if (s.skipped) {
      ++st.bad_steps;
      ++st.skipped_total;
      log(Fmt("step %d: non-finite %s, update skipped (%d in a row, %llu in all)", st.step + 1,
              std::isfinite(loss) ? "gradients" : "loss", st.bad_steps, static_cast<unsigned long long>(st.skipped_total)));
      if (st.bad_steps >= c.max_bad_steps) {
        return Internal(Fmt("training diverged: %d steps in a row with non-finite loss or gradients (train.max_bad_steps); "
                            "lower optim.lr or raise optim.warmup_steps, and resume from the last checkpoint",
                            st.bad_steps));
      }
    } else {
      st.bad_steps = 0;
    }
    ++st.step;
    res.last_loss = loss;
    const double dt = MonotonicSeconds() - t0;
    progress.Record(st.step, dt);
    const double tps = static_cast<double>(B) * T * c.grad_accum * dp / dt;  // the whole job's
    if (st.step == 1) {  // after the first step the activations are allocated: every rank's memory
      const Recompute rc = *ParseRecompute(c.recompute);
      const int local_layers = shard.end(plan.model()) - shard.layer_begin;
      double mine[5] = {static_cast<double>(model.num_floats()), static_cast<double>(model.ActivationFloatsAllocated()),
                        static_cast<double>(plan.model().ActivationFloats(B, T, rc, shard, model.slots())),
                        ParallelPlan::KorthikantiBytes(c.model, B, T, c.tp, local_layers, model.slots(), rc,
                                                       shard.seq_parallel()),
                        static_cast<double>(model.slots())};
      std::vector<double> all(5 * re.world);
      if (re.world > 1) {
        ANNEAL_RETURN_IF_ERROR(world->AllGatherBytes(mine, sizeof(mine), all.data()));
      } else {
        std::copy(mine, mine + 5, all.begin());
      }
      log(Fmt("activation memory of rank 0: %.1f MB allocated, formula %.1f MB (GptConfig::ActivationFloats, "
              "recompute %s, %d micro-batch slot%s)",
              all[1] * 4 / 1e6, all[2] * 4 / 1e6, c.recompute.c_str(), model.slots(), model.slots() == 1 ? "" : "s"));
      for (int r = 0; r < re.world; ++r) {
        const double* m = all.data() + 5 * r;
        log(Fmt("memory of rank %d (dp %d, pp %d, tp %d): parameters %.2f MB; activations %.2f MB allocated, formula "
                "%.2f MB (fp32, %d slot%s); Korthikanti et al. for its layers %.2f MB (fp16)",
                r, r / (c.tp * c.pp), (r / c.tp) % c.pp, r % c.tp, m[0] * 4 / 1e6, m[1] * 4 / 1e6, m[2] * 4 / 1e6,
                static_cast<int>(m[4]), m[4] == 1 ? "" : "s", m[3] / 1e6));
      }
    }
    if (st.step % c.log_every == 0 || st.step == c.steps) {
      log(Fmt("step %5d/%d | loss %.6f (%s) | lr %.3e | grad norm %.4f | %.0f ms | %.0f tok/s | MFU %.1f%%", st.step,
              c.steps, loss, HexFloat(loss).c_str(), s.lr, s.grad_norm, dt * 1e3, tps,
              100.0 * tps / re.world * flops_per_token / peak));
    }
    if (c.eval_every > 0 && st.step % c.eval_every == 0 && val) {
      res.last_val_loss = evaluate();
      log(val_line(res.last_val_loss));
    }
    if (c.checkpoint_every > 0 && st.step % c.checkpoint_every == 0) ANNEAL_RETURN_IF_ERROR(save(false));
  }
  if (val && (c.eval_every == 0 || st.step % c.eval_every != 0)) {
    res.last_val_loss = evaluate();
    log(val_line(res.last_val_loss));
  }
  ANNEAL_RETURN_IF_ERROR(save(true));
  if (ckpt_store) log(Fmt("checkpoints blocked training %.0f ms in all", blocked_s * 1e3));
  res.steps_done = st.step;
  if (c.pp > 1 && re.world > 1) {
    // Each stage's measured idle fraction (blocked on receives and sends), averaged over its ranks.
    double mine[2] = {idle_sum, busy_sum};
    std::vector<double> all(2 * re.world);
    ANNEAL_RETURN_IF_ERROR(world->AllGatherBytes(mine, sizeof(mine), all.data()));
    std::vector<double> idle(c.pp, 0), busy(c.pp, 0);
    for (int r = 0; r < re.world; ++r) {
      const int stage = (r / c.tp) % c.pp;
      idle[stage] += all[2 * r];
      busy[stage] += all[2 * r + 1];
    }
    std::string per;
    for (int p = 0; p < c.pp; ++p) {
      per += Fmt("%s stage %d %.1f%%", p ? "," : "", p, busy[p] > 0 ? 100.0 * idle[p] / busy[p] : 0.0);
    }
    log(Fmt("pipeline idle (blocked on receives/sends, steps 2..%d, schedule %s, m=%d):%s; theory (p-1)/(m+p-1) = "
            "%.1f%%",
            st.step, c.schedule.c_str(), c.grad_accum, per.c_str(),
            100.0 * (c.pp - 1) / (c.grad_accum + c.pp - 1)));
  }
  {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    log(Fmt("peak RSS of rank 0: %.1f MB", ru.ru_maxrss / 1024.0));
    if (tp_group) log(Fmt("tensor parallelism: rank 0 sent %.1f MB in its group's collectives", tp_group->bytes() / 1e6));
    if (par && c.zero == 2) {
      log(Fmt("ZeRO-2: at most %.1f MB of gradient buffers at once during backward (a full buffer: %.1f MB)",
              par->peak_buffer_floats() * 4 / 1e6, model.num_floats() * 4 / 1e6));
    }
  }
  res.state_hash = StateHash(model, opt);
  log(std::string("state hash (parameters, Adam m and v") + (re.world > 1 ? " of rank 0" : "") +
      "): " + res.state_hash);
  return res;
}

}  // namespace anneal
