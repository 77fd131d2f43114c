// Checkpoints (docs/formats/checkpoint.md): a folder step-NNNNNNNN/ holding shard files and, written
// LAST, manifest.json. A folder without a readable manifest does not exist as a checkpoint; resume
// takes the newest complete one found by listing. Tensors are stored under canonical names and
// shapes (q, k, v separate; vocabulary unpadded); the manifest lists, per tensor, its parts: each a
// file, the box (offset, length per dimension) it covers and, for ZeRO shards, the range of the
// box's row-major elements held. Every rank writes its own slices in parallel (CheckpointWriters);
// rank 0 gathers their sizes and checksums and writes the manifest last. Any layout loads any
// checkpoint: a rank reads, from whichever parts overlap them, exactly the boxes it holds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/env.h"
#include "core/status.h"
#include "data/sampler.h"
#include "dist/communicator.h"
#include "dist/process_groups.h"
#include "model/gpt.h"
#include "optim/adamw.h"
#include "parallel/plan.h"

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
};

// The ranks that write one checkpoint together: every rank of the job; comm == nullptr: this
// process alone. Every member calls SaveCheckpoint with its own model shard and optimizer (whose
// shard is [opt->begin(), opt->end()) of its flat buffer).
//   parameters (and, without ZeRO, the moments): data-parallel rank 0 of each (stage, tensor slice)
//     writes the boxes it owns (ParamInfo::owner: replicated tensors from tensor rank 0, the tied
//     wte from the first stage) to model.safetensors (one rank) or model-ppPP-tpTT.safetensors;
//   with ZeRO every rank writes its optimizer shard, as ranges of boxes, to optim-RRRRR-of-NNNNN.
// Without a plan the ranks are a plain data-parallel group, each holding the whole model.
struct CheckpointWriters {
  Communicator* comm = nullptr;
  int zero = 0;  // 0: optimizer state replicated (rank 0 writes it); 1, 2: each rank its shard
  const ParallelPlan* plan = nullptr;
  const ProcessGroups* groups = nullptr;
};

// "step-00000042"
std::string CheckpointName(int step);

// Writes dir/step-NNNNNNNN/ (shard files, then manifest.json). Refuses to touch a complete
// checkpoint already there (returns Ok without writing: same step, same run). opt may be null
// (weights only). With writers.comm, a collective: every rank of the group must call it.
Status SaveCheckpoint(Env& env, const std::string& dir, const GptModel& model, const AdamW* opt,
                      const TrainerState& state, const CheckpointLineage& lineage,
                      const CheckpointWriters& writers = {});

// The newest complete checkpoint folder under dir (by step), or nullopt when there is none.
Result<std::optional<std::string>> FindNewestCheckpoint(Env& env, const std::string& dir);

// The model config a checkpoint was saved with (for anneal sample).
Result<GptConfig> ReadCheckpointModelConfig(Env& env, const std::string& ckpt);

// Loads weights (and moments and trainer state when opt/state are given) from a checkpoint folder.
// The optimizer receives the moments of its own shard [opt->begin(), opt->end()), assembled from
// whatever parts the writers held. Verifies the sizes and checksums of the files it reads, that the
// model's shape matches and that every needed element is present; errors name the problem and the
// fix (exit 2).
Status LoadCheckpoint(Env& env, const std::string& ckpt, GptModel* model, AdamW* opt, TrainerState* state);

}  // namespace anneal
