// The trainer's first part: the runtime of one rank built from the config, each component from its
// own section (torchtitan's order): the rank's place in the job and the parallel plan (dist.*), its
// communicators, the data (data.*), the model shard on its backend (model.*, train.*), data
// parallelism, the optimizer (optim.*), the pipeline engine and the step plan, then checkpoints
// (train.checkpoint_*, train/checkpoints.h). The loop (train/trainer.cc) and the report
// (train/report.h) only use it.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "comm/process_groups.h"
#include "comm/rank_contract.h"
#include "comm/rank_groups.h"
#include "core/status.h"
#include "data/loader.h"
#include "model/decoder.h"
#include "optim/adamw.h"
#include "parallel/data_parallel.h"
#include "parallel/memory_plan.h"
#include "parallel/pipeline.h"
#include "parallel/plan.h"
#include "parallel/tensor_parallel.h"
#include "train/config.h"
#include "train/step_plan.h"

namespace anneal {

using LogFn = std::function<void(const std::string&)>;

// The training and validation data of this rank (data.*).
struct TrainData {
  std::string dir;  // the folder the loader reads (a copy with data.mode = file)
  bool remote = false;  // fastfile: read through range reads
  std::unique_ptr<DataLoader> train;
  std::unique_ptr<DataLoader> val;  // null without a val split long enough for one window
};

struct Runtime {
  RankContract re;
  std::unique_ptr<ProcessGroups> pg;
  std::unique_ptr<ParallelPlan> plan;
  ModelShard shard;
  int dp = 1;
  Backend* be = nullptr;
  RankGroups groups;
  std::unique_ptr<CommTensorParallelGroup> tp_group;
  TrainData data;
  std::unique_ptr<TensorParallelLayers> tp_layers;
  std::unique_ptr<DecoderModel> model;
  std::unique_ptr<DataParallel> par;  // null: one replica without ZeRO
  std::unique_ptr<AdamW> opt;
  std::unique_ptr<PipelineEngine> engine;
  std::unique_ptr<StepPlan> step;

  bool first_stage() const { return pg->pp_rank() == 0; }
  bool last_stage() const { return pg->pp_rank() == pg->pp() - 1; }
  // Whether this rank's loss is the one counted: the last stage's first tensor-parallel rank.
  bool loss_owner() const { return last_stage() && pg->tp_rank() == 0; }
  Communicator* world() const { return re.world > 1 ? groups.world() : nullptr; }
};

// Builds everything but checkpoints. Errors name the key to change (exit 2) or the peer that failed
// (exit 3).
Result<std::unique_ptr<Runtime>> SetUpRuntime(const TrainConfig& c);
// One rank of world 1 on `be` without data (its step reads batches of token 0) and without a
// rendezvous: the step cost model's runtime (train/step_cost.h). dist.* must describe one device.
Result<std::unique_ptr<Runtime>> SetUpDeviceModel(const TrainConfig& c, Backend* be);
// The parallel layout of c on `world` ranks (dist.dp, or world / (tp x pp)), validated against the
// model (exit 2 naming the factor): what every rank plans with, and `anneal plan` before any runs.
Result<ParallelPlan> PlanLayout(const TrainConfig& c, int world);
// What the memory formula (parallel/memory_plan.h) needs of c besides the layout.
MemoryInputs MemoryInputsOf(const TrainConfig& c);

// Opens the training split and, when there is one, the validation split.
Result<TrainData> OpenTrainData(const DataSection& d, const RankContract& re, int dp_rank, int dp, uint32_t vocab);

}  // namespace anneal
