// The trainer's checkpoints (train.checkpoint_*, train.resume): where they go, resuming from the
// newest complete one, and saving — a snapshot to host memory that training waits for (and for the
// previous save still being written), written on the checkpointer's thread (ckpt/checkpoint.h). On
// a GPU the snapshot's copies run on the copy stream while training goes on, and only the next
// optimizer update waits for them (ckpt/snapshot_staging.h).
#pragma once

#include <memory>
#include <string>

#include "ckpt/checkpoint.h"
#include "train/config.h"
#include "train/setup.h"

namespace anneal {

class TrainCheckpoints {
 public:
  // Opens the store (none when k.dir is empty) and, with hierarchical uploads on an instance of
  // several ranks, the node-local staging folder. `lineage` goes into every manifest.
  static Result<std::unique_ptr<TrainCheckpoints>> Open(const CheckpointSection& k, double wait_s, const Runtime& rt,
                                                        CheckpointLineage lineage, LogFn log,
                                                        Clock& clock = Clock::Real());
  bool enabled() const { return store_ != nullptr; }
  // train.resume = auto: loads the newest complete checkpoint into the runtime and the state, and
  // moves the loader to its position. Returns its path, or "" when there is none.
  Result<std::string> Resume(Runtime& rt, TrainerState* st);
  // train.init_from, for a run that did not resume: the weights of a checkpoint or a Hugging Face
  // folder (the optimizer fresh, the step 0). Returns what it loaded, or "" when init_from is empty.
  Result<std::string> InitFrom(Runtime& rt);
  // Saves step st->step (recording the loader's and optimizer's positions in st); `last` waits for
  // the write. A save right after a periodic save of the same step only waits for that one.
  Status Save(Runtime& rt, TrainerState* st, bool last);
  // Faults in the snapshot buffers on the checkpointer's thread while the first steps run (host
  // backends; a staged snapshot serializes on that thread anyway).
  void Reserve(const Runtime& rt);
  const std::string& last_path() const { return last_path_; }
  double blocked_seconds() const { return blocked_s_; }

 private:
  TrainCheckpoints(const CheckpointSection& k, LogFn log) : k_(k), log_(std::move(log)) {}
  std::string PathOf(const std::string& name) const;
  CheckpointWriters Writers(const Runtime& rt) const;

  CheckpointSection k_;
  LogFn log_;
  CheckpointLineage lineage_;
  std::unique_ptr<ObjectStore> store_, staging_;
  CheckpointOptions copts_;
  std::unique_ptr<SnapshotStaging> device_staging_;  // a device the host cannot read (before the writer:
                                                     // destroyed after it)
  std::unique_ptr<AsyncCheckpointer> checkpointer_;
  std::string writing_;  // the checkpoint being written in the background
  std::string last_path_;
  double blocked_s_ = 0;
  int saved_step_ = -1;
};

}  // namespace anneal
