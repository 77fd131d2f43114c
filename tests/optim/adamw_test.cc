#include "kernels/registry.h"
#include "optim/adamw.h"
#include "tensor/host_copy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace anneal {
namespace {

TEST(AdamWTest, WarmupThenCosine) {
  AdamWOptions o;
  o.lr = 1.0f;
  o.min_lr = 0.1f;
  o.warmup_steps = 10;
  o.decay_steps = 110;
  EXPECT_FLOAT_EQ(LearningRate(o, 0), 0.1f);
  EXPECT_FLOAT_EQ(LearningRate(o, 9), 1.0f);
  EXPECT_NEAR(LearningRate(o, 60), 0.55f, 1e-6);  // half way down the cosine
  EXPECT_FLOAT_EQ(LearningRate(o, 110), 0.1f);
  EXPECT_FLOAT_EQ(LearningRate(o, 500), 0.1f);
}

TEST(AdamWTest, NonFiniteGradientsSkipTheUpdate) {
  auto c = *ModelConfig::Make(200, 8, 1, 1, 8);
  ParamLayout l(c);
  AdamW opt(l, CpuBackend(), AdamWOptions{});
  std::vector<float> p(l.total_floats(), 0.5f), g(l.total_floats(), 0.1f);
  g[17] = std::numeric_limits<float>::quiet_NaN();
  auto before = p;
  StepStats s = opt.Step(p.data(), g.data(), 0);
  EXPECT_TRUE(s.skipped);
  EXPECT_EQ(p, before);
  EXPECT_EQ(opt.updates(), 0);
  g[17] = 0.1f;
  s = opt.Step(p.data(), g.data(), 1);
  EXPECT_FALSE(s.skipped);
  EXPECT_EQ(opt.updates(), 1);
  EXPECT_NE(p, before);
}

TEST(AdamWTest, ClipsToTheGlobalNorm) {
  auto c = *ModelConfig::Make(200, 8, 1, 1, 8);
  ParamLayout l(c);
  AdamWOptions o;
  o.grad_clip = 1.0f;
  AdamW opt(l, CpuBackend(), o);
  std::vector<float> p(l.total_floats(), 0.0f), g(l.total_floats(), 1.0f);
  StepStats s = opt.Step(p.data(), g.data(), 0);
  EXPECT_NEAR(s.grad_norm, std::sqrt(static_cast<double>(l.total_floats())), 1e-3);
  double n2 = 0;
  for (float x : g) n2 += static_cast<double>(x) * x;
  EXPECT_NEAR(std::sqrt(n2), 1.0, 1e-4);  // gradients were scaled to the clip norm
}

// The precision policy: a bf16 working copy gets fp32 masters; the update runs on them and the
// working copy is their rounding, so many small updates accumulate where bf16 alone would lose them.
TEST(AdamWTest, Bf16WorkingCopyKeepsFp32Masters) {
  auto c = *ModelConfig::Make(200, 8, 1, 1, 8);
  ParamLayout l(c);
  Backend& ref = RefBackend();  // bf16 emulated
  AdamWOptions o;
  o.lr = 1e-4f;  // each step moves a weight of 1.0 by ~1e-4, under bf16's half step there (3.9e-3)
  o.weight_decay = 0.0f;
  o.grad_clip = 0.0f;
  const size_t n = l.total_floats();
  std::vector<uint16_t> p(n, FloatToBf16(1.0f)), g(n, FloatToBf16(0.5f));
  const DevPtr P{p.data(), DType::kBF16}, G{g.data(), DType::kBF16};
  AdamW opt(l, ref, o);
  ASSERT_TRUE(opt.UseMasterWeights(P).ok());
  ASSERT_TRUE(opt.master());
  EXPECT_EQ(opt.master().f32()[3], 1.0f);
  for (int step = 0; step < 50; ++step) opt.Step(P, G, step);
  const float master = opt.master().f32()[3];
  EXPECT_NEAR(master, 1.0f - 50 * 1e-4f, 2e-5f);  // the masters moved by the sum of 50 small steps
  EXPECT_EQ(p[3], FloatToBf16(master));           // the working copy is their rounding
  // Host access widens bf16 exactly and rounds back once.
  HostWrite w(ref, P, n);
  EXPECT_EQ(w.data()[3], Bf16ToFloat(p[3]));
  w.data()[3] = 1.0f + 1.0f / 256;  // a tie: rounds to even (1.0)
  w.Commit();
  EXPECT_EQ(p[3], FloatToBf16(1.0f));
  // An fp32 working copy is its own master: no copy, no memory.
  std::vector<float> pf(n, 1.0f);
  AdamW opt32(l, ref, o);
  ASSERT_TRUE(opt32.UseMasterWeights(DevPtr{pf.data(), DType::kF32}).ok());
  EXPECT_FALSE(opt32.master());
}

}  // namespace
}  // namespace anneal
