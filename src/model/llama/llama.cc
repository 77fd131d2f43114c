#include "model/llama/llama.h"

namespace anneal {
namespace {

struct Shape {
  const char* name;
  int V, maxT, L, H, Hkv, C, F;
  float theta;
  bool tied;
  RopeScaling scaling;
};
// Llama 3's published shapes (their config.json): 1.24B, 3.21B and 8.03B parameters.
const Shape kPresets[] = {
    {"llama-tiny", 50257, 256, 4, 4, 2, 128, 384, 10000.0f, true, {}},
    {"llama-3.2-1b", 128256, 131072, 16, 32, 8, 2048, 8192, 500000.0f, true, {32.0f, 1.0f, 4.0f, 8192}},
    {"llama-3.2-3b", 128256, 131072, 28, 24, 8, 3072, 8192, 500000.0f, true, {32.0f, 1.0f, 4.0f, 8192}},
    {"llama-3-8b", 128256, 8192, 32, 32, 8, 4096, 14336, 500000.0f, false, {}},
};

class Llama : public ModelFamily {
 public:
  const char* name() const override { return "llama"; }
  std::vector<std::string> PresetNames() const override {
    std::vector<std::string> v;
    for (const Shape& s : kPresets) v.push_back(s.name);
    return v;
  }
  Result<ModelConfig> Preset(const std::string& p) const override {
    for (const Shape& s : kPresets) {
      if (p != s.name) continue;
      ModelConfig c;
      c.family = "llama";
      c.vocab_size = s.V;
      c.max_seq_len = s.maxT;
      c.n_layer = s.L;
      c.n_head = s.H;
      c.n_kv_head = s.Hkv;
      c.n_embd = s.C;
      c.intermediate_size = s.F;
      c.rope_theta = s.theta;
      c.tie_embeddings = s.tied;
      c.rope_scaling = s.scaling;
      ANNEAL_RETURN_IF_ERROR(c.Finish());
      return c;
    }
    return NotFound("no llama preset " + p);
  }
  Status Finish(ModelConfig* c) const override {
    auto bad = [](const std::string& m) { return InvalidInput("model config: " + m); };
    if (c->n_embd % c->n_head != 0) {
      return bad("n_embd " + std::to_string(c->n_embd) + " is not divisible by n_head " + std::to_string(c->n_head) +
                 ": choose n_head dividing n_embd");
    }
    if (c->n_kv_head < 1 || c->n_head % c->n_kv_head != 0) {
      return bad("n_kv_head " + std::to_string(c->n_kv_head) + " does not divide n_head " + std::to_string(c->n_head) +
                 ": choose a divisor of n_head (1 = multi-query, n_head = classic attention)");
    }
    if (c->head_size() % 2 != 0) {
      return bad("the head size n_embd / n_head = " + std::to_string(c->head_size()) +
                 " is odd: rotary embeddings rotate pairs of channels; choose n_head so the head size is even");
    }
    if (c->intermediate_size < 1) return bad("intermediate_size must be at least 1 (Llama 3 8B: 14336)");
    if (!(c->norm_eps > 0)) return bad("norm_eps must be positive (Llama: 1e-5)");
    if (!(c->rope_theta > 0)) return bad("rope_theta must be positive (Llama 3: 500000)");
    const RopeScaling& r = c->rope_scaling;
    if (r.on() && (r.factor < 1 || !(r.low_freq_factor > 0) || !(r.high_freq_factor > r.low_freq_factor) ||
                   r.original_max_seq_len < 1)) {
      return bad("rope_scaling needs factor >= 1, 0 < low_freq_factor < high_freq_factor and original_max_seq_len >= 1 "
                 "(Llama 3.2: 32, 1, 4, 8192)");
    }
    Blocks b;
    b.norm = NormKind::kRmsNorm;
    b.learned_positions = false;
    b.rotary = true;
    b.mlp = MlpKind::kSwiGlu;
    c->blocks = b;
    return Status::Ok();
  }
  std::vector<TensorSpec> EmbeddingTensors(const ModelConfig& c) const override {
    return {{"wte.weight", Role::kEmbedding, {c.vocab_size, c.n_embd}, Split::kVocab}};
  }
  std::vector<TensorSpec> LayerTensors(const ModelConfig& c, int l) const override {
    const std::string p = "h." + std::to_string(l) + ".";
    const int64_t C = c.n_embd, Ckv = c.kv_dim(), F = c.intermediate_size;
    return {{p + "attn_norm.weight", Role::kNorm1W, {C}, Split::kWhole},
            {p + "attn.q.weight", Role::kQW, {C, C}, Split::kRows},
            {p + "attn.k.weight", Role::kKW, {Ckv, C}, Split::kKvHeads},
            {p + "attn.v.weight", Role::kVW, {Ckv, C}, Split::kKvHeads},
            {p + "attn.proj.weight", Role::kProjW, {C, C}, Split::kCols},
            {p + "mlp_norm.weight", Role::kNorm2W, {C}, Split::kWhole},
            {p + "mlp.gate.weight", Role::kFcW, {F, C}, Split::kRows},
            {p + "mlp.up.weight", Role::kUpW, {F, C}, Split::kRows},
            {p + "mlp.down.weight", Role::kDownW, {C, F}, Split::kCols}};
  }
  std::vector<TensorSpec> HeadTensors(const ModelConfig& c) const override {
    std::vector<TensorSpec> v = {{"norm_f.weight", Role::kNormFW, {c.n_embd}, Split::kWhole}};
    if (!c.tie_embeddings) v.push_back({"lm_head.weight", Role::kLmHead, {c.vocab_size, c.n_embd}, Split::kVocab});
    return v;
  }
  std::vector<Op> Ops() const override {
    return {Op::kRmsNormForward, Op::kRmsNormBackward, Op::kRotary, Op::kSwiGluForward, Op::kSwiGluBackward};
  }
  std::string Describe(const ModelConfig& c) const override {
    std::string s = "Llama L=" + std::to_string(c.n_layer) + " H=" + std::to_string(c.n_head) + " KV=" +
                    std::to_string(c.n_kv_head) + " C=" + std::to_string(c.n_embd) + " F=" +
                    std::to_string(c.intermediate_size);
    if (!c.tie_embeddings) s += " untied";
    return s;
  }
};

}  // namespace

const ModelFamily& LlamaFamily() {
  static const Llama f;
  return f;
}

}  // namespace anneal
