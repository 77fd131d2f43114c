#include "data/loader.h"
#include "data/channel.h"

#include <gtest/gtest.h>

#include <set>

#include "data/dataset.h"
#include "testing/temp_dir.h"

namespace anneal {
namespace {

// A dataset of three shards whose token i is (shard * 100000 + i) % 50000, with dataset.json.
std::string MakeDataset(const testing::TempDir& dir, const std::vector<uint64_t>& sizes) {
  std::string out = dir.File("ds");
  EXPECT_TRUE(Env::Default().CreateDirs(out).ok());
  DatasetInfo d;
  d.tokenizer = "gpt2";
  d.vocab_size = 50257;
  d.eot = 50256;
  d.token_bytes = 2;
  for (size_t s = 0; s < sizes.size(); ++s) {
    std::vector<uint32_t> toks(sizes[s]);
    for (uint64_t i = 0; i < sizes[s]; ++i) toks[i] = static_cast<uint32_t>((s * 7919 + i) % 50000);
    std::string name = "train_00000" + std::to_string(s) + ".bin";
    auto sum = WriteShard(Env::Default(), JoinPath(out, name), toks, 2);
    EXPECT_TRUE(sum.ok());
    d.shards.push_back({"train", name, sizes[s], 1, *sum});
  }
  EXPECT_TRUE(Env::Default().WriteFileAtomic(JoinPath(out, "dataset.json"), d.ToJson()).ok());
  return out;
}

LoaderOptions Opts(const std::string& dir, int B, int T, int rank, int dp) {
  LoaderOptions o;
  o.dir = dir;
  o.batch = B;
  o.seq_len = T;
  o.dp_rank = rank;
  o.dp_size = dp;
  o.seed = 1234;
  o.vocab_size = 50257;
  return o;
}

TEST(LoaderTest, WindowsAreConsecutiveTokensWithinOneShard) {
  testing::TempDir dir;
  std::string ds = MakeDataset(dir, {1000, 333, 2048});
  auto l = DataLoader::Open(Env::Default(), Opts(ds, 4, 16, 0, 1));
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ((*l)->num_samples(), 999u / 16 + 332u / 16 + 2047u / 16);
  std::vector<uint32_t> batch;
  for (int step = 0; step < 50; ++step) {
    (*l)->Next(&batch);
    ASSERT_EQ(batch.size(), 4u * 17u);
    for (int b = 0; b < 4; ++b) {
      for (int t = 1; t < 17; ++t) {
        uint32_t prev = batch[b * 17 + t - 1], cur = batch[b * 17 + t];
        EXPECT_EQ(cur, (prev + 1) % 50000);  // windows never cross a shard boundary
      }
    }
  }
}

// Elastic determinism: 4 ranks x 1 micro-step and 1 rank x 4 micro-steps see the same samples in
// every optimizer step, in the same order when ranks are concatenated.
TEST(LoaderTest, ElasticDeterminismAcrossDataParallelSizes) {
  testing::TempDir dir;
  std::string ds = MakeDataset(dir, {5000, 3000, 4001});
  const int B = 3, T = 32, dp = 4, steps = 40;  // 40 steps * 12 samples > one epoch of 374
  std::vector<std::unique_ptr<DataLoader>> ranks;
  for (int r = 0; r < dp; ++r) ranks.push_back(std::move(DataLoader::Open(Env::Default(), Opts(ds, B, T, r, dp)).value()));
  auto single = std::move(DataLoader::Open(Env::Default(), Opts(ds, B, T, 0, 1)).value());
  std::vector<uint32_t> a, b;
  for (int step = 0; step < steps; ++step) {
    std::vector<uint32_t> multi, one;
    for (int r = 0; r < dp; ++r) {
      ranks[r]->Next(&a);
      multi.insert(multi.end(), a.begin(), a.end());
    }
    for (int m = 0; m < dp; ++m) {
      single->Next(&b);
      one.insert(one.end(), b.begin(), b.end());
    }
    ASSERT_EQ(multi, one) << "step " << step;
  }
  EXPECT_EQ(ranks[0]->position().samples, single->position().samples);
}

TEST(LoaderTest, ResumeContinuesWithTheNextSampleAtAnotherDpSize) {
  testing::TempDir dir;
  std::string ds = MakeDataset(dir, {8000});
  auto full = std::move(DataLoader::Open(Env::Default(), Opts(ds, 2, 16, 0, 1)).value());
  std::vector<uint32_t> batch, expected;
  for (int i = 0; i < 10; ++i) full->Next(&batch);
  LoaderPosition saved = full->position();
  for (int i = 0; i < 4; ++i) {
    full->Next(&batch);
    expected.insert(expected.end(), batch.begin(), batch.end());
  }
  // Resume the same stream on 2 ranks with B=2: rank 0 + rank 1 of two steps == the next 4 batches.
  auto r0 = std::move(DataLoader::Open(Env::Default(), Opts(ds, 2, 16, 0, 2)).value());
  auto r1 = std::move(DataLoader::Open(Env::Default(), Opts(ds, 2, 16, 1, 2)).value());
  auto restored = LoaderPosition::FromJson(saved.ToJson());
  ASSERT_TRUE(r0->Seek(*restored).ok());
  ASSERT_TRUE(r1->Seek(*restored).ok());
  std::vector<uint32_t> got;
  for (int s = 0; s < 2; ++s) {
    r0->Next(&batch);
    got.insert(got.end(), batch.begin(), batch.end());
    r1->Next(&batch);
    got.insert(got.end(), batch.begin(), batch.end());
  }
  EXPECT_EQ(got, expected);
  // A position that dp*B does not divide, or another seed, is refused with the reason.
  auto r3 = std::move(DataLoader::Open(Env::Default(), Opts(ds, 3, 16, 0, 1)).value());
  EXPECT_EQ(r3->Seek({1234, 20}).ExitCode(), 2);
  EXPECT_EQ(r3->Seek({99, 21}).ExitCode(), 2);
}

TEST(LoaderTest, CorruptShardDetectedByChecksum) {
  testing::TempDir dir;
  std::string ds = MakeDataset(dir, {1000});
  std::string p = JoinPath(ds, "train_000000.bin");
  std::string bytes = *Env::Default().ReadFile(p);
  bytes[2000] ^= 1;
  ASSERT_TRUE(Env::Default().WriteFileAtomic(p, bytes).ok());
  auto l = DataLoader::Open(Env::Default(), Opts(ds, 1, 8, 0, 1));
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().ExitCode(), 2);
  EXPECT_NE(l.status().message().find("corrupt"), std::string::npos);
  EXPECT_NE(l.status().message().find(p), std::string::npos);
  auto o = Opts(ds, 1, 8, 0, 1);
  o.verify_checksums = false;
  EXPECT_TRUE(DataLoader::Open(Env::Default(), o).ok());
}

TEST(LoaderTest, VocabularyMismatchIsRefused) {
  testing::TempDir dir;
  std::string ds = MakeDataset(dir, {1000});
  auto o = Opts(ds, 1, 8, 0, 1);
  o.vocab_size = 32000;
  auto l = DataLoader::Open(Env::Default(), o);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("vocabulary"), std::string::npos);
}

