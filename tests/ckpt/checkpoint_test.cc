#include "ckpt/checkpoint.h"

#include "core/safetensors.h"

#include <gtest/gtest.h>

#include "testing/fault_env.h"
#include "testing/temp_dir.h"

namespace anneal {
namespace {

GptConfig Tiny() { return GptConfig::Make(200, 16, 2, 2, 16).value(); }

TEST(CheckpointTest, RoundTripsWeightsMomentsAndState) {
  testing::TempDir dir;
  GptModel a(Tiny(), CpuKernels());
  a.InitWeights(5);
  AdamW opt(a.layout(), CpuKernels(), AdamWOptions{});
  for (size_t i = 0; i < opt.m().size(); ++i) opt.m()[i] = 0.001f * static_cast<float>(i % 97);
  const ParamInfo* wte = a.layout().Find("wte.weight");  // padded vocabulary rows hold zeros
  std::fill(opt.m().begin() + wte->offset + wte->size, opt.m().begin() + wte->offset + wte->stored_size, 0.0f);
  opt.set_updates(7);
  TrainerState st;
  st.step = 7;
  st.updates = 7;
  st.loader = {3, 112};
  ASSERT_TRUE(SaveCheckpoint(Env::Default(), dir.path(), a, &opt, st, {"{}", "d", "h"}).ok());
  auto newest = FindNewestCheckpoint(Env::Default(), dir.path());
  ASSERT_TRUE(newest.ok() && newest->has_value());
  EXPECT_EQ(**newest, dir.File("step-00000007"));
  GptModel b(Tiny(), CpuKernels());
  AdamW opt2(b.layout(), CpuKernels(), AdamWOptions{});
  TrainerState st2;
  ASSERT_TRUE(LoadCheckpoint(Env::Default(), **newest, &b, &opt2, &st2).ok());
  EXPECT_TRUE(std::equal(a.params(), a.params() + a.num_floats(), b.params()));
  EXPECT_EQ(opt.m(), opt2.m());
  EXPECT_EQ(st2.step, 7);
  EXPECT_EQ(opt2.updates(), 7);
  EXPECT_EQ(st2.loader.samples, 112u);
  // The stored wte is canonical: V rows, not the padded Vp.
  auto r = SafeTensorsReader::Open(Env::Default(), dir.File("step-00000007/model.safetensors"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value()->tensors().at("param.wte.weight").shape, (std::vector<int64_t>{200, 16}));
  EXPECT_TRUE(r.value()->Has("param.h.1.attn.k.weight"));
}

TEST(CheckpointTest, WithoutManifestItDoesNotExist) {
  testing::TempDir dir;
  GptModel a(Tiny(), CpuKernels());
  TrainerState st;
  st.step = 3;
  ASSERT_TRUE(SaveCheckpoint(Env::Default(), dir.path(), a, nullptr, st, {"{}", "d", "h"}).ok());
  // A later checkpoint whose manifest write fails: only the shard is there.
  testing::FaultEnv env(Env::Default());
  st.step = 9;
  env.FailRenameNumber(2);  // 1st rename: the shard; 2nd: the manifest
  EXPECT_FALSE(SaveCheckpoint(env, dir.path(), a, nullptr, st, {"{}", "d", "h"}).ok());
  EXPECT_TRUE(Env::Default().Exists(dir.File("step-00000009/model.safetensors")));
  auto newest = FindNewestCheckpoint(Env::Default(), dir.path());
  ASSERT_TRUE(newest.ok() && newest->has_value());
  EXPECT_EQ(**newest, dir.File("step-00000003"));
}

TEST(CheckpointTest, RefusesAnotherShapeAndCorruption) {
  testing::TempDir dir;
  GptModel a(Tiny(), CpuKernels());
  a.InitWeights(1);
  TrainerState st;
  st.step = 1;
  ASSERT_TRUE(SaveCheckpoint(Env::Default(), dir.path(), a, nullptr, st, {"{}", "d", "h"}).ok());
  const std::string ck = dir.File("step-00000001");
  GptModel other(GptConfig::Make(200, 16, 2, 2, 32).value(), CpuKernels());
  Status s = LoadCheckpoint(Env::Default(), ck, &other, nullptr, nullptr);
  EXPECT_EQ(s.ExitCode(), 2);
  EXPECT_NE(s.message().find("holds a model of shape"), std::string::npos);
  std::string bytes = *Env::Default().ReadFile(ck + "/model.safetensors");
  bytes[bytes.size() / 2] ^= 0x40;
  ASSERT_TRUE(Env::Default().WriteFileAtomic(ck + "/model.safetensors", bytes).ok());
  GptModel b(Tiny(), CpuKernels());
  s = LoadCheckpoint(Env::Default(), ck, &b, nullptr, nullptr);
  EXPECT_EQ(s.ExitCode(), 2);
  EXPECT_NE(s.message().find("checksum"), std::string::npos);
}

TEST(CheckpointTest, NeverOverwritesACompleteCheckpoint) {
  testing::TempDir dir;
  GptModel a(Tiny(), CpuKernels());
  a.InitWeights(1);
  TrainerState st;
  st.step = 4;
  ASSERT_TRUE(SaveCheckpoint(Env::Default(), dir.path(), a, nullptr, st, {"{}", "d", "h"}).ok());
  std::string before = *Env::Default().ReadFile(dir.File("step-00000004/model.safetensors"));
  a.InitWeights(2);
  ASSERT_TRUE(SaveCheckpoint(Env::Default(), dir.path(), a, nullptr, st, {"{}", "d", "h"}).ok());
  EXPECT_EQ(*Env::Default().ReadFile(dir.File("step-00000004/model.safetensors")), before);
}

}  // namespace
}  // namespace anneal
