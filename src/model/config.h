// A decoder model's configuration (any family) and its parameter layout (canonical names and shapes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace anneal {

// Activation recomputation (DecoderModel::set_recompute):
//   kNone       every layer's activations are kept for backward;
//   kSelective  llm.c's "recompute GELU": one (B,T,4C) GELU buffer for all layers, each layer's GELU
//               output recomputed from its input in backward (one GELU pass more);
//   kFull       only each layer's output (the residual stream, (B,T,C) per layer) is kept; backward
//               recomputes the whole layer's forward into one layer's buffers first (one forward more).
enum class Recompute { kNone, kSelective, kFull };
// "none" | "selective" | "full"; nullopt for anything else.
std::optional<Recompute> ParseRecompute(const std::string& name);

struct ModelShard;

// The blocks a family builds its decoder from (model/family.h: the family decides them; the model
// runs whichever it is given, with no family names of its own).
enum class NormKind : uint8_t { kLayerNorm, kRmsNorm };
enum class MlpKind : uint8_t { kGelu, kSwiGlu };  // fc -> GELU -> proj; or down(silu(gate) * up)
struct Blocks {
  NormKind norm = NormKind::kLayerNorm;  // LayerNorm: weight and bias, eps 1e-5; RMSNorm: weight, norm_eps
  bool learned_positions = true;         // wpe added to the token embedding
  bool rotary = false;                   // rotary position embedding on q and k
  MlpKind mlp = MlpKind::kGelu;
  // (Biases are not a block: the model adds one wherever the family lists a bias tensor.)
};

// Llama 3's rotary frequency scaling (transformers' rope_type "llama3"); factor 0 = none.
struct RopeScaling {
  float factor = 0, low_freq_factor = 1, high_freq_factor = 4;
  int original_max_seq_len = 8192;
  bool on() const { return factor > 0; }
};

// A decoder's shape. `family` names the model family (model/family.h: "gpt2", "llama"), which
// decides the blocks, the canonical tensors and the presets; the fields below the first group are
// the Llama family's (GPT-2 keeps them at its fixed values: n_kv_head = n_head, intermediate_size =
// 4 n_embd, tied embeddings).
struct ModelConfig {
  std::string family = "gpt2";
  int vocab_size = 50257;   // V: real tokens
  int padded_vocab = 50304; // Vp: V rounded up to a multiple of 128 (kernels' width; never predicted)
  int max_seq_len = 1024;   // maxT: rows of the position embedding (the longest sequence)
  int n_layer = 12;
  int n_head = 12;
  int n_embd = 768;

  int n_kv_head = 12;           // key/value heads (dividing n_head; 1 = multi-query attention)
  int intermediate_size = 3072; // the MLP's hidden width F
  float norm_eps = 1e-5f;       // RMSNorm's epsilon
  float rope_theta = 10000.0f;  // rotary base
  RopeScaling rope_scaling;
  bool tie_embeddings = true;   // the LM head reads wte (else its own lm_head.weight)
  Blocks blocks;                // set by the family

  // A GPT-2 shape: checks it and fills padded_vocab. Errors name the field and the fix (exit 2).
  static Result<ModelConfig> Make(int vocab_size, int max_seq_len, int n_layer, int n_head, int n_embd);
  // Any family's preset by name ("gpt2" ... "gpt2-xl", "llama-tiny", "llama-3.2-1b", ...).
  static Result<ModelConfig> Preset(const std::string& name);
  // Checks every field for the family (exit 2 naming them) and sets padded_vocab and the blocks.
  Status Finish();
  int head_size() const { return n_embd / n_head; }
  int kv_dim() const { return n_kv_head * head_size(); }  // the width of k and v
  // Canonical (unpadded) parameter count: the number a checkpoint holds.
  size_t NumParams() const;
  // Training FLOPs per token of a (., T) batch: 6 per weight of every matrix product (forward and
  // backward) plus attention's scores and weighted sums, 12 L T C (PaLM's appendix B accounting).
  double FlopsPerToken(int T) const;
  std::string ToString() const;
  // Floats of activations DecoderModel keeps for one (B, T) batch (forward activations, the logits and
  // the backward scratch), exactly what it allocates.
  size_t ActivationFloats(int B, int T, Recompute recompute = Recompute::kNone) const;
  // The same for one shard of the model (tensor slice and pipeline stage) holding `slots` micro-batches'
  // activations at once (a pipeline schedule keeps several in flight).
  // offload (train.offload_activations, full recomputation, one slot): the layers' inputs live in host
  // memory, the device keeps a ring of kOffloadRing of them.
  size_t ActivationFloats(int B, int T, Recompute recompute, const ModelShard& shard, int slots,
                          bool offload = false) const;
  static constexpr int kOffloadRing = 3;
  // padded_vocab rounded up so that it divides evenly into tp slices (a multiple of lcm(128, tp)).
  ModelConfig PaddedFor(int tp) const;
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
  int end(const ModelConfig& c) const { return layer_end < 0 ? c.n_layer : layer_end; }
  bool first() const { return layer_begin == 0; }
  bool seq_parallel() const { return sp && tp > 1; }
  bool last(const ModelConfig& c) const { return end(c) == c.n_layer; }
};

