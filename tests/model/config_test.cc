#include "kernels/registry.h"
#include "model/config.h"

#include <gtest/gtest.h>

#include "model/decoder.h"

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

TEST(ModelConfigTest, BadShapesNameTheField) {
  auto r = ModelConfig::Make(50257, 1024, 12, 5, 768);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().ExitCode(), 2);
  EXPECT_NE(r.status().message().find("not divisible by n_head 5"), std::string::npos);
  EXPECT_FALSE(ModelConfig::Make(1, 8, 1, 1, 8).ok());
}

}  // namespace
}  // namespace anneal
