// The training config: a YAML file of sections (model, data, optim, train) with --set key=value
// overrides on dotted keys. Every key has a type and a default (TrainConfig::Spec); unknown keys
// are rejected naming the closest valid key, and the whole config is validated before any work.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/loader.h"
#include "model/config.h"
#include "tensor/dtype.h"
#include "optim/adamw.h"

namespace anneal {

// data.*: where the samples come from (data/channel.h, data/loader.h).
struct DataSection {
  std::string dir;
  std::string mode = "shared";  // data/channel.h
  std::string local_dir;
  int parallel = 4;
  int seq_len = 256;
  int batch_size = 8;
  uint64_t seed = 1;
  bool verify_checksums = true;
  std::string eval_split = "val";  // the split validation reads, in order: val, or train
};

// train.*: the loop and the engine it runs on.
struct LoopSection {
  int steps = 100;
  int grad_accum = 1;
  int log_every = 1;
  int eval_every = 0;  // 0 = only at the end
  int eval_batches = 8;
  int max_bad_steps = 5;
  uint64_t seed = 1234;
  std::string kernels = "cpu";  // cpu | ref | cuda (train.kernels: the backend)
  bool on_gpu() const { return kernels == "cuda"; }  // the kernels' device (train.device is a deprecated alias)
  // The precision policy's working dtype (parameters, gradients, activations); bf16 keeps fp32
  // master weights in the optimizer.
  DType dtype = DType::kF32;
  std::string recompute = "none";  // none | selective | full (model/config.h Recompute)
  bool offload_activations = false;  // layer inputs in host memory (DecoderModel::set_offload)
  int threads = 0;  // 0 = OpenMP's default
  double max_seconds = 0;  // stop (with a checkpoint) after this long; 0 = no limit
  double peak_gflops = 0;  // for MFU; 0 = measure the backend's GEMM at start
  int profile_from = 0, profile_to = 0;  // train.profile_steps (1-based, inclusive); 0 = off
  std::string profile_dir;               // train.profile_dir ("" = $ANNEAL_OUTPUT_DIR/profile or ./profile)
};

// train.checkpoint_* and train.resume: checkpoints (ckpt/checkpoint.h).
struct CheckpointSection {
  int every = 0;  // 0 = only at the end (when dir is set)
  std::string dir;
  std::string resume = "auto";  // auto | none
  std::string init_from;        // a checkpoint or a Hugging Face folder to start a fresh run from (weights only)
  bool async = true;             // write checkpoints on a background thread
  bool hierarchical = false;     // the node leader uploads its local ranks' files
  std::string staging_dir = "/dev/shm";  // node-local folder for the hand-over
  int keep = 0;        // keep the newest K complete checkpoints (0: all)
  int keep_every = 0;  // ... and those whose step is a multiple of M
};

// dist.*: the parallel layout (the world size comes from the environment: comm/rank_contract.h).
struct DistSection {
  int dp = 0;  // 0 = world / (tp * pp)
  int tp = 1, pp = 1;
  int zero = 0;                    // 0, 1, 2, 3 (parallel/data_parallel.h)
  int shard_group = 0;             // ZeRO within groups of this many dp ranks (0 = all of them)
  DType reduce_dtype = DType::kF32;  // what data-parallel gradients are reduced in (bf16: a bf16 model's, as they are)
  std::string schedule = "1f1b";   // pipeline schedule: 1f1b | gpipe (parallel/pipeline.h)
  bool sequence_parallel = false;  // model/config.h ModelShard
  double bucket_mb = 4;            // gradient bucket
  double timeout_s = 300;          // every collective
};

struct TrainConfig {
  ModelConfig model;
  DataSection data;
  AdamWOptions optim;
  LoopSection train;
  CheckpointSection checkpoint;
  DistSection dist;

  // Every key as "section.name" -> its value as text (the resolved config, for manifests).
  std::map<std::string, std::string> values;
  // Lines for the user about deprecated keys the config gave ("train.device is deprecated: ...");
  // the commands print them to stderr, as "anneal: warning: LINE".
  std::vector<std::string> deprecations;
  std::string DeprecationText() const;  // "anneal: warning: LINE\n" for each

  // Parses YAML text, applies overrides ("a.b=v"), validates. Errors name the key (exit 2).
  static Result<TrainConfig> Parse(const std::string& yaml_text, const std::vector<std::string>& overrides,
                                   const std::string& where);
  static Result<TrainConfig> Load(const std::string& path, const std::vector<std::string>& overrides);
  // Every key of `values`, by section in the order of --list-keys, as YAML that Parse reads back to
  // the same values (anneal train --print-config).
  std::string ResolvedYaml() const;
  // The valid keys, for --help and error messages.
  static std::vector<std::string> Keys();
};

// Levenshtein distance (for "did you mean").
size_t EditDistance(const std::string& a, const std::string& b);

}  // namespace anneal
