#include "model/llama/llama.h"

#include <cstdio>
#include <cstdlib>

#include "model/hf_config.h"

namespace anneal {
namespace {

// A float as the shortest decimal that reads back to it (1e-05, not 9.999999747378752e-06).
double Clean(float f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(f));
  for (int p = 1; p <= 9; ++p) {
    char shorter[32];
    std::snprintf(shorter, sizeof shorter, "%.*g", p, static_cast<double>(f));
    if (std::strtof(shorter, nullptr) == f) return std::strtod(shorter, nullptr);
  }
  return std::strtod(buf, nullptr);
}

struct Shape {
  const char* name;
  int V, maxT, L, H, Hkv, C, F;
  float theta;
  bool tied;
  RopeScaling scaling;
};
// Llama 3's published shapes (their config.json): 1.24B, 3.21B, 8.03B and 70.6B parameters.
const Shape kPresets[] = {
    {"llama-tiny", 50257, 256, 4, 4, 2, 128, 384, 10000.0f, true, {}},
    {"llama-3.2-1b", 128256, 131072, 16, 32, 8, 2048, 8192, 500000.0f, true, {32.0f, 1.0f, 4.0f, 8192}},
    {"llama-3.2-3b", 128256, 131072, 28, 24, 8, 3072, 8192, 500000.0f, true, {32.0f, 1.0f, 4.0f, 8192}},
    {"llama-3-8b", 128256, 8192, 32, 32, 8, 4096, 14336, 500000.0f, false, {}},
    {"llama-3.1-70b", 128256, 131072, 80, 64, 8, 8192, 28672, 500000.0f, false, {8.0f, 1.0f, 4.0f, 8192}},
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

  // LlamaForCausalLM: anneal's tensors one to one, no permutation (both rotate the halves of a head).
  const char* HfArchitecture() const override { return "LlamaForCausalLM"; }
  std::vector<HfTensor> HfTensors(const ModelConfig& c) const override {
    std::vector<HfTensor> v = {{"model.embed_tokens.weight", {"wte.weight"}}};
    for (int l = 0; l < c.n_layer; ++l) {
      const std::string p = "h." + std::to_string(l) + ".", q = "model.layers." + std::to_string(l) + ".";
      for (const auto& [theirs, ours] : {std::pair<const char*, const char*>{"input_layernorm", "attn_norm"},
                                         {"self_attn.q_proj", "attn.q"}, {"self_attn.k_proj", "attn.k"},
                                         {"self_attn.v_proj", "attn.v"}, {"self_attn.o_proj", "attn.proj"},
                                         {"post_attention_layernorm", "mlp_norm"}, {"mlp.gate_proj", "mlp.gate"},
                                         {"mlp.up_proj", "mlp.up"}, {"mlp.down_proj", "mlp.down"}}) {
        v.push_back({q + theirs + ".weight", {p + ours + ".weight"}});
      }
    }
    v.push_back({"model.norm.weight", {"norm_f.weight"}});
    if (!c.tie_embeddings) v.push_back({"lm_head.weight", {"lm_head.weight"}});
    return v;
  }
  std::string HfConfig(const ModelConfig& c, const std::string& torch_dtype) const override {
    // Both spellings of the rotary settings: transformers 5's rope_parameters, 4's rope_theta and
    // rope_scaling (each version reads its own and ignores the other).
    nlohmann::ordered_json rope = {{"rope_type", c.rope_scaling.on() ? "llama3" : "default"},
                                   {"rope_theta", Clean(c.rope_theta)}};
    nlohmann::ordered_json scaling = nullptr;
    if (c.rope_scaling.on()) {
      scaling = {{"rope_type", "llama3"},
                 {"factor", Clean(c.rope_scaling.factor)},
                 {"low_freq_factor", Clean(c.rope_scaling.low_freq_factor)},
                 {"high_freq_factor", Clean(c.rope_scaling.high_freq_factor)},
                 {"original_max_position_embeddings", c.rope_scaling.original_max_seq_len}};
      for (const auto& [k, v] : scaling.items()) rope[k] = v;
    }
    const int eot = c.vocab_size > 50256 ? 50256 : c.vocab_size - 1;
    nlohmann::ordered_json j = {
        {"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"vocab_size", c.vocab_size},
        {"hidden_size", c.n_embd}, {"intermediate_size", c.intermediate_size}, {"num_hidden_layers", c.n_layer},
        {"num_attention_heads", c.n_head}, {"num_key_value_heads", c.n_kv_head}, {"head_dim", c.head_size()},
        {"max_position_embeddings", c.max_seq_len}, {"rms_norm_eps", Clean(c.norm_eps)}, {"hidden_act", "silu"},
        {"rope_theta", Clean(c.rope_theta)}, {"rope_scaling", scaling}, {"rope_parameters", rope},
        {"attention_bias", false}, {"mlp_bias", false}, {"attention_dropout", 0.0},
        {"tie_word_embeddings", c.tie_embeddings}, {"initializer_range", 0.02}, {"use_cache", true},
        {"bos_token_id", eot}, {"eos_token_id", eot}, {"torch_dtype", torch_dtype}};
    return j.dump(2) + "\n";
  }
  Result<ModelConfig> FromHfConfig(const std::string& text, const std::string& file) const override {
    ANNEAL_ASSIGN_OR_RETURN(nlohmann::json j, hf::ParseConfig(text, file));
    ModelConfig c;
    c.family = "llama";
    ANNEAL_ASSIGN_OR_RETURN(c.vocab_size, hf::Int(j, "vocab_size", file, 2, 1 << 30));
    ANNEAL_ASSIGN_OR_RETURN(c.n_embd, hf::Int(j, "hidden_size", file, 1, 1 << 16));
    ANNEAL_ASSIGN_OR_RETURN(c.intermediate_size, hf::Int(j, "intermediate_size", file, 1, 1 << 20));
    ANNEAL_ASSIGN_OR_RETURN(c.n_layer, hf::Int(j, "num_hidden_layers", file, 1, 1000));
    ANNEAL_ASSIGN_OR_RETURN(c.n_head, hf::Int(j, "num_attention_heads", file, 1, 1000));
    ANNEAL_ASSIGN_OR_RETURN(c.n_kv_head, hf::Int(j, "num_key_value_heads", file, 1, 1000, c.n_head));
    ANNEAL_ASSIGN_OR_RETURN(c.max_seq_len, hf::Int(j, "max_position_embeddings", file, 1, 1 << 24));
    if (c.n_head > 0 && c.n_embd % c.n_head == 0) {
      ANNEAL_ASSIGN_OR_RETURN(int hd, hf::Int(j, "head_dim", file, 1, 1 << 16, c.n_embd / c.n_head));
      if (hd != c.n_embd / c.n_head) {
        return InvalidInput(file + ": \"head_dim\" " + std::to_string(hd) + " is not hidden_size / num_attention_heads (" +
                            std::to_string(c.n_embd / c.n_head) + "): anneal's heads split the hidden size");
      }
    }
    ANNEAL_ASSIGN_OR_RETURN(double eps, hf::Num(j, "rms_norm_eps", file, 1e-6));
    c.norm_eps = static_cast<float>(eps);
    ANNEAL_ASSIGN_OR_RETURN(c.tie_embeddings, hf::Bool(j, "tie_word_embeddings", file, false));
    ANNEAL_ASSIGN_OR_RETURN(std::string act, hf::Str(j, "hidden_act", file, "silu"));
    if (act != "silu") return InvalidInput(file + ": \"hidden_act\" '" + act + "' is not silu (SwiGLU), the one anneal's Llama has");
    for (const char* k : {"attention_bias", "mlp_bias"}) {
      ANNEAL_ASSIGN_OR_RETURN(bool on, hf::Bool(j, k, file, false));
      if (on) return InvalidInput(file + ": \"" + std::string(k) + "\" true: anneal's Llama has no biases");
    }
    // The rotary settings: transformers 5's rope_parameters, else 4's rope_scaling; the base from the
    // one in use, else the top-level rope_theta.
    nlohmann::json rope = j.value("rope_parameters", nlohmann::json());
    const char* rope_key = "rope_parameters";
    if (rope.is_null()) {
      rope = j.value("rope_scaling", nlohmann::json());
      rope_key = "rope_scaling";
    }
    if (rope.is_null()) rope = nlohmann::json::object();
    if (!rope.is_object()) return InvalidInput(file + ": \"" + std::string(rope_key) + "\" must be an object or null");
    ANNEAL_ASSIGN_OR_RETURN(double top_theta, hf::Num(j, "rope_theta", file, 10000.0));
    ANNEAL_ASSIGN_OR_RETURN(double theta, hf::Num(rope, "rope_theta", file, top_theta));
    c.rope_theta = static_cast<float>(theta);
    ANNEAL_ASSIGN_OR_RETURN(std::string type, hf::Str(rope, "rope_type", file, ""));
    if (type.empty()) {
      ANNEAL_ASSIGN_OR_RETURN(type, hf::Str(rope, "type", file, "default"));
    }
    if (type == "llama3") {
      ANNEAL_ASSIGN_OR_RETURN(double f, hf::Num(rope, "factor", file, 0));
      if (!(f >= 1)) return InvalidInput(file + ": the llama3 rope scaling needs \"factor\" >= 1 (Llama 3.2: 32)");
      ANNEAL_ASSIGN_OR_RETURN(double lo, hf::Num(rope, "low_freq_factor", file, 1));
      ANNEAL_ASSIGN_OR_RETURN(double hi, hf::Num(rope, "high_freq_factor", file, 4));
      ANNEAL_ASSIGN_OR_RETURN(int orig, hf::Int(rope, "original_max_position_embeddings", file, 1, 1 << 24, 8192));
      c.rope_scaling = {static_cast<float>(f), static_cast<float>(lo), static_cast<float>(hi), orig};
    } else if (type != "default") {
      return InvalidInput(file + ": rope type '" + type + "' is not one anneal computes (default, llama3)");
    }
    if (Status st = c.Finish(); !st.ok()) return InvalidInput(file + ": " + st.message());
    return c;
  }
};

}  // namespace

const ModelFamily& LlamaFamily() {
  static const Llama f;
  return f;
}

}  // namespace anneal
