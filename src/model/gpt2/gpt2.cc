#include "model/gpt2/gpt2.h"

#include <cmath>

#include "model/hf_config.h"

namespace anneal {
namespace {

class Gpt2 : public ModelFamily {
 public:
  const char* name() const override { return "gpt2"; }
  std::vector<std::string> PresetNames() const override { return {"gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"}; }
  Result<ModelConfig> Preset(const std::string& p) const override {
    if (p == "gpt2") return ModelConfig::Make(50257, 1024, 12, 12, 768);
    if (p == "gpt2-medium") return ModelConfig::Make(50257, 1024, 24, 16, 1024);
    if (p == "gpt2-large") return ModelConfig::Make(50257, 1024, 36, 20, 1280);
    if (p == "gpt2-xl") return ModelConfig::Make(50257, 1024, 48, 25, 1600);
    return NotFound("no gpt2 preset " + p);
  }
  Status Finish(ModelConfig* c) const override {
    auto bad = [](const std::string& m) { return InvalidInput("model config: " + m); };
    if (c->n_embd % c->n_head != 0) {
      return bad("n_embd " + std::to_string(c->n_embd) + " is not divisible by n_head " + std::to_string(c->n_head) +
                 ": choose n_head dividing n_embd (e.g. n_embd " + std::to_string(c->n_embd - c->n_embd % c->n_head) +
                 ")");
    }
    c->n_kv_head = c->n_head;
    c->intermediate_size = 4 * c->n_embd;
    c->norm_eps = 1e-5f;
    c->tie_embeddings = true;
    c->rope_scaling = RopeScaling();
    c->blocks = Blocks();  // LayerNorm, learned positions, GELU MLP, biases
    return Status::Ok();
  }
  std::vector<TensorSpec> EmbeddingTensors(const ModelConfig& c) const override {
    return {{"wte.weight", Role::kEmbedding, {c.vocab_size, c.n_embd}, Split::kVocab},
            {"wpe.weight", Role::kPositions, {c.max_seq_len, c.n_embd}, Split::kWhole}};
  }
  std::vector<TensorSpec> LayerTensors(const ModelConfig& c, int l) const override {
    const std::string p = "h." + std::to_string(l) + ".";
    const int64_t C = c.n_embd;
    return {{p + "ln_1.weight", Role::kNorm1W, {C}, Split::kWhole},
            {p + "ln_1.bias", Role::kNorm1B, {C}, Split::kWhole},
            {p + "attn.q.weight", Role::kQW, {C, C}, Split::kRows},
            {p + "attn.q.bias", Role::kQB, {C}, Split::kRows},
            {p + "attn.k.weight", Role::kKW, {C, C}, Split::kRows},
            {p + "attn.k.bias", Role::kKB, {C}, Split::kRows},
            {p + "attn.v.weight", Role::kVW, {C, C}, Split::kRows},
            {p + "attn.v.bias", Role::kVB, {C}, Split::kRows},
            {p + "attn.proj.weight", Role::kProjW, {C, C}, Split::kCols},
            {p + "attn.proj.bias", Role::kProjB, {C}, Split::kWhole},
            {p + "ln_2.weight", Role::kNorm2W, {C}, Split::kWhole},
            {p + "ln_2.bias", Role::kNorm2B, {C}, Split::kWhole},
            {p + "mlp.fc.weight", Role::kFcW, {4 * C, C}, Split::kRows},
            {p + "mlp.fc.bias", Role::kFcB, {4 * C}, Split::kRows},
            {p + "mlp.proj.weight", Role::kDownW, {C, 4 * C}, Split::kCols},
            {p + "mlp.proj.bias", Role::kDownB, {C}, Split::kWhole}};
  }
  std::vector<TensorSpec> HeadTensors(const ModelConfig& c) const override {
    return {{"ln_f.weight", Role::kNormFW, {c.n_embd}, Split::kWhole},
            {"ln_f.bias", Role::kNormFB, {c.n_embd}, Split::kWhole}};
  }
  std::vector<Op> Ops() const override {
    return {Op::kLayerNormForward, Op::kLayerNormBackward, Op::kGeluForward, Op::kGeluBackward};
  }
  std::string Describe(const ModelConfig& c) const override {
    return "GPT-2 L=" + std::to_string(c.n_layer) + " H=" + std::to_string(c.n_head) + " C=" +
           std::to_string(c.n_embd);
  }

