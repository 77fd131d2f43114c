// The seal: training, a checkpoint save and resume, validation and sampling run on a backend whose
// memory is PROT_NONE outside its own ops (tests/testing/sealed_backend.h) — so nothing outside the
// backend touches tensor memory, which is what a GPU backend needs — and give the cpu backend's bits.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <filesystem>
#include <memory>

#include "ckpt/checkpoint.h"
#include "train/checkpoint_tensors.h"
#include "core/env.h"
#include "data/dataset.h"
#include "data/shard.h"
#include "kernels/registry.h"
#include "model/generate.h"
#include "testing/sealed_backend.h"
#include "testing/temp_dir.h"
#include "train/trainer.h"

namespace anneal {
namespace {

testing::SealedBackend& Sealed() {
  static testing::SealedBackend* b = [] {
    auto owned = std::make_unique<testing::SealedBackend>("sealed", CpuBackend());
    auto* p = owned.get();
    RegisterBackend(std::move(owned));
    return p;
  }();
  return *b;
}

// A GPT-2-vocabulary dataset (dataset.json, one train and one val shard).
std::string MakeDataset(const testing::TempDir& dir) {
  const std::string out = dir.File("ds");
  EXPECT_TRUE(Env::Default().CreateDirs(out).ok());
  DatasetInfo d;
  d.tokenizer = "gpt2";
  d.vocab_size = 50257;
  d.eot = 50256;
  d.token_bytes = 2;
  for (const char* split : {"train", "val"}) {
    std::vector<uint32_t> toks(split[0] == 't' ? 4000 : 1000);
    for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<uint32_t>((i * 7919 + 13) % 50257);
    const std::string name = std::string(split) + "_000000.bin";
    auto sum = WriteShard(Env::Default(), JoinPath(out, name), toks, 2);
    EXPECT_TRUE(sum.ok());
    d.shards.push_back({split, name, toks.size(), 1, *sum});
  }
  EXPECT_TRUE(Env::Default().WriteFileAtomic(JoinPath(out, "dataset.json"), d.ToJson()).ok());
  return out;
}

Result<TrainResult> Train(const std::string& ds, const std::string& ckpt, const std::string& kernels, int steps) {
  const std::string yaml = "model: {vocab_size: 50257, max_seq_len: 16, n_layer: 1, n_head: 2, n_embd: 8}\n"
                           "data: {dir: " + ds + ", seq_len: 16, batch_size: 2, seed: 5}\n"
                           "optim: {lr: 1.0e-2, warmup_steps: 1}\n"
                           "train: {log_every: 1, eval_every: 2, eval_batches: 2, checkpoint_every: 2, seed: 21,"
                           " resume: auto, threads: 1, peak_gflops: 100}\n";
  ANNEAL_ASSIGN_OR_RETURN(TrainConfig c, TrainConfig::Parse(yaml, {"train.kernels=" + kernels, "train.steps=" +
                                                                   std::to_string(steps), "train.checkpoint_dir=" + ckpt},
                                                            "sealed.yaml"));
  std::atomic<bool> stop{false};
  return RunTraining(c, stop, [](const std::string&) {});
}

TEST(SealedBackendTest, TouchingItsMemoryOutsideAnOpDies) {
  testing::SealedBackend& b = Sealed();
  auto buf = b.Allocate(DType::kF32, 16, "probe");
  ASSERT_TRUE(buf.ok());
  float* p = static_cast<float*>(buf->data());
  EXPECT_DEATH({ p[3] = 1.0f; }, "");
  // Inside the backend's ops and copies it is reachable.
  const float ones[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  const TV v = buf->View(DType::kF32, {16});
  b.CopyFromHost(v, ones, b.DefaultStream());
  b.Scale(b.DefaultStream(), v, 3.0f);
  float back[16];
  b.CopyToHost(back, v, b.DefaultStream());
  EXPECT_EQ(back[5], 3.0f);
}

TEST(SealedBackendTest, TrainSaveResumeEvaluateAndSampleNeverTouchTensorMemory) {
  testing::TempDir dir;
  const std::string ds = MakeDataset(dir);
  const long ops_before = Sealed().ops();
  // Two steps (validation and a checkpoint at step 2), then a resume to step 3, on each backend.
  auto a2 = Train(ds, dir.File("sealed"), "sealed", 2);
  ASSERT_TRUE(a2.ok()) << a2.status().ToString();
  auto a3 = Train(ds, dir.File("sealed"), "sealed", 3);
  ASSERT_TRUE(a3.ok()) << a3.status().ToString();
  auto c2 = Train(ds, dir.File("cpu"), "cpu", 2);
  auto c3 = Train(ds, dir.File("cpu"), "cpu", 3);
  ASSERT_TRUE(c2.ok() && c3.ok());
  EXPECT_GT(Sealed().ops(), ops_before + 100);  // the runs did run on the sealed backend
  EXPECT_EQ(a3->steps_done, 3);
  EXPECT_GE(a2->last_val_loss, 0.0);  // validation ran
  EXPECT_EQ(a2->last_val_loss, c2->last_val_loss);
  EXPECT_EQ(a3->last_loss, c3->last_loss);
  EXPECT_EQ(a3->state_hash, c3->state_hash);

  // Sampling from the sealed run's checkpoint: the same tokens as on the cpu backend.
  auto sample = [&](Backend& b) -> std::vector<uint32_t> {
    auto store = OpenCheckpointStore(dir.File("sealed"));
    EXPECT_TRUE(store.ok());
    auto cfg = ReadCheckpointModelConfig(**store, "step-00000002");
    EXPECT_TRUE(cfg.ok());
    DecoderModel m(*cfg, b);
    EXPECT_TRUE(LoadCheckpoint(**store, "step-00000002", TensorsOf(m, nullptr), nullptr).ok());
    KvGenerator g(m);
    SampleOptions o;
    o.max_tokens = 10;
    o.temperature = 0.8f;
    o.top_k = 20;
    o.seed = 99;
    auto out = g.Generate({464, 3726, 286}, o, -1, nullptr);
    EXPECT_TRUE(out.ok());
    return out.ok() ? *out : std::vector<uint32_t>();
  };
  const std::vector<uint32_t> sealed = sample(Sealed()), cpu = sample(CpuBackend());
  EXPECT_EQ(sealed.size(), 10u);
  EXPECT_EQ(sealed, cpu);
}

// A backend the host cannot read snapshots through SnapshotStaging: the step-2 checkpoint is taken
// while steps 3 and 4 run (written by the checkpointer's thread from the staged copies). It holds
// the step-2 state: resumed from it, the run reaches the uninterrupted run's hash, as on the cpu.
TEST(SealedBackendTest, StagedSnapshotTakenWhileTrainingGoesOnResumesToTheSameState) {
  testing::TempDir dir;
  const std::string ds = MakeDataset(dir);
  Sealed();  // registers "sealed"
  auto a4 = Train(ds, dir.File("sealed"), "sealed", 4);
  auto c4 = Train(ds, dir.File("cpu"), "cpu", 4);
  ASSERT_TRUE(a4.ok()) << a4.status().ToString();
  ASSERT_TRUE(c4.ok()) << c4.status().ToString();
  EXPECT_EQ(a4->state_hash, c4->state_hash);
  ASSERT_TRUE(std::filesystem::exists(dir.File("sealed") + "/step-00000002/manifest.json"));
  std::filesystem::remove_all(dir.File("sealed") + "/step-00000004");
  auto r4 = Train(ds, dir.File("sealed"), "sealed", 4);
  ASSERT_TRUE(r4.ok()) << r4.status().ToString();
  EXPECT_EQ(r4->steps_done, 4);
  EXPECT_EQ(r4->state_hash, c4->state_hash);
}

}  // namespace
}  // namespace anneal
