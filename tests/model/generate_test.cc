#include "kernels/registry.h"
#include "model/generate.h"
#include "optim/adamw.h"
#include "testing/small_models.h"

#include <gtest/gtest.h>

#include <cmath>

namespace anneal {
namespace {

// The KV-cached step at position t gives the same logits as a full forward over 0..t.
// (GPT-2; and a Llama whose rotary positions and grouped key/value heads go through the cache.)
TEST(GenerateTest, KvCacheMatchesFullForward) {
  for (const ModelConfig& c : {ModelConfig::Make(300, 16, 2, 4, 32).value(), SmallLlama(300, 16, 2, 4, 2, 32, 48),
                               SmallLlama(300, 16, 2, 4, 1, 32, 48, true)}) {
  SCOPED_TRACE(c.ToString());
  DecoderModel m(c, CpuBackend());
  m.InitWeights(11);
  std::vector<int32_t> toks = {5, 17, 250, 3, 99, 42, 7, 1, 0, 299};
  const int T = static_cast<int>(toks.size()), Vp = m.config().padded_vocab, V = m.config().vocab_size;
  std::vector<int32_t> tgt(T, 0);
  KvGenerator g(m);
  std::vector<std::vector<float>> kv;
  for (int t = 0; t < T; ++t) {
    const float* l = g.Step(static_cast<uint32_t>(toks[t]));
    kv.emplace_back(l, l + V);
  }
  m.Forward(toks.data(), tgt.data(), 1, T, 0.0f);
  for (int t = 0; t < T; ++t) {
    double num = 0, den = 0;
    for (int j = 0; j < V; ++j) {
      double d = kv[t][j] - m.logits()[static_cast<size_t>(t) * Vp + j];
      num += d * d;
      den += static_cast<double>(kv[t][j]) * kv[t][j];
    }
    EXPECT_LE(std::sqrt(num / den), 1e-5) << "position " << t;
  }
  }
}

TEST(GenerateTest, SeededSamplingIsReproducibleAndNeverPicksPadding) {
  DecoderModel m(ModelConfig::Make(300, 32, 1, 2, 16).value(), CpuBackend());
  m.InitWeights(3);
  KvGenerator g(m);
  SampleOptions o;
  o.max_tokens = 20;
  o.top_k = 50;
  o.seed = 9;
  auto a = g.Generate({1, 2, 3}, o, -1, nullptr);
  auto b = g.Generate({1, 2, 3}, o, -1, nullptr);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(a->size(), 20u);
  for (uint32_t id : *a) EXPECT_LT(id, 300u);
  EXPECT_EQ(g.Generate({}, o, -1, nullptr).status().ExitCode(), 2);
  EXPECT_EQ(g.Generate(std::vector<uint32_t>(40, 1), o, -1, nullptr).status().ExitCode(), 2);
}

TEST(GenerateTest, PaddedVocabularyStaysZeroAndUnpredicted) {
  DecoderModel m(ModelConfig::Make(130, 8, 1, 2, 8).value(), CpuBackend());  // Vp = 256
  m.InitWeights(1);
  AdamW opt(m.layout(), CpuBackend(), AdamWOptions{});
  std::vector<int32_t> in = {1, 2, 3, 4}, tgt = {2, 3, 4, 129};
  for (int s = 0; s < 3; ++s) {
    m.ZeroGrad();
    m.Forward(in.data(), tgt.data(), 1, 4, 0.25f);
    m.Backward();
    opt.Step(m.params(), m.grads(), s);
  }
  const float* wte = m.Param("wte.weight");
  for (size_t i = 130 * 8; i < 256 * 8; ++i) ASSERT_EQ(wte[i], 0.0f) << "padded row element " << i;
}

}  // namespace
}  // namespace anneal

namespace anneal {
namespace {

// Selective (GELU) and full (whole layer) recomputation give bit-identical gradients and losses.
TEST(RecomputeTest, SameGradientsWithLessMemory) {
  for (const ModelConfig& c : {ModelConfig::Make(300, 16, 3, 4, 32).value(), SmallLlama(300, 16, 3, 4, 2, 32, 48)}) {
  for (Recompute r : {Recompute::kSelective, Recompute::kFull}) {
  DecoderModel a(c, CpuBackend()), b(c, CpuBackend());
  a.InitWeights(4);
  b.InitWeights(4);
  b.set_recompute(r);
  std::vector<int32_t> in(2 * 16), tgt(2 * 16);
  for (size_t i = 0; i < in.size(); ++i) {
    in[i] = static_cast<int32_t>((i * 37) % 300);
    tgt[i] = static_cast<int32_t>((i * 53 + 1) % 300);
  }
  for (DecoderModel* m : {&a, &b}) {
    m->ZeroGrad();
    m->Forward(in.data(), tgt.data(), 2, 16, 1.0f / 32);
    m->Backward();
  }
  EXPECT_TRUE(std::equal(a.grads(), a.grads() + a.num_floats(), b.grads())) << static_cast<int>(r);
  EXPECT_LT(b.ActivationFloatsAllocated(), a.ActivationFloatsAllocated());
  }
  }
}

}  // namespace
}  // namespace anneal
