// Checkpoints (docs/formats/checkpoint.md): a folder step-NNNNNNNN/ holding shard files and, written
// LAST, manifest.json. A folder without a readable manifest does not exist as a checkpoint; resume
// takes the newest complete one found by listing. Tensors are stored under canonical names and
// shapes (q, k, v separate; vocabulary unpadded), each with the box it holds (the whole tensor in a
// one-process run), so later layouts can load any part.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/env.h"
#include "core/status.h"
#include "data/sampler.h"
#include "model/gpt.h"
#include "optim/adamw.h"

namespace anneal {

inline constexpr const char* kCheckpointFormat = "anneal.checkpoint";
inline constexpr int kCheckpointVersion = 1;

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

// "step-00000042"
std::string CheckpointName(int step);

// Writes dir/step-NNNNNNNN/ (model.safetensors, then manifest.json). Refuses to touch a complete
// checkpoint already there (returns Ok without writing: same step, same run). opt may be null
// (weights only).
Status SaveCheckpoint(Env& env, const std::string& dir, const GptModel& model, const AdamW* opt,
                      const TrainerState& state, const CheckpointLineage& lineage);

// The newest complete checkpoint folder under dir (by step), or nullopt when there is none.
Result<std::optional<std::string>> FindNewestCheckpoint(Env& env, const std::string& dir);

// The model config a checkpoint was saved with (for anneal sample).
Result<GptConfig> ReadCheckpointModelConfig(Env& env, const std::string& ckpt);

// Loads weights (and moments and trainer state when opt/state are given) from a checkpoint folder.
// Verifies file sizes and checksums and that the model's shape matches; errors name the problem and
// the fix (exit 2).
Status LoadCheckpoint(Env& env, const std::string& ckpt, GptModel* model, AdamW* opt, TrainerState* state);

}  // namespace anneal
