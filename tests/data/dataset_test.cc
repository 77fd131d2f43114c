#include "data/dataset.h"

#include <gtest/gtest.h>

#include "testing/temp_dir.h"

namespace anneal {
namespace {

TEST(DatasetTest, JsonRoundTrip) {
  DatasetInfo d;
  d.tokenizer = "gpt2";
  d.vocab_size = 50257;
  d.eot = 50256;
  d.token_bytes = 2;
  d.inputs_hash = "0123456789abcdef";
  d.val_fraction = 0.25;
  d.shards = {{"train", "train_000000.bin", 100, 3, 0xabcULL}, {"val", "val_000000.bin", 10, 1, 0xdefULL}};
  auto back = DatasetInfo::FromJson(d.ToJson(), "x");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->has_manifest);
  EXPECT_EQ(back->vocab_size, 50257u);
  ASSERT_EQ(back->shards.size(), 2u);
  EXPECT_EQ(back->shards[1].file, "val_000000.bin");
  EXPECT_EQ(*back->shards[0].xxh64, 0xabcULL);
  EXPECT_EQ(back->Tokens("train"), 100u);
}

TEST(DatasetTest, BadManifestNamesField) {
  auto r = DatasetInfo::FromJson(R"({"format":"anneal.dataset","version":1,"tokenizer":"gpt2"})", "d/dataset.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().ExitCode(), 2);
  EXPECT_NE(r.status().message().find("d/dataset.json"), std::string::npos);
  EXPECT_FALSE(DatasetInfo::FromJson(R"({"format":"x"})", "d").ok());
  EXPECT_FALSE(DatasetInfo::FromJson(
                   R"({"format":"anneal.dataset","version":1,"tokenizer":"gpt2","vocab_size":1,"eot":0,)"
                   R"("token_bytes":2,"shards":[{"split":"train","file":"../etc/passwd","tokens":1}]})",
                   "d")
                   .ok());
}

TEST(DatasetTest, PlainLlmcFolderListedByName) {
  testing::TempDir dir;
  dir.Write("fineweb_val_000000.bin", "x");
  dir.Write("fineweb_train_000002.bin", "x");
  dir.Write("fineweb_train_000001.bin", "x");
  dir.Write("README.md", "x");
  auto d = LoadDataset(Env::Default(), dir.path());
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->has_manifest);
  ASSERT_EQ(d->shards.size(), 3u);
  EXPECT_EQ(d->shards[0].file, "fineweb_train_000001.bin");
  EXPECT_EQ(d->shards[2].split, "val");
}

TEST(DatasetTest, EmptyFolderExplainsHowToPrep) {
  testing::TempDir dir;
  auto d = LoadDataset(Env::Default(), dir.path());
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("anneal prep"), std::string::npos);
}

}  // namespace
}  // namespace anneal