// What a parameter tensor is to the decoder: the model resolves each layer's tensors by role once
// (DecoderModel's LayerParams), the family names them (its canonical names).
enum class Role : uint8_t {
  kEmbedding, kPositions,                                 // wte (V,C), wpe (maxT,C)
  kNorm1W, kNorm1B, kQW, kQB, kKW, kKB, kVW, kVB, kProjW, kProjB,  // attention block
  kNorm2W, kNorm2B, kFcW, kFcB, kUpW, kDownW, kDownB,     // MLP block (fc = GPT-2's fc or Llama's gate)
  kNormFW, kNormFB, kLmHead,                              // final norm, untied LM head (V,C)
  kCount
};

// One parameter tensor: canonical name and shape, the box of it this shard holds, and where that
// lives in the flat buffer. Stored shape equals the box's shape except for wte and lm_head, whose slice is
// stored as (padded_vocab / tp, C) rows with the rows at or past V kept zero.
struct ParamInfo {
  std::string name;
  Role role = Role::kEmbedding;
  int layer = -1;                     // the layer a per-layer tensor belongs to
  std::vector<int64_t> shape;         // canonical (the whole tensor)
  std::vector<int64_t> box_offset;    // the part held: offset and length per canonical dimension
  std::vector<int64_t> box_length;
  std::vector<int64_t> stored_shape;  // in memory
  size_t offset = 0;                  // in floats, into the flat buffer
  size_t stored_size = 0;             // floats in memory
  size_t size = 0;                    // elements of the box (the first `size` stored floats, row-major)
  bool decay = false;                 // weight decay applies (2-D tensors)
  bool replicated = false;            // every rank of the tensor-parallel group holds the same values
  bool tied_copy = false;             // a tied wte on a last stage that is not first (the first owns it)
  // Whether this rank is the one that accounts for (norms) and writes (checkpoints) these values.
  bool owner(const ModelShard& s) const { return !tied_copy && (!replicated || s.tp_rank == 0); }
};

// How a canonical tensor is split over a tensor-parallel group: kept whole on every rank; split by
// output rows (column-parallel weights, their biases); by input columns (row-parallel weights); or
// by vocabulary rows of the padded table (wte, lm_head).
// kKvHeads: key/value projections, split by rows where tp divides n_kv_head, otherwise whole on
// every rank (each rank computes with the one head its query heads read; the gradients are summed
// over the group).
enum class Split : uint8_t { kWhole, kRows, kCols, kVocab, kKvHeads };
// One canonical tensor as a family lists it.
struct TensorSpec {
  std::string name;
  Role role;
  std::vector<int64_t> shape;
  Split split;
};

// The layout of every parameter in one flat buffer, in the family's canonical order (model/family.h:
// the first stage's embeddings, each layer's tensors, the last stage's final norm and head). GPT-2's:
//   wte (Vp,C), wpe (maxT,C), then per layer l: h.l.ln_1.{weight,bias} (C), h.l.attn.{q,k,v}.weight
//   (C,C) and .bias (C), h.l.attn.proj.{weight (C,C), bias}, h.l.ln_2.{weight,bias},
//   h.l.mlp.fc.{weight (4C,C), bias (4C)}, h.l.mlp.proj.{weight (C,4C), bias (C)}; ln_f.{weight,bias}.
// q, k and v are separate canonical tensors (a kernel may fuse them; a checkpoint never does).
// A shard's layout holds the same names in the same order, fewer of them (its layers), each its box.
class ParamLayout {
 public:
  explicit ParamLayout(const ModelConfig& c, const ModelShard& shard = ModelShard::Whole());
  const std::vector<ParamInfo>& params() const { return params_; }
  size_t total_floats() const { return total_; }
  // nullptr if no such name.
  const ParamInfo* Find(const std::string& name) const;
  // Where global layer l's tensors start (l = the shard's end: the last stage's head, or the end).
  size_t LayerOffset(int l) const;

 private:
  // A tensor of canonical `shape`, held as the box (offset, length), stored as `stored`.
  void Add(const TensorSpec& t, int layer, std::vector<int64_t> box_offset, std::vector<int64_t> box_length,
           std::vector<int64_t> stored, bool replicated);
  void AddSplit(const TensorSpec& t, int layer, const ModelConfig& c, const ModelShard& s);
  std::vector<ParamInfo> params_;
  std::vector<size_t> layer_offset_;  // per local layer, then the head's start
  int layer_begin_ = 0;
  size_t total_ = 0;
};

}  // namespace anneal
