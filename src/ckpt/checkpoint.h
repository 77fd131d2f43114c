// Checkpoints (docs/formats/checkpoint.md): a prefix step-NNNNNNNN/ in an ObjectStore (a folder, or
// s3://) holding attempt-A/ shard files and, written LAST, manifest.json. A prefix without a readable
// manifest does not exist as a checkpoint; resume takes the newest complete one found by listing.
// Tensors are stored under canonical names and shapes (q, k, v separate; vocabulary unpadded); the
// manifest lists, per tensor, its parts: each a file, the box (offset, length per dimension) it
// covers and, for ZeRO shards, the range of the box's row-major elements held. Every rank writes its
// own slices in parallel (CheckpointWriters) and a record of them; rank 0 collects the records
// through the store and writes the manifest last. Any layout loads any checkpoint: a rank reads,
// from whichever parts overlap them, exactly the boxes it holds.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <thread>
#include <utility>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "data/sampler.h"
#include "ckpt/checkpoint_tensors.h"
#include "core/clock.h"
#include "ckpt/snapshot_staging.h"
#include "parallel/plan.h"
#include "storage/object_store.h"

namespace anneal {

inline constexpr const char* kCheckpointFormat = "anneal.checkpoint";
inline constexpr int kCheckpointVersion = 2;  // 1 (whole tensors, one "file" per tensor) is still read

struct TrainerState {
  int step = 0;          // optimizer steps completed
  int updates = 0;       // AdamW updates applied (bias correction); differs from step after skips
  int bad_steps = 0;     // non-finite steps in a row
  uint64_t skipped_total = 0;
  LoaderPosition loader;
};

struct CheckpointLineage {
  std::string config_json;   // the resolved training config
  std::string dataset_dir;
  std::string dataset_hash;  // dataset.json inputs_hash
  std::string dataset_tokenizer;  // dataset.json tokenizer ("" for a plain llm.c folder)
};

// The ranks that write one checkpoint together: every rank of the job (rank, ranks: the world).
// Every member snapshots its own tensors (CheckpointTensors: its model shard's, and its optimizer's
// moments of [begin, end) of its flat buffer).
//   parameters (and, without ZeRO, the moments): data-parallel rank 0 of each (stage, tensor slice)
//     writes the boxes it owns (ParamInfo::owner: replicated tensors from tensor rank 0, the tied
//     wte from the first stage) to model.safetensors (one rank) or model-ppPP-tpTT.safetensors;
//   with ZeRO every rank writes its optimizer shard, as ranges of boxes, to optim-RRRRR-of-NNNNN;
//   with ZeRO-3 also its range of the parameters, to model-RRRRR-of-NNNNN (and rank 0 no whole boxes).
// Without a plan the ranks are a plain data-parallel group, each holding the whole model.
struct CheckpointWriters {
  int rank = 0, ranks = 1;
  int zero = 0;  // 0: optimizer state replicated (rank 0 writes it); 1, 2, 3: each rank its shard
  const ParallelPlan* plan = nullptr;
  // ZeRO-3: the parameters too, each rank its range of them (model-RRRRR-of-NNNNN.safetensors),
  // instead of data-parallel rank 0 writing whole boxes.
  bool params_sharded = false;
};

struct CheckpointOptions {
  int attempt = 0;           // the job's attempt (RankContract::attempt): files go under attempt-A/
  double wait_s = 600;       // rank 0 waits this long for every rank's files before giving up
  int keep_last = 0;         // retention after each commit: the newest K complete checkpoints (0: all)
  int keep_every = 0;        // ... and every one whose step is a multiple of M (0: none extra)
  // Hierarchical upload: the ranks of one instance hand their files to local rank 0 (the node
  // leader) through `staging` (a node-local store, e.g. a folder in /dev/shm), and only the leader
  // talks to the checkpoint store. Null: every rank uploads its own files.
  ObjectStore* staging = nullptr;
  int local_rank = 0, local_world = 1;
  Clock* clock = &Clock::Real();  // the waits above (tests: a SimulatedClock)
};

// "step-00000042"
std::string CheckpointName(int step);

// A checkpoint location: a folder or file:// URI, or s3://bucket/prefix (storage/object_store.h).
Result<std::unique_ptr<ObjectStore>> OpenCheckpointStore(const std::string& dir_or_uri);

// One rank's part of a checkpoint, copied to host memory: its file images, ready to write. Taking it
// is what training waits for; writing it can happen on another thread while training goes on. With
// a SnapshotStaging (a device the host cannot read) the copies are still in flight when it is
// taken: FinishSnapshot, on the writer's thread, waits for them and serializes the files.
struct CheckpointSnapshot {
  std::string name;  // step-NNNNNNNN
  int step = 0, rank = 0, ranks = 1, attempt = 0;
  bool skip = false;  // a complete checkpoint of this step exists already: nothing to write
  std::vector<std::pair<std::string, std::string>> files;  // name (attempt-A/...), image
  std::string manifest;  // rank 0: the manifest without "files" (filled in from every rank's record)
  std::function<Status(CheckpointSnapshot*)> finish;  // fills `files` once staged copies are done
  uint64_t bytes() const;
};
// spare: file buffers of an earlier snapshot to reuse (AsyncCheckpointer::spare()); may be null.
// staging: queue the device-to-host copies there instead of copying now (ckpt/snapshot_staging.h);
// the caller then makes the optimizer's next update wait for staging->copied() (the values copied
// must not change until then) and hands the snapshot to a writer, which calls FinishSnapshot.
Result<CheckpointSnapshot> SnapshotCheckpoint(ObjectStore& store, const CheckpointTensors& t,
                                              const TrainerState& state, const CheckpointLineage& lineage,
                                              const CheckpointWriters& writers, const CheckpointOptions& o,
                                              std::vector<std::string>* spare = nullptr,
                                              SnapshotStaging* staging = nullptr);
// Waits for a staged snapshot's copies and serializes its files (a no-op for one taken without staging).
Status FinishSnapshot(CheckpointSnapshot* snap);
// The sizes of this rank's file images (AsyncCheckpointer::Reserve).
std::vector<size_t> CheckpointImageSizes(const CheckpointTensors& t, const CheckpointWriters& writers);
// Writes the snapshot's files, then this rank's record step-N/attempt-A/done-RRRRR.json (names,
// sizes, XXH64). Rank 0 then waits (at most o.wait_s) for every rank's record, writes manifest.json
// LAST, and applies retention. Until the manifest is there the checkpoint does not exist, whatever
// else happened (a killed writer, a dropped connection, a full disk, an earlier attempt's writer).
// Thread-safe with respect to the training thread (it touches only the snapshot and the store).
Status WriteSnapshot(ObjectStore& store, const CheckpointSnapshot& snap, const CheckpointOptions& o);
// Both, now (every rank of writers calls it).
Status SaveCheckpoint(ObjectStore& store, const CheckpointTensors& t, const TrainerState& state,
                      const CheckpointLineage& lineage, const CheckpointWriters& writers = {},
                      const CheckpointOptions& o = {});

// Writes snapshots on a background thread, one at a time: Start waits for the previous one (and
// returns its error), then hands the new one over. The destructor waits too. A written snapshot's
// buffers are kept (spare()) for the next snapshot, so taking one faults in no fresh memory.
class AsyncCheckpointer {
 public:
  AsyncCheckpointer(ObjectStore* store, CheckpointOptions o) : store_(store), o_(o) {}
  ~AsyncCheckpointer();
  Status Start(CheckpointSnapshot snap);
  Status Wait();
  double last_write_seconds() const { return write_s_; }
  // Call after Wait() (no write in flight).
  std::vector<std::string>* spare() { return &spare_; }
  // Allocates (and faults in) buffers of these sizes on the background thread, for the first
  // snapshot (CheckpointImageSizes); training goes on meanwhile.
  void Reserve(std::vector<size_t> sizes);

