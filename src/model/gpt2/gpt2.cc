#include "model/gpt2/gpt2.h"

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
};

}  // namespace

const ModelFamily& Gpt2Family() {
  static const Gpt2 f;
  return f;
}

}  // namespace anneal
