#include "model/config.h"

#include <algorithm>
#include <numeric>

namespace anneal {

Result<GptConfig> GptConfig::Make(int vocab_size, int max_seq_len, int n_layer, int n_head, int n_embd) {
  auto bad = [](const std::string& m) { return InvalidInput("model config: " + m); };
  if (vocab_size < 2) return bad("vocab_size must be at least 2 (GPT-2: 50257)");
  if (max_seq_len < 1) return bad("max_seq_len must be at least 1 (GPT-2: 1024)");
  if (n_layer < 1) return bad("n_layer must be at least 1");
  if (n_head < 1) return bad("n_head must be at least 1");
  if (n_embd < 1) return bad("n_embd must be at least 1");
  if (n_embd % n_head != 0) {
    return bad("n_embd " + std::to_string(n_embd) + " is not divisible by n_head " + std::to_string(n_head) +
               ": choose n_head dividing n_embd (e.g. n_embd " + std::to_string(n_embd - n_embd % n_head) + ")");
  }
  GptConfig c;
  c.vocab_size = vocab_size;
  c.padded_vocab = (vocab_size + 127) / 128 * 128;
  c.max_seq_len = max_seq_len;
  c.n_layer = n_layer;
  c.n_head = n_head;
  c.n_embd = n_embd;
  return c;
}

Result<GptConfig> GptConfig::Preset(const std::string& name) {
  if (name == "gpt2") return Make(50257, 1024, 12, 12, 768);
  if (name == "gpt2-medium") return Make(50257, 1024, 24, 16, 1024);
  if (name == "gpt2-large") return Make(50257, 1024, 36, 20, 1280);
  if (name == "gpt2-xl") return Make(50257, 1024, 48, 25, 1600);
  return InvalidInput("unknown model preset '" + name + "': use gpt2, gpt2-medium, gpt2-large or gpt2-xl");
}

size_t GptConfig::NumParams() const {
  const size_t V = vocab_size, T = max_seq_len, L = n_layer, C = n_embd;
  // wte, wpe, per layer: 2 LN (4C) + qkv (3C^2 + 3C) + proj (C^2 + C) + fc (4C^2 + 4C) + proj (4C^2 + C), ln_f.
  return V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C;
}

std::optional<Recompute> ParseRecompute(const std::string& name) {
  if (name == "none") return Recompute::kNone;
  if (name == "selective") return Recompute::kSelective;
  if (name == "full") return Recompute::kFull;
  return std::nullopt;
}

size_t GptConfig::ActivationFloats(int B, int T, Recompute recompute) const {
  return ActivationFloats(B, T, recompute, ModelShard::Whole(), 1);
}

GptConfig GptConfig::PaddedFor(int tp) const {
  GptConfig c = *this;
  const int64_t unit = std::lcm<int64_t>(128, std::max(1, tp));
  c.padded_vocab = static_cast<int>((vocab_size + unit - 1) / unit * unit);
  return c;
}

size_t GptConfig::ActivationFloats(int B, int T, Recompute recompute, const ModelShard& s, int slots) const {
  // Mirrors GptModel::EnsureSlot / EnsureScratch. Per slot: the stage input (N C), every local
  // layer's output (N C each), and on the last stage lnf (N C), its statistics (2N), the logits
  // slice (N Vp/tp) and the losses (N). Per layer kept (every slot, or one shared layer under full
  // recomputation): ln1, resid2, ln2, fcproj... (see PerLayer).
  const size_t N = static_cast<size_t>(B) * T, C = n_embd, tp = s.tp, H = n_head / tp;
  const size_t Cl = C / tp, Fl = 4 * C / tp, Vl = padded_vocab / tp;
  const size_t R = s.seq_parallel() ? N / tp : N;  // rows of the residual stream held
  const size_t L = static_cast<size_t>(s.end(*this) - s.layer_begin);
  // per layer: ln1 attproj resid2 ln2 fcproj (5 RC), q k v atty (4 N Cl), fch (N Fl), fch_gelu (N Fl),
  // 4 R of LayerNorm statistics, N H of log-sum-exp
  const size_t gelu = N * Fl;
  const size_t per_layer_no_gelu = 5 * R * C + 4 * N * Cl + N * Fl + 4 * R + N * H;
  size_t per_slot = R * C + L * R * C;
  if (s.last(*this)) per_slot += R * C + 2 * R + N * Vl + N;
  size_t layers = 0;  // per-layer buffers, all slots together
  switch (recompute) {
    case Recompute::kNone:
      layers = slots * L * (per_layer_no_gelu + gelu);
      break;
    case Recompute::kSelective:  // one GELU buffer shared by every layer and slot
      layers = slots * L * per_layer_no_gelu + gelu;
      break;
    case Recompute::kFull:  // one layer's buffers shared by every slot, rebuilt in backward
      layers = per_layer_no_gelu + gelu;
      break;
  }
  // backward scratch (shared): dresidual (R C), dln (N C), dq dk dv datty (4 N Cl), dfch dfch_gelu
  // (2 N Fl); sequence parallel: the gathered rows (N C), dln's own rows (R C), LayerNorm gradients
  // (2 C); vocabulary-parallel loss: 2 N doubles of this rank's row statistics and 2 N tp gathered
  // (as floats x2)
  size_t scratch = R * C + N * C + 4 * N * Cl + 2 * N * Fl;
  if (s.seq_parallel()) scratch += N * C + R * C + 2 * C;
  if (tp > 1 && s.last(*this)) scratch += 2 * (2 * N + 2 * N * tp);
  return slots * per_slot + layers + scratch;
}

size_t GptConfig::TrainingBytes(int B, int T, Recompute recompute) const {
  const size_t V = vocab_size, Vp = padded_vocab, C = n_embd;
  const size_t stored = NumParams() + (Vp - V) * C;
  return 4 * (4 * stored + ActivationFloats(B, T, recompute));
}

std::string GptConfig::ToString() const {
  return "GPT-2 L=" + std::to_string(n_layer) + " H=" + std::to_string(n_head) + " C=" + std::to_string(n_embd) +
         " V=" + std::to_string(vocab_size) + " (padded " + std::to_string(padded_vocab) + ") maxT=" +
         std::to_string(max_seq_len) + ", " + std::to_string(NumParams()) + " parameters";
}

ParamLayout::ParamLayout(const GptConfig& c, const ModelShard& s) {
  const int64_t V = c.vocab_size, Vp = c.padded_vocab, T = c.max_seq_len, C = c.n_embd;
  const int64_t tp = s.tp, r = s.tp_rank;
  const int64_t Vl = Vp / tp;  // vocabulary rows per slice
  auto whole = [&](const std::string& name, std::vector<int64_t> shape) {
    Add(name, shape, std::vector<int64_t>(shape.size(), 0), shape, shape, /*replicated=*/true);
  };
  auto rows = [&](const std::string& name, int64_t R, int64_t W) {  // output rows split: (R/tp, W)
    Add(name, {R, W}, {r * (R / tp), 0}, {R / tp, W}, {R / tp, W}, tp == 1);
  };
  auto vec = [&](const std::string& name, int64_t R) { Add(name, {R}, {r * (R / tp)}, {R / tp}, {R / tp}, tp == 1); };
  auto cols = [&](const std::string& name, int64_t R, int64_t W) {  // input columns split: (R, W/tp)
    Add(name, {R, W}, {0, r * (W / tp)}, {R, W / tp}, {R, W / tp}, tp == 1);
  };
  if (s.first() || s.last(c)) {
    // Vocabulary rows [r*Vl, (r+1)*Vl) of the padded table; the canonical box is the real ones.
    const int64_t lo = std::min(V, r * Vl), hi = std::min(V, (r + 1) * Vl);
    Add("wte.weight", {V, C}, {lo, 0}, {hi - lo, C}, {Vl, C}, tp == 1);
    params_.back().tied_copy = !s.first();
  }
  if (s.first()) whole("wpe.weight", {T, C});
  for (int l = s.layer_begin; l < s.end(c); ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    whole(p + "ln_1.weight", {C});
    whole(p + "ln_1.bias", {C});
    for (const char* x : {"q", "k", "v"}) {
      rows(p + "attn." + x + ".weight", C, C);
      vec(p + "attn." + x + ".bias", C);
    }
    cols(p + "attn.proj.weight", C, C);
    whole(p + "attn.proj.bias", {C});
    whole(p + "ln_2.weight", {C});
    whole(p + "ln_2.bias", {C});
    rows(p + "mlp.fc.weight", 4 * C, C);
    vec(p + "mlp.fc.bias", 4 * C);
    cols(p + "mlp.proj.weight", C, 4 * C);
    whole(p + "mlp.proj.bias", {C});
  }
  if (s.last(c)) {
    whole("ln_f.weight", {C});
    whole("ln_f.bias", {C});
  }
}

void ParamLayout::Add(const std::string& name, std::vector<int64_t> shape, std::vector<int64_t> box_offset,
                      std::vector<int64_t> box_length, std::vector<int64_t> stored, bool replicated) {
  ParamInfo p;
  p.name = name;
  p.size = 1;
  for (auto d : box_length) p.size *= static_cast<size_t>(d);
  p.stored_size = 1;
  for (auto d : stored) p.stored_size *= static_cast<size_t>(d);
  p.decay = shape.size() >= 2;
  p.replicated = replicated;
  p.shape = std::move(shape);
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
