// The step cost model (train/step_cost.h) runs the model's own step on the cost backend: the memory it
// allocates is the trainer's formula to the byte, the host synchronisations are the loss's read back
// and the gradient norm's one (a per-tensor synchronisation coming back fails it), and the priced
// totals add up. Then the figures respond as a roofline must: flash attention (path 2) moves fewer
// bytes than path 1, a faster memory gives a shorter step.
#include <gtest/gtest.h>

#include "parallel/memory_plan.h"
#include "train/setup.h"
#include "train/step_cost.h"

namespace anneal {
namespace {

TrainConfig Tiny(const std::string& dtype, const std::string& recompute = "none") {
  auto c = TrainConfig::Parse("", {"model.vocab_size=512", "model.max_seq_len=64", "model.n_layer=3", "model.n_head=2",
                                  "model.n_embd=64", "data.dir=unused", "data.seq_len=32", "data.batch_size=2",
                                  "train.kernels=ref", "train.dtype=" + dtype, "train.recompute=" + recompute},
                              "step_cost_test");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return *c;
}

TEST(StepCostTest, TheModelsOwnStepWithTwoHostSynchronisations) {
  for (const std::string dtype : {"f32", "bf16"}) {
    for (const std::string rc : {"none", "full"}) {
      const TrainConfig c = Tiny(dtype, rc);
      auto sc = PredictStep(c, *FindDeviceSpec("h200"), false);
      ASSERT_TRUE(sc.ok()) << sc.status().message();
      // The loss (cross-entropy's read back) and the gradient norm (one for every tensor): not 16 L + 5.
      EXPECT_EQ(sc->price.syncs, 2) << dtype << " " << rc;
      // What it allocated is what the trainer's formula says one rank holds.
      auto plan = PlanLayout(c, 1);
      ASSERT_TRUE(plan.ok());
      EXPECT_EQ(sc->peak_bytes, RankMemory(*plan, MemoryInputsOf(c), 0, 0).Training()) << dtype << " " << rc;
      double us = 0;
      long launches = 0;
      for (const PricedOp& o : sc->price.ops) {
        us += o.us();
        launches += o.rec.launches;
      }
      EXPECT_DOUBLE_EQ(us, sc->price.step_us);
      EXPECT_EQ(launches, sc->price.launches);
      // One AdamW launch for every parameter tensor (16 a GPT-2 layer, wte, wpe, ln_f's two ranges), the
      // bf16 working copy written by it: no per-tensor launch, no conversion pass after it.
      long adamw = 0, converts = 0;
      for (const PricedOp& o : sc->price.ops) {
        if (o.rec.op.rfind("adamw", 0) == 0) {
          adamw += o.rec.launches;
          EXPECT_EQ(o.rec.shape, std::to_string(16 * 3 + 4) + " ranges" + (dtype == "bf16" ? ", bf16 copy" : ""));
        }
        if (o.rec.op == "copy" && o.rec.shape.find("convert") != std::string::npos) converts += o.rec.calls;
      }
      EXPECT_EQ(adamw, 1);
      EXPECT_EQ(converts, 0);
    }
  }
}

TEST(StepCostTest, FlashAttentionMovesLessAndAFasterMemoryIsFaster) {
  const TrainConfig c = Tiny("bf16");
  auto gemm = PredictStep(c, *FindDeviceSpec("h200"), false);
  auto flash = PredictStep(c, *FindDeviceSpec("h200"), true);
  auto h100 = PredictStep(c, *FindDeviceSpec("h100"), false);
  ASSERT_TRUE(gemm.ok() && flash.ok() && h100.ok());
  EXPECT_LT(flash->price.bytes, gemm->price.bytes);
  EXPECT_LT(flash->price.launches, gemm->price.launches);
  EXPECT_LT(gemm->price.step_us, h100->price.step_us);  // the same work, H200's faster memory
  EXPECT_NE(gemm->table.find("predicted on h200"), std::string::npos);
}

TEST(StepCostTest, GroupedQueryAttentionTakesPathTwo) {
  // Llama's grouped-query heads (4 query heads over 2 key/value heads) take the flash kernels as the
  // CUDA backend does, reading the shared heads in place: fewer bytes than path 1's expansion.
  auto c = TrainConfig::Parse("", {"model.family=llama", "model.vocab_size=512", "model.max_seq_len=64",
                                  "model.n_layer=2", "model.n_head=4", "model.n_kv_head=2", "model.n_embd=128",
                                  "model.intermediate_size=256", "data.dir=unused", "data.seq_len=32",
                                  "data.batch_size=2", "train.kernels=ref", "train.dtype=bf16"},
                              "step_cost_test");
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto gemm = PredictStep(*c, *FindDeviceSpec("h200"), false);
  auto flash = PredictStep(*c, *FindDeviceSpec("h200"), true);
  ASSERT_TRUE(gemm.ok() && flash.ok());
  EXPECT_NE(flash->table.find("attention_backward (flash)"), std::string::npos) << flash->table;
  EXPECT_EQ(flash->table.find("(path 1)"), std::string::npos) << flash->table;
  EXPECT_NE(gemm->table.find("attention_forward (path 1)"), std::string::npos) << gemm->table;
  EXPECT_LT(flash->price.bytes, gemm->price.bytes);
}

TEST(StepCostTest, RefusesALayoutOfSeveralDevices) {
  TrainConfig c = Tiny("bf16");
  c.dist.tp = 2;
  auto sc = PredictStep(c, *FindDeviceSpec("h200"), false);
  ASSERT_FALSE(sc.ok());
  EXPECT_NE(sc.status().message().find("one device"), std::string::npos);
}

}  // namespace
}  // namespace anneal
