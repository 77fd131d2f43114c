#include "model/config.h"

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
  const size_t N = static_cast<size_t>(B) * T, C = n_embd, L = n_layer, H = n_head, Vp = padded_vocab;
  // per layer: ln1 q k v atty attproj resid2 ln2 fcproj resid3 (10 NC), fch and fch_gelu (8 NC),
  // 4 N of LayerNorm statistics, N*H of log-sum-exp
  const size_t per_layer = 18 * N * C + 4 * N + N * H;
  // encoded, lnf (2 NC) + lnf stats (2N) + logits (N Vp) + losses (N); backward scratch 6 NC + 8 NC
  const size_t rest = 2 * N * C + 3 * N + N * Vp + 14 * N * C;
  switch (recompute) {
    case Recompute::kSelective:  // one shared GELU buffer
      return L * per_layer - (L - 1) * 4 * N * C + rest;
    case Recompute::kFull:  // every layer's output (resid3) kept; one layer's buffers for the rest
      return L * N * C + (per_layer - N * C) + rest;
    case Recompute::kNone:
    default:
      return L * per_layer + rest;
  }
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

ParamLayout::ParamLayout(const GptConfig& c) {
  const int64_t V = c.vocab_size, Vp = c.padded_vocab, T = c.max_seq_len, C = c.n_embd;
  Add("wte.weight", {V, C}, {Vp, C});
  Add("wpe.weight", {T, C}, {T, C});
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    Add(p + "ln_1.weight", {C}, {C});
    Add(p + "ln_1.bias", {C}, {C});
    for (const char* x : {"q", "k", "v"}) {
      Add(p + "attn." + x + ".weight", {C, C}, {C, C});
      Add(p + "attn." + x + ".bias", {C}, {C});
    }
    Add(p + "attn.proj.weight", {C, C}, {C, C});
    Add(p + "attn.proj.bias", {C}, {C});
    Add(p + "ln_2.weight", {C}, {C});
    Add(p + "ln_2.bias", {C}, {C});
    Add(p + "mlp.fc.weight", {4 * C, C}, {4 * C, C});
    Add(p + "mlp.fc.bias", {4 * C}, {4 * C});
    Add(p + "mlp.proj.weight", {C, 4 * C}, {C, 4 * C});
    Add(p + "mlp.proj.bias", {C}, {C});
  }
  Add("ln_f.weight", {C}, {C});
  Add("ln_f.bias", {C}, {C});
}

void ParamLayout::Add(const std::string& name, std::vector<int64_t> shape, std::vector<int64_t> stored) {
  ParamInfo p;
  p.name = name;
  p.size = 1;
  for (auto d : shape) p.size *= static_cast<size_t>(d);
  p.stored_size = 1;
  for (auto d : stored) p.stored_size *= static_cast<size_t>(d);
  p.decay = shape.size() >= 2;
  p.shape = std::move(shape);
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