TEST(LoaderTest, PlainLlmcFolderWithUint32Shards) {
  testing::TempDir dir;
  std::string out = dir.File("llmc");
  ASSERT_TRUE(Env::Default().CreateDirs(out).ok());
  std::vector<uint32_t> toks(500);
  for (uint32_t i = 0; i < 500; ++i) toks[i] = 70000 + i;  // ids above 65,535 need the uint32 format
  ASSERT_TRUE(WriteShard(Env::Default(), JoinPath(out, "big_train_000000.bin"), toks, 4).ok());
  auto o = Opts(out, 2, 10, 0, 1);
  o.vocab_size = 100277;
  auto l = DataLoader::Open(Env::Default(), o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  std::vector<uint32_t> batch;
  (*l)->Next(&batch);
  EXPECT_GE(batch[0], 70000u);
  o.vocab_size = 50257;  // GPT-2 cannot read these ids: another vocabulary
  auto bad = DataLoader::Open(Env::Default(), o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("another tokenizer"), std::string::npos);
}

TEST(LoaderTest, TooShortForOneWindow) {
  testing::TempDir dir;
  std::string ds = MakeDataset(dir, {10});
  auto l = DataLoader::Open(Env::Default(), Opts(ds, 1, 64, 0, 1));
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("seq_len"), std::string::npos);
}

// fastfile: the same dataset read as objects by range reads (small blocks, so windows cross blocks
// and read-ahead runs) yields exactly the batches of the mapped files; a shard rewritten under the
// loader is an error, never a mix of versions.
TEST(LoaderTest, RemoteShardsGiveTheSameBatchesAndCatchARewrite) {
  testing::TempDir dir;
  std::string ds = MakeDataset(dir, {5000, 3000, 4001});
  auto local = DataLoader::Open(Env::Default(), Opts(ds, 4, 64, 0, 1));
  ASSERT_TRUE(local.ok());
  LoaderOptions ro = Opts(ds, 4, 64, 0, 1);
  auto remote_ds = OpenRemoteDataset("file://" + ds);
  ASSERT_TRUE(remote_ds.ok()) << remote_ds.status().message();
  (*remote_ds)->block_bytes = 4096;
  (*remote_ds)->blocks = 2;  // fewer than a shard has: blocks are fetched again later
  ro.remote = *remote_ds;
  auto remote = DataLoader::Open(Env::Default(), ro);
  ASSERT_TRUE(remote.ok()) << remote.status().message();
  std::vector<uint32_t> a, b;
  for (int i = 0; i < 40; ++i) {
    (*local)->Next(&a);
    (*remote)->Next(&b);
    ASSERT_EQ(a, b) << "batch " << i;
  }
  EXPECT_TRUE((*remote)->status().ok());
  // Rewrite a shard (a new file renamed over it: a new ETag) and read on.
  std::vector<uint32_t> toks(5000, 7);
  ASSERT_TRUE(WriteShard(Env::Default(), JoinPath(ds, "train_000000.bin"), toks, 2).ok());
  for (int i = 0; i < 40 && (*remote)->status().ok(); ++i) (*remote)->Next(&b);
  Status s = (*remote)->status();
  EXPECT_EQ(s.code(), Code::kPeer);
  EXPECT_NE(s.message().find("changed while it was being read"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace anneal
