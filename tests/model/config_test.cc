#include "kernels/registry.h"
#include "model/config.h"

#include <gtest/gtest.h>

#include "model/decoder.h"
#include "testing/small_models.h"

namespace anneal {
namespace {

// Parameter counts of OpenAI's GPT-2 releases (tied embeddings, 1024 positions).
TEST(ModelConfigTest, PresetParameterCounts) {
  EXPECT_EQ(ModelConfig::Preset("gpt2")->NumParams(), 124439808u);
  EXPECT_EQ(ModelConfig::Preset("gpt2-medium")->NumParams(), 354823168u);
  EXPECT_EQ(ModelConfig::Preset("gpt2-large")->NumParams(), 774030080u);
  EXPECT_EQ(ModelConfig::Preset("gpt2-xl")->NumParams(), 1557611200u);
  EXPECT_EQ(ModelConfig::Preset("gpt2")->padded_vocab, 50304);
  EXPECT_FALSE(ModelConfig::Preset("gpt5").ok());
}

TEST(ModelConfigTest, LayoutMatchesCountAndKeepsQkvSeparate) {
  auto c = *ModelConfig::Make(1000, 64, 3, 4, 32);
  ParamLayout l(c);
  size_t canonical = 0;
  for (const auto& p : l.params()) canonical += p.size;
  EXPECT_EQ(canonical, c.NumParams());
  EXPECT_EQ(l.total_floats(), c.NumParams() + (1024 - 1000) * 32u);
  ASSERT_NE(l.Find("h.2.attn.q.weight"), nullptr);
  ASSERT_NE(l.Find("h.2.attn.v.bias"), nullptr);
  EXPECT_EQ(l.Find("wte.weight")->shape, (std::vector<int64_t>{1000, 32}));
  EXPECT_EQ(l.Find("wte.weight")->stored_shape, (std::vector<int64_t>{1024, 32}));
  EXPECT_FALSE(l.Find("h.0.attn.k.weight")->shape.empty());
  EXPECT_TRUE(l.Find("h.0.mlp.fc.weight")->decay);
  EXPECT_FALSE(l.Find("h.0.mlp.fc.bias")->decay);
}

TEST(ModelConfigTest, MemoryEstimateIsWhatTheModelAllocates) {
  auto c = *ModelConfig::Make(300, 16, 2, 4, 32);
  DecoderModel m(c, CpuBackend());
  std::vector<int32_t> tok(3 * 16, 1);
  m.Forward(tok.data(), tok.data(), 3, 16, 0.0f);
  EXPECT_EQ(m.ActivationFloatsAllocated(), c.ActivationFloats(3, 16));
  EXPECT_EQ(c.TrainingBytes(3, 16), 4 * (4 * m.num_floats() + c.ActivationFloats(3, 16)));
  for (Recompute r : {Recompute::kSelective, Recompute::kFull}) {
    m.set_recompute(r);
    m.Forward(tok.data(), tok.data(), 3, 16, 0.0f);
    EXPECT_EQ(m.ActivationFloatsAllocated(), c.ActivationFloats(3, 16, r));
  }
  EXPECT_LT(c.ActivationFloats(3, 16, Recompute::kSelective), c.ActivationFloats(3, 16));
  EXPECT_LT(c.ActivationFloats(3, 16, Recompute::kFull), c.ActivationFloats(3, 16, Recompute::kSelective));
  // The larger presets (estimates only; not trained here): fp32 state alone is 16 bytes a parameter.
  for (const char* name : {"gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"}) {
    auto g = *ModelConfig::Preset(name);
    std::printf("  %-12s %11zu parameters, B=16 T=1024 training memory %.1f GB\n", name, g.NumParams(),
                static_cast<double>(g.TrainingBytes(16, 1024)) / 1e9);
    EXPECT_GT(g.TrainingBytes(16, 1024), 16 * g.NumParams());
  }
}

// Llama 3's published parameter counts (Meta's model cards: 1.24B, 3.21B, 8.03B), exactly as their
// config.json shapes give them: the 3.2 models tie the head to the embedding, 3 8B does not.
TEST(ModelConfigTest, LlamaPresetParameterCounts) {
  EXPECT_EQ(ModelConfig::Preset("llama-3.2-1b")->NumParams(), 1235814400u);
  EXPECT_EQ(ModelConfig::Preset("llama-3.2-3b")->NumParams(), 3212749824u);
  EXPECT_EQ(ModelConfig::Preset("llama-3-8b")->NumParams(), 8030261248u);
  EXPECT_EQ(ModelConfig::Preset("llama-3.1-70b")->NumParams(), 70553706496u);  // Meta's model card: 70.6B
  auto tiny = *ModelConfig::Preset("llama-tiny");
  EXPECT_EQ(tiny.family, "llama");
  EXPECT_LT(tiny.NumParams(), 10000000u);
  EXPECT_GT(tiny.NumParams(), 1000000u);
  auto l1 = *ModelConfig::Preset("llama-3.2-1b");
  EXPECT_EQ(l1.n_kv_head, 8);
  EXPECT_EQ(l1.kv_dim(), 512);
  EXPECT_TRUE(l1.rope_scaling.on());
  // FLOPs per token: 6 per parameter (the untied 8B's lookup table does not count) + 6 L C T.
  auto l8 = *ModelConfig::Preset("llama-3-8b");
  EXPECT_DOUBLE_EQ(l8.FlopsPerToken(1024), 6.0 * (8030261248.0 - 128256.0 * 4096) + 6.0 * 32 * 4096 * 1024);
  EXPECT_DOUBLE_EQ(ModelConfig::Preset("gpt2")->FlopsPerToken(1024), 6.0 * 124439808 + 6.0 * 12 * 768 * 1024);
}

TEST(ModelConfigTest, LlamaLayoutHasTheFamilysTensors) {
  auto c = SmallLlama(1000, 64, 2, 4, 2, 32, 80);
  ParamLayout l(c);
  size_t canonical = 0;
  for (const auto& p : l.params()) canonical += p.size;
  EXPECT_EQ(canonical, c.NumParams());
  EXPECT_EQ(l.total_floats(), c.NumParams() + 2 * (1024 - 1000) * 32u);  // wte and lm_head padded
  EXPECT_EQ(l.Find("h.1.attn.k.weight")->shape, (std::vector<int64_t>{16, 32}));  // 2 heads of 8
  EXPECT_EQ(l.Find("h.1.mlp.gate.weight")->shape, (std::vector<int64_t>{80, 32}));
  EXPECT_EQ(l.Find("h.1.mlp.down.weight")->shape, (std::vector<int64_t>{32, 80}));
  EXPECT_NE(l.Find("lm_head.weight"), nullptr);
  EXPECT_EQ(l.Find("wpe.weight"), nullptr);
  EXPECT_EQ(l.Find("h.0.attn.q.bias"), nullptr);
  EXPECT_FALSE(l.Find("norm_f.weight")->decay);
  EXPECT_EQ(ParamLayout(SmallLlama(1000, 64, 2, 4, 2, 32, 80, true)).Find("lm_head.weight"), nullptr);
}

TEST(ModelConfigTest, LlamaMemoryEstimateIsWhatTheModelAllocates) {
  for (const ModelConfig& c : {SmallLlama(300, 16, 2, 4, 2, 32, 48), SmallLlama(300, 16, 2, 4, 1, 32, 40, true)}) {
    DecoderModel m(c, CpuBackend());
    std::vector<int32_t> tok(3 * 16, 1);
    for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
      m.set_recompute(r);
      m.Forward(tok.data(), tok.data(), 3, 16, 0.0f);
      EXPECT_EQ(m.ActivationFloatsAllocated(), c.ActivationFloats(3, 16, r)) << static_cast<int>(r);
    }
    EXPECT_EQ(c.TrainingBytes(3, 16), 4 * (4 * m.num_floats() + c.ActivationFloats(3, 16)));
  }
  for (const char* name : {"llama-3.2-1b", "llama-3.2-3b", "llama-3-8b"}) {
    auto g = *ModelConfig::Preset(name);
    std::printf("  %-12s %11zu parameters, B=1 T=4096 full recomputation: training memory %.1f GB\n", name,
                g.NumParams(), static_cast<double>(g.TrainingBytes(1, 4096, Recompute::kFull)) / 1e9);
  }
}

TEST(ModelConfigTest, LlamaShapesThatCannotWorkNameTheFields) {
  auto fails = [](ModelConfig c, const std::string& what) {
    Status st = c.Finish();
    EXPECT_EQ(st.ExitCode(), 2) << what;
    EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
  };
  ModelConfig c = SmallLlama(300, 16, 2, 4, 2, 32, 48);
  ModelConfig bad = c;
  bad.n_kv_head = 3;
  fails(bad, "n_kv_head 3 does not divide n_head 4");
  bad = c;
  bad.n_head = 16;  // head size 2: fine; 32 heads of 1: odd
  bad.n_kv_head = 16;
  EXPECT_TRUE(bad.Finish().ok());
  bad.n_head = bad.n_kv_head = 32;
  fails(bad, "head size n_embd / n_head = 1 is odd");
  bad = c;
  bad.rope_scaling = {0.5f, 1, 4, 8192};
  fails(bad, "rope_scaling needs factor >= 1");
  bad = c;
  bad.family = "mamba";
  fails(bad, "model.family 'mamba' is not a known family: use gpt2 | llama");
  EXPECT_NE(ModelConfig::Preset("llama-70b").status().message().find("llama-3.2-1b"), std::string::npos);
}

TEST(ModelConfigTest, BadShapesNameTheField) {
  auto r = ModelConfig::Make(50257, 1024, 12, 5, 768);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().ExitCode(), 2);
  EXPECT_NE(r.status().message().find("not divisible by n_head 5"), std::string::npos);
  EXPECT_FALSE(ModelConfig::Make(1, 8, 1, 1, 8).ok());
}

}  // namespace
}  // namespace anneal
