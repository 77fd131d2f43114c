#include "train/checkpoints.h"

#include "ckpt/hf_folder.h"
#include "core/env.h"
#include "train/checkpoint_tensors.h"

#include "core/checksum.h"
#include "core/progress.h"
#include "core/trace.h"
#include "train/report.h"

namespace anneal {

Result<std::unique_ptr<TrainCheckpoints>> TrainCheckpoints::Open(const CheckpointSection& k, double wait_s,
                                                                 const Runtime& rt, CheckpointLineage lineage,
                                                                 LogFn log, Clock& clock) {
  std::unique_ptr<TrainCheckpoints> t(new TrainCheckpoints(k, std::move(log)));
  t->lineage_ = std::move(lineage);
  // Checkpoints go to a folder or an object store (s3://); written asynchronously by default.
  if (!k.dir.empty()) {
    ANNEAL_ASSIGN_OR_RETURN(t->store_, OpenCheckpointStore(k.dir));
  }
  t->copts_.keep_last = k.keep;
  t->copts_.keep_every = k.keep_every;
  t->copts_.wait_s = wait_s;
  t->copts_.attempt = rt.re.attempt;
  t->copts_.clock = &clock;
  if (t->store_ && k.hierarchical && rt.re.local_world > 1) {  // this instance's hand-over folder
    ANNEAL_ASSIGN_OR_RETURN(t->staging_, OpenObjectStore(JoinPath(k.staging_dir, "anneal-staging-" +
        HexU64(Xxh64(rt.re.job + "|" + k.dir)))));
    t->copts_.staging = t->staging_.get();
    t->copts_.local_rank = rt.re.local_rank;
    t->copts_.local_world = rt.re.local_world;
  }
  if (t->store_ && !rt.model->backend().HostAccessible()) {
    t->device_staging_ = std::make_unique<SnapshotStaging>(rt.model->backend());
  }
  t->checkpointer_ = std::make_unique<AsyncCheckpointer>(t->store_.get(), t->copts_);
  return t;
}

std::string TrainCheckpoints::PathOf(const std::string& name) const {
  std::string dir = k_.dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir + "/" + name;
}

CheckpointWriters TrainCheckpoints::Writers(const Runtime& rt) const {
  CheckpointWriters w;
  w.rank = rt.re.rank;
  w.ranks = rt.re.world;
  w.zero = rt.par ? rt.par->zero() : 0;
  w.params_sharded = w.zero == 3;
  w.plan = rt.plan.get();
  return w;
}

Result<std::string> TrainCheckpoints::Resume(Runtime& rt, TrainerState* st) {
  if (!store_ || k_.resume != "auto") return std::string();
  ANNEAL_ASSIGN_OR_RETURN(auto newest, FindNewestCheckpoint(*store_));
  if (!newest) return std::string();
  ANNEAL_RETURN_IF_ERROR(LoadCheckpoint(*store_, *newest, TensorsOf(*rt.model, rt.opt.get(), rt.par.get()), st));
  ANNEAL_RETURN_IF_ERROR(rt.data.train->Seek(st->loader));
  last_path_ = PathOf(*newest);
  return last_path_;
}

Result<std::string> TrainCheckpoints::InitFrom(Runtime& rt) {
  const std::string& from = k_.init_from;
  if (from.empty()) return std::string();
  const CheckpointTensors t = TensorsOf(*rt.model, rt.opt.get(), rt.par.get());
  if (Env::Default().Exists(from + "/config.json")) {  // a Hugging Face folder
    ANNEAL_ASSIGN_OR_RETURN(HfModel hf, ImportHfFolder(from));
    ANNEAL_RETURN_IF_ERROR(LoadWeights(hf.config, hf.params, t, "train.init_from " + from));
    return from + " (Hugging Face, " + hf.dtype + ")";
  }
  auto ref = ResolveCheckpoint(from);
  if (!ref.ok()) return InvalidInput("train.init_from: " + ref.status().message());
  ANNEAL_ASSIGN_OR_RETURN(ModelConfig c, ReadCheckpointModelConfig(*ref->store, ref->name));
  if (c.family != rt.model->config().family) {
    return InvalidInput("train.init_from " + from + " holds a " + c.ToString() + " but this run's model is " +
                        rt.model->config().ToString() + ": give the model keys of that checkpoint");
  }
  ANNEAL_RETURN_IF_ERROR(LoadWeights(*ref->store, ref->name, t));
  const bool names_step = from.size() >= ref->name.size() &&
                          from.compare(from.size() - ref->name.size(), ref->name.size(), ref->name) == 0;
  return names_step ? from : from + "/" + ref->name;
}

void TrainCheckpoints::Reserve(const Runtime& rt) {
  // A staged snapshot serializes on the writer's thread, where fresh buffers fault in without
  // blocking training: nothing to reserve (and sizing the images would copy the device state once).
  if (store_ && k_.async && !device_staging_) {
    checkpointer_->Reserve(CheckpointImageSizes(TensorsOf(*rt.model, rt.opt.get(), rt.par.get()), Writers(rt)));
    if (rt.par) rt.par->ReleaseWide();  // made for the sizes only (ZeRO 2, 3)
  }
}

Status TrainCheckpoints::Save(Runtime& rt, TrainerState* st, bool last) {
  if (!store_) return Status::Ok();
  trace::Span span("checkpoint", "checkpoint save");
  const double t0 = copts_.clock->Monotonic();
  if (st->step == saved_step_) {  // the end of the run right after a periodic save: wait for it only
    ANNEAL_RETURN_IF_ERROR(checkpointer_->Wait());
    blocked_s_ += copts_.clock->Monotonic() - t0;
    // Only a background write is news here: a synchronous save logged its commit already.
    if (!writing_.empty()) {
      log_(Fmt("checkpoint %s committed (written in %.2f s)", last_path_.c_str(), checkpointer_->last_write_seconds()));
    }
    writing_.clear();
    return Status::Ok();
  }
  saved_step_ = st->step;
  st->loader = rt.data.train->position();
  st->updates = rt.opt->updates();
  ANNEAL_RETURN_IF_ERROR(checkpointer_->Wait());  // the previous one first (its buffers are reused)
  const double t_wait = copts_.clock->Monotonic() - t0;
  if (rt.opt) ANNEAL_RETURN_IF_ERROR(GatherFullParams(*rt.model, *rt.opt, rt.par.get()).status());  // sharded masters
  ANNEAL_ASSIGN_OR_RETURN(CheckpointSnapshot snap, SnapshotCheckpoint(*store_, TensorsOf(*rt.model, rt.opt.get(), rt.par.get()), *st, lineage_,
                                                                      Writers(rt), copts_, checkpointer_->spare(),
                                                                      device_staging_.get()));
  // Staged: the copies run on; the update that overwrites what they read waits for them.
  if (device_staging_ && !snap.skip && rt.opt) rt.opt->WaitBeforeNextUpdate(device_staging_->copied());
  if (device_staging_ && !snap.skip && rt.par) rt.par->WaitBeforeNextWiden(device_staging_->copied());
  if (rt.par) rt.par->ReleaseWide(device_staging_ && !snap.skip ? device_staging_->copied() : Event{});
  const double t_snap = copts_.clock->Monotonic() - t0 - t_wait;
  ANNEAL_RETURN_IF_ERROR(checkpointer_->Start(std::move(snap)));
  if (!writing_.empty()) {
    log_(Fmt("checkpoint %s committed (written in %.2f s)", PathOf(writing_).c_str(), checkpointer_->last_write_seconds()));
  }
  writing_ = CheckpointName(st->step);
  last_path_ = PathOf(writing_);
  const bool wait = last || !k_.async;
  if (wait) ANNEAL_RETURN_IF_ERROR(checkpointer_->Wait());
  const double dt = copts_.clock->Monotonic() - t0;
  blocked_s_ += dt;
  if (wait) {
    log_(Fmt("checkpoint %s committed (training blocked %.0f ms, written in %.2f s)", last_path_.c_str(), dt * 1e3,
             checkpointer_->last_write_seconds()));
    writing_.clear();
  } else {
    log_(Fmt("checkpoint %s: snapshot taken, training blocked %.0f ms (%.0f ms waiting for the previous write, "
             "%.0f ms copying); writing in the background",
             last_path_.c_str(), dt * 1e3, t_wait * 1e3, t_snap * 1e3));
  }
  return Status::Ok();
}

}  // namespace anneal
