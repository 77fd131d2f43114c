// GPT-2 family configuration and parameter layout (canonical names and shapes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace anneal {

// Activation recomputation (GptModel::set_recompute):
//   kNone       every layer's activations are kept for backward;
//   kSelective  llm.c's "recompute GELU": one (B,T,4C) GELU buffer for all layers, each layer's GELU
//               output recomputed from its input in backward (one GELU pass more);
//   kFull       only each layer's output (the residual stream, (B,T,C) per layer) is kept; backward
//               recomputes the whole layer's forward into one layer's buffers first (one forward more).
enum class Recompute { kNone, kSelective, kFull };
// "none" | "selective" | "full"; nullopt for anything else.
std::optional<Recompute> ParseRecompute(const std::string& name);

struct ModelShard;

struct GptConfig {
  int vocab_size = 50257;   // V: real tokens
  int padded_vocab = 50304; // Vp: V rounded up to a multiple of 128 (kernels' width; never predicted)
  int max_seq_len = 1024;   // maxT: rows of the position embedding
  int n_layer = 12;
  int n_head = 12;
  int n_embd = 768;

  // Checks the shape and fills padded_vocab. Errors name the field and the fix (exit 2).
  static Result<GptConfig> Make(int vocab_size, int max_seq_len, int n_layer, int n_head, int n_embd);
  // "gpt2" (124M), "gpt2-medium" (350M), "gpt2-large" (774M), "gpt2-xl" (1.5B).
  static Result<GptConfig> Preset(const std::string& name);
  // Canonical (unpadded) parameter count: the number a checkpoint holds.
  size_t NumParams() const;
  std::string ToString() const;
  // Floats of activations GptModel keeps for one (B, T) batch (forward activations, the logits and
  // the backward scratch), exactly what it allocates.
  size_t ActivationFloats(int B, int T, Recompute recompute = Recompute::kNone) const;
  // The same for one shard of the model (tensor slice and pipeline stage) holding `slots` micro-batches'
  // activations at once (a pipeline schedule keeps several in flight).
  size_t ActivationFloats(int B, int T, Recompute recompute, const ModelShard& shard, int slots) const;
  // padded_vocab rounded up so that it divides evenly into tp slices (a multiple of lcm(128, tp)).
  GptConfig PaddedFor(int tp) const;
  // Bytes to train with AdamW in fp32: parameters, gradients, m and v (padded vocabulary) plus
  // activations for (B, T).
  size_t TrainingBytes(int B, int T, Recompute recompute = Recompute::kNone) const;
};

// The part of the model one rank holds (src/parallel builds it; the model only obeys it):
//   tensor slice tp_rank of tp: q, k, v and mlp.fc split by output rows (heads), attn.proj and
//   mlp.proj by input columns, wte by vocabulary rows (padded_vocab / tp each); LayerNorms, wpe and
//   the biases of the row-split projections are replicated;
//   pipeline stage: the layers [layer_begin, layer_end); the first stage holds the embeddings, the
//   last ln_f and the LM head, which reads wte: a last stage that is not also first holds a tied
//   copy of wte whose gradient is summed with the first stage's.
//   sequence parallelism (sp, with tp > 1): the residual stream, LayerNorms and residual adds keep
//   only this rank's 1/tp of the B*T rows; the column-parallel layers' inputs are all-gathered and
//   the row-parallel outputs reduce-scattered instead of all-reduced (Korthikanti et al.).
struct ModelShard {
  int tp = 1, tp_rank = 0;
  bool sp = false;
  int layer_begin = 0, layer_end = -1;  // -1: to the last layer
  // The whole model on one rank.
  static ModelShard Whole() { return {}; }
  int end(const GptConfig& c) const { return layer_end < 0 ? c.n_layer : layer_end; }
  bool first() const { return layer_begin == 0; }
  bool seq_parallel() const { return sp && tp > 1; }
  bool last(const GptConfig& c) const { return end(c) == c.n_layer; }
};

// One parameter tensor: canonical name and shape, the box of it this shard holds, and where that
// lives in the flat buffer. Stored shape equals the box's shape except for wte, whose slice is
// stored as (padded_vocab / tp, C) rows with the rows at or past V kept zero.
struct ParamInfo {
  std::string name;
  std::vector<int64_t> shape;         // canonical (the whole tensor)
  std::vector<int64_t> box_offset;    // the part held: offset and length per canonical dimension
  std::vector<int64_t> box_length;
  std::vector<int64_t> stored_shape;  // in memory
  size_t offset = 0;                  // in floats, into the flat buffer
  size_t stored_size = 0;             // floats in memory
  size_t size = 0;                    // elements of the box (the first `size` stored floats, row-major)
  bool decay = false;                 // weight decay applies (2-D tensors)
  bool replicated = false;            // every rank of the tensor-parallel group holds the same values
  bool tied_copy = false;             // wte on a last stage that is not first (the first stage owns it)
  // Whether this rank is the one that accounts for (norms) and writes (checkpoints) these values.
  bool owner(const ModelShard& s) const { return !tied_copy && (!replicated || s.tp_rank == 0); }
};

// The layout of every parameter in one flat buffer, in a fixed order:
//   wte (Vp,C), wpe (maxT,C), then per layer l: h.l.ln_1.{weight,bias} (C), h.l.attn.{q,k,v}.weight
//   (C,C) and .bias (C), h.l.attn.proj.{weight (C,C), bias}, h.l.ln_2.{weight,bias},
//   h.l.mlp.fc.{weight (4C,C), bias (4C)}, h.l.mlp.proj.{weight (C,4C), bias (C)}; ln_f.{weight,bias}.
// q, k and v are separate canonical tensors (a kernel may fuse them; a checkpoint never does).
// A shard's layout holds the same names in the same order, fewer of them (its layers), each its box.
class ParamLayout {
 public:
  explicit ParamLayout(const GptConfig& c, const ModelShard& shard = ModelShard::Whole());
  const std::vector<ParamInfo>& params() const { return params_; }
  size_t total_floats() const { return total_; }
  // nullptr if no such name.
  const ParamInfo* Find(const std::string& name) const;

 private:
  // A tensor of canonical `shape`, held as the box (offset, length), stored as `stored`.
  void Add(const std::string& name, std::vector<int64_t> shape, std::vector<int64_t> box_offset,
           std::vector<int64_t> box_length, std::vector<int64_t> stored, bool replicated);
  std::vector<ParamInfo> params_;
  size_t total_ = 0;
};

}  // namespace anneal