  // GPT2LMHeadModel: Conv1D weights stored (in, out), q, k, v one c_attn; the head is tied (absent).
  const char* HfArchitecture() const override { return "GPT2LMHeadModel"; }
  std::vector<HfTensor> HfTensors(const ModelConfig& c) const override {
    std::vector<HfTensor> v = {{"transformer.wte.weight", {"wte.weight"}}, {"transformer.wpe.weight", {"wpe.weight"}}};
    for (int l = 0; l < c.n_layer; ++l) {
      const std::string p = "h." + std::to_string(l) + ".", q = "transformer.h." + std::to_string(l) + ".";
      for (const char* n : {"ln_1", "ln_2"}) {
        v.push_back({q + n + ".weight", {p + n + ".weight"}});
        v.push_back({q + n + ".bias", {p + n + ".bias"}});
      }
      v.push_back({q + "attn.c_attn.weight", {p + "attn.q.weight", p + "attn.k.weight", p + "attn.v.weight"}, true});
      v.push_back({q + "attn.c_attn.bias", {p + "attn.q.bias", p + "attn.k.bias", p + "attn.v.bias"}});
      for (const auto& [ours, theirs] : {std::pair<const char*, const char*>{"attn.proj", "attn.c_proj"},
                                         {"mlp.fc", "mlp.c_fc"}, {"mlp.proj", "mlp.c_proj"}}) {
        v.push_back({q + theirs + ".weight", {p + ours + ".weight"}, true});
        v.push_back({q + theirs + ".bias", {p + ours + ".bias"}});
      }
    }
    v.push_back({"transformer.ln_f.weight", {"ln_f.weight"}});
    v.push_back({"transformer.ln_f.bias", {"ln_f.bias"}});
    return v;
  }
  std::string HfConfig(const ModelConfig& c, const std::string& torch_dtype) const override {
    nlohmann::ordered_json j = {
        {"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}, {"vocab_size", c.vocab_size},
        {"n_positions", c.max_seq_len}, {"n_ctx", c.max_seq_len}, {"n_embd", c.n_embd}, {"n_layer", c.n_layer},
        {"n_head", c.n_head}, {"n_inner", nullptr}, {"activation_function", "gelu_new"}, {"resid_pdrop", 0.0},
        {"embd_pdrop", 0.0}, {"attn_pdrop", 0.0}, {"layer_norm_epsilon", 1e-5}, {"initializer_range", 0.02},
        {"scale_attn_weights", true}, {"use_cache", true}, {"tie_word_embeddings", true}, {"torch_dtype", torch_dtype}};
    const int eot = c.vocab_size > 50256 ? 50256 : c.vocab_size - 1;  // GPT-2's <|endoftext|> where it exists
    j["bos_token_id"] = eot;
    j["eos_token_id"] = eot;
    return j.dump(2) + "\n";
  }
  Result<ModelConfig> FromHfConfig(const std::string& text, const std::string& file) const override {
    ANNEAL_ASSIGN_OR_RETURN(nlohmann::json j, hf::ParseConfig(text, file));
    ANNEAL_ASSIGN_OR_RETURN(int V, hf::Int(j, "vocab_size", file, 2, 1 << 30));
    ANNEAL_ASSIGN_OR_RETURN(int T, hf::Int(j, "n_positions", file, 1, 1 << 24));
    ANNEAL_ASSIGN_OR_RETURN(int C, hf::Int(j, "n_embd", file, 1, 1 << 16));
    ANNEAL_ASSIGN_OR_RETURN(int L, hf::Int(j, "n_layer", file, 1, 1000));
    ANNEAL_ASSIGN_OR_RETURN(int H, hf::Int(j, "n_head", file, 1, 1000));
    ANNEAL_ASSIGN_OR_RETURN(int inner, hf::Int(j, "n_inner", file, 1, 1 << 20, 4 * C));
    if (inner != 4 * C) return InvalidInput(file + ": \"n_inner\" " + std::to_string(inner) + " is not 4 n_embd: anneal's GPT-2 has a 4C MLP");
    ANNEAL_ASSIGN_OR_RETURN(std::string act, hf::Str(j, "activation_function", file, "gelu_new"));
    if (act != "gelu_new" && act != "gelu_pytorch_tanh") {
      return InvalidInput(file + ": \"activation_function\" '" + act + "' is not GELU's tanh form (gelu_new), the one anneal's GPT-2 has");
    }
    ANNEAL_ASSIGN_OR_RETURN(double eps, hf::Num(j, "layer_norm_epsilon", file, 1e-5));
    if (std::fabs(eps - 1e-5) > 1e-12) return InvalidInput(file + ": \"layer_norm_epsilon\" must be 1e-05 (anneal's LayerNorm)");
    ANNEAL_ASSIGN_OR_RETURN(bool tied, hf::Bool(j, "tie_word_embeddings", file, true));
    if (!tied) return InvalidInput(file + ": \"tie_word_embeddings\" false: anneal's GPT-2 ties its head to wte");
    ANNEAL_ASSIGN_OR_RETURN(bool scaled, hf::Bool(j, "scale_attn_weights", file, true));
    if (!scaled) return InvalidInput(file + ": \"scale_attn_weights\" false: anneal's attention scales by 1/sqrt(head size)");
    for (const char* k : {"scale_attn_by_inverse_layer_idx", "add_cross_attention"}) {
      ANNEAL_ASSIGN_OR_RETURN(bool on, hf::Bool(j, k, file, false));
      if (on) return InvalidInput(file + ": \"" + std::string(k) + "\" true is not supported by anneal's GPT-2");
    }
    auto c = ModelConfig::Make(V, T, L, H, C);
    if (!c.ok()) return InvalidInput(file + ": " + c.status().message());
    return c;
  }
};

}  // namespace

const ModelFamily& Gpt2Family() {
  static const Gpt2 f;
  return f;
}

}  // namespace anneal