 private:
  ObjectStore* store_;
  CheckpointOptions o_;
  std::thread thread_;
  CheckpointSnapshot done_;  // the snapshot being written (kept for its buffers)
  std::vector<std::string> spare_;
  Status status_;
  double write_s_ = 0;
};

// The newest complete checkpoint (by step) found by listing, or nullopt.
Result<std::optional<std::string>> FindNewestCheckpoint(ObjectStore& store);

struct CheckpointListing {
  std::string name;
  int step = 0;
  bool complete = false;  // has a manifest
  int attempt = -1;       // the manifest's
  uint64_t bytes = 0;     // every object under the prefix
  int objects = 0;
};
Result<std::vector<CheckpointListing>> ListCheckpoints(ObjectStore& store);
// Every file the manifest lists is present with its size and XXH64, and every tensor's parts cover
// it exactly once. The error lists every problem found (exit 2).
Status VerifyCheckpoint(ObjectStore& store, const std::string& name);
// The manifest first (the checkpoint stops existing at once), then everything under its prefix.
Status DeleteCheckpoint(ObjectStore& store, const std::string& name);

// Loads weights only into t (its parameters; no optimizer state, no trainer state): from checkpoint
// `name`, or from `whole`, the canonical parameters of a model of config `source` (a Hugging Face
// folder read by ckpt/hf_folder.h) in the whole model's ParamLayout, each rank taking its boxes. The
// source model must be t's (the same family and shape: exit 2 naming both otherwise).
Status LoadWeights(ObjectStore& store, const std::string& name, CheckpointTensors t);
Status LoadWeights(const ModelConfig& source, const std::vector<float>& whole, const CheckpointTensors& t,
                   const std::string& what);

// A checkpoint named on a command line: a step-NNNNNNNN folder (or prefix), or a checkpoint_dir whose
// newest complete checkpoint is meant. Errors say what to give instead (exit 2).
struct CheckpointRef {
  std::unique_ptr<ObjectStore> store;
  std::string name;
};
Result<CheckpointRef> ResolveCheckpoint(const std::string& path);

// The model config a checkpoint was saved with (for anneal sample).
Result<ModelConfig> ReadCheckpointModelConfig(ObjectStore& store, const std::string& name);

// The tokenizer a command uses with checkpoint `name`: `given` when not empty, else the tokenizer of
// the dataset the checkpoint was trained on (its lineage), else — the manifest does not say: a plain
// llm.c folder, an import, a checkpoint older than the field — gpt2.
Result<std::string> TokenizerOfCheckpoint(const std::string& given, ObjectStore& store, const std::string& name);

// Loads weights (and moments when t has optimizer state, and the trainer state when given) from
// checkpoint `name`. The moments are those of t's range [begin, end), assembled from whatever parts
// the writers held; only the files holding a needed part are fetched. Verifies the
// sizes and checksums of the files it reads, that the model's shape matches and that every needed
// element is present; errors name the problem and the fix (exit 2).
Status LoadCheckpoint(ObjectStore& store, const std::string& name, const CheckpointTensors& t, TrainerState* state);

}  // namespace anneal
