#include "kernels/registry.h"
#include "optim/adamw.h"

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
  auto c = *GptConfig::Make(200, 8, 1, 1, 8);
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
  auto c = *GptConfig::Make(200, 8, 1, 1, 8);
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

}  // namespace
}  // namespace anneal
