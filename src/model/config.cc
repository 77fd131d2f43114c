#include "model/config.h"

#include <algorithm>
#include <numeric>

#include "model/family.h"

namespace anneal {

Result<ModelConfig> ModelConfig::Make(int vocab_size, int max_seq_len, int n_layer, int n_head, int n_embd) {
  ModelConfig c;
  c.vocab_size = vocab_size;
  c.max_seq_len = max_seq_len;
  c.n_layer = n_layer;
  c.n_head = n_head;
  c.n_embd = n_embd;
  ANNEAL_RETURN_IF_ERROR(c.Finish());
  return c;
}

Status ModelConfig::Finish() {
  auto bad = [](const std::string& m) { return InvalidInput("model config: " + m); };
  auto family = FindFamily(this->family);
  if (!family.ok()) return family.status();
  if (vocab_size < 2) return bad("vocab_size must be at least 2 (GPT-2: 50257)");
  if (max_seq_len < 1) return bad("max_seq_len must be at least 1 (GPT-2: 1024)");
  if (n_layer < 1) return bad("n_layer must be at least 1");
  if (n_head < 1) return bad("n_head must be at least 1");
  if (n_embd < 1) return bad("n_embd must be at least 1");
  padded_vocab = (vocab_size + 127) / 128 * 128;
  return (*family)->Finish(this);
}

Result<ModelConfig> ModelConfig::Preset(const std::string& name) {
  for (const ModelFamily* f : Families()) {
    for (const std::string& p : f->PresetNames()) {
      if (p == name) return f->Preset(name);
    }
  }
  return InvalidInput("unknown model preset '" + name + "': use one of " + PresetList());
}

size_t ModelConfig::NumParams() const {
  // The sum of the family's canonical tensors: the number a checkpoint holds.
  const ModelFamily& f = FamilyOf(*this);
  auto count = [](const std::vector<TensorSpec>& ts) {
    size_t n = 0;
    for (const TensorSpec& t : ts) {
      size_t e = 1;
      for (int64_t d : t.shape) e *= static_cast<size_t>(d);
      n += e;
    }
    return n;
  };
  size_t n = count(f.EmbeddingTensors(*this)) + count(f.HeadTensors(*this));
  for (int l = 0; l < n_layer; ++l) n += count(f.LayerTensors(*this, l));
  return n;
}

double ModelConfig::FlopsPerToken(int T) const {
  // llm.c's accounting: 6 per parameter (a tied wte is the LM head's matrix; an untied model's
  // embedding table is a lookup and does not count) plus 6 L C T for the causal attention products.
  double n = static_cast<double>(NumParams());
  if (!tie_embeddings) n -= static_cast<double>(vocab_size) * n_embd;
  return 6.0 * n + 6.0 * n_layer * n_embd * static_cast<double>(T);
}

std::optional<Recompute> ParseRecompute(const std::string& name) {
  if (name == "none") return Recompute::kNone;
  if (name == "selective") return Recompute::kSelective;
  if (name == "full") return Recompute::kFull;
  return std::nullopt;
}

size_t ModelConfig::ActivationFloats(int B, int T, Recompute recompute) const {
  return ActivationFloats(B, T, recompute, ModelShard::Whole(), 1);
}

ModelConfig ModelConfig::PaddedFor(int tp) const {
  ModelConfig c = *this;
  const int64_t unit = std::lcm<int64_t>(128, std::max(1, tp));
  c.padded_vocab = static_cast<int>((vocab_size + unit - 1) / unit * unit);
  return c;
}

size_t ModelConfig::ActivationFloats(int B, int T, Recompute recompute, const ModelShard& s, int slots,
                                     bool offload) const {
  // Mirrors DecoderModel::EnsureSlot / AllocLayers. Per slot: the stage input (N C), every local
  // layer's output (N C each), and on the last stage the final norm's output (N C), its statistics
  // (2N LayerNorm, N RMSNorm), the logits slice (N Vp/tp) and the losses (N).
  const bool rms = blocks.norm == NormKind::kRmsNorm, swiglu = blocks.mlp == MlpKind::kSwiGlu;
  const size_t N = static_cast<size_t>(B) * T, C = n_embd, tp = s.tp, H = n_head / tp;
  const bool kv_replicated = tp > 1 && n_kv_head % tp != 0;  // DecoderModel: one head per rank, all held
  const size_t Cl = C / tp, Ckvl = kv_replicated ? head_size() : static_cast<size_t>(kv_dim()) / tp;
  const size_t Fl = intermediate_size / tp;
  const size_t Vl = padded_vocab / tp;
  const size_t R = s.seq_parallel() ? N / tp : N;  // rows of the residual stream held
  const size_t L = static_cast<size_t>(s.end(*this) - s.layer_begin);
  const size_t stats = rms ? 1 : 2;  // per row of a norm: rstd (and the mean)
  // per layer: ln1 attproj resid2 ln2 fcproj (5 RC), q atty (2 N Cl), k v (2 N Ckv/tp), fch (N Fl),
  // SwiGLU's up (N Fl), the activation (GELU or SwiGLU) output (N Fl), 2 norms' statistics, N H
  // of log-sum-exp
  const size_t act = N * Fl;
  const size_t per_layer_no_act = 5 * R * C + 2 * N * Cl + 2 * N * Ckvl + N * Fl + (swiglu ? N * Fl : 0) +
                                  2 * stats * R + N * H;
  const size_t kept = offload ? std::min<size_t>(L, kOffloadRing) : L;  // layer outputs on the device
  size_t per_slot = R * C + kept * R * C;
  if (s.last(*this)) per_slot += R * C + stats * R + N * Vl + N;
  size_t layers = 0;  // per-layer buffers, all slots together
  switch (recompute) {
    case Recompute::kNone:
      layers = slots * L * (per_layer_no_act + act);
      break;
    case Recompute::kSelective:  // one activation-output buffer shared by every layer and slot
      layers = slots * L * per_layer_no_act + act;
      break;
    case Recompute::kFull:  // one layer's buffers shared by every slot, rebuilt in backward
      layers = per_layer_no_act + act;
      break;
  }
  // backward scratch (shared): dresidual (R C), dln (N C), dq datty (2 N Cl), dk dv (2 N Ckv/tp),
  // dfch dfch_gelu (2 N Fl), SwiGLU's dup (N Fl); sequence parallel: the gathered rows (N C), dln's
  // own rows (R C), the norm's weight gradients (2 C); vocabulary-parallel loss: 2 N doubles of this
  // rank's row statistics and 2 N tp gathered (as floats x2)
  size_t scratch = R * C + N * C + 2 * N * Cl + 2 * N * Ckvl + 2 * N * Fl + (swiglu ? N * Fl : 0);
  if (s.seq_parallel()) scratch += N * C + R * C + 2 * C;
  if (kv_replicated) scratch += 2 * static_cast<size_t>(kv_dim()) * C;  // the k and v weight gradients (no biases)
  if (tp > 1 && s.last(*this)) scratch += 2 * (2 * N + 2 * N * tp);
  return slots * per_slot + layers + scratch;
}

size_t ModelConfig::TrainingBytes(int B, int T, Recompute recompute) const {
  const size_t V = vocab_size, Vp = padded_vocab, C = n_embd;
  const size_t stored = NumParams() + (Vp - V) * C * (tie_embeddings ? 1 : 2);  // padded wte (and lm_head)
  return 4 * (4 * stored + ActivationFloats(B, T, recompute));
}

std::string ModelConfig::ToString() const {
  return FamilyOf(*this).Describe(*this) + " V=" + std::to_string(vocab_size) + " (padded " +
         std::to_string(padded_vocab) + ") maxT=" + std::to_string(max_seq_len) + ", " + std::to_string(NumParams()) +
         " parameters";
}

ParamLayout::ParamLayout(const ModelConfig& c, const ModelShard& s) : layer_begin_(s.layer_begin) {
  const ModelFamily& f = FamilyOf(c);
  const std::vector<TensorSpec> emb = f.EmbeddingTensors(c);
  // The token embedding: on the first stage; a tied LM head reads it, so a last stage that is not
  // first holds a copy whose gradient is summed with the first stage's.
  if (s.first() || (s.last(c) && c.tie_embeddings)) {
    AddSplit(emb[0], -1, c, s);
    params_.back().tied_copy = !s.first();
  }
  if (s.first()) {
    for (size_t i = 1; i < emb.size(); ++i) AddSplit(emb[i], -1, c, s);
  }
  for (int l = s.layer_begin; l < s.end(c); ++l) {
    layer_offset_.push_back(total_);
    for (const TensorSpec& t : f.LayerTensors(c, l)) AddSplit(t, l, c, s);
  }
  layer_offset_.push_back(total_);
  if (s.last(c)) {
    for (const TensorSpec& t : f.HeadTensors(c)) AddSplit(t, -1, c, s);
  }
}

size_t ParamLayout::LayerOffset(int l) const { return layer_offset_.at(static_cast<size_t>(l - layer_begin_)); }

void ParamLayout::AddSplit(const TensorSpec& t, int layer, const ModelConfig& c, const ModelShard& s) {
  const int64_t tp = s.tp, r = s.tp_rank;
  const std::vector<int64_t>& sh = t.shape;
  switch (t.split) {
    case Split::kWhole:
      return Add(t, layer, std::vector<int64_t>(sh.size(), 0), sh, sh, /*replicated=*/true);
    case Split::kKvHeads:
      if (c.n_kv_head % tp != 0) return Add(t, layer, std::vector<int64_t>(sh.size(), 0), sh, sh, /*replicated=*/true);
      [[fallthrough]];
    case Split::kRows: {  // output rows split: (R/tp, ...)
      std::vector<int64_t> off(sh.size(), 0), len = sh;
      off[0] = r * (sh[0] / tp);
      len[0] = sh[0] / tp;
      return Add(t, layer, off, len, len, tp == 1);
    }
    case Split::kCols:  // input columns split: (R, W/tp)
      return Add(t, layer, {0, r * (sh[1] / tp)}, {sh[0], sh[1] / tp}, {sh[0], sh[1] / tp}, tp == 1);
    case Split::kVocab: {
      // Vocabulary rows [r*Vl, (r+1)*Vl) of the padded table; the canonical box is the real ones.
      const int64_t V = sh[0], Vl = c.padded_vocab / tp;
      const int64_t lo = std::min(V, r * Vl), hi = std::min(V, (r + 1) * Vl);
      return Add(t, layer, {lo, 0}, {hi - lo, sh[1]}, {Vl, sh[1]}, tp == 1);
    }
  }
}

void ParamLayout::Add(const TensorSpec& t, int layer, std::vector<int64_t> box_offset, std::vector<int64_t> box_length,
                      std::vector<int64_t> stored, bool replicated) {
  ParamInfo p;
  p.name = t.name;
  p.role = t.role;
  p.layer = layer;
  p.size = 1;
  for (auto d : box_length) p.size *= static_cast<size_t>(d);
  p.stored_size = 1;
  for (auto d : stored) p.stored_size *= static_cast<size_t>(d);
  p.decay = t.shape.size() >= 2;
  p.replicated = replicated;
  p.shape = t.shape;
  p.box_offset = std::move(box_offset);
  p.box_length = std::move(box_length);
  p.stored_shape = std::move(stored);
  p.offset = total_;
  total_ += p.stored_size;
  params_.push_back(std::move(p));
}

const ParamInfo* ParamLayout::Find(const std::string& name) const {
  for (const auto& p : params_) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

}  // namespace anneal
