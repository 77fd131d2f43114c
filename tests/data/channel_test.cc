#include "data/channel.h"

#include <gtest/gtest.h>

#include "core/env.h"
#include "testing/temp_dir.h"

namespace anneal {
namespace {

// A tiny "dataset": dataset.json naming one shard with its XXH64, and the shard.
std::string MakeSource(const testing::TempDir& d) {
  const std::string shard(4096, 'x');
  d.Write("src/train_0.bin", shard);
  d.Write("src/notes.txt", "not a shard");
  return d.File("src");
}

TEST(DataChannelTest, SharedReadsInPlaceAndRefusesARemoteUri) {
  auto p = PrepareDataChannel("/data/ds", ChannelOptions{});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, "/data/ds");
  EXPECT_EQ(*PrepareDataChannel("file:///data/ds", ChannelOptions{}), "/data/ds");
  auto bad = PrepareDataChannel("s3://bucket/ds", ChannelOptions{});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().ExitCode(), 2);
  EXPECT_NE(bad.status().message().find("use data.mode = file"), std::string::npos);
}

TEST(DataChannelTest, FileModeCopiesOnceAndKeepsWhatIsThere) {
  testing::TempDir d;
  const std::string src = MakeSource(d);
  ChannelOptions o;
  o.mode = "file";
  o.local_dir = d.File("local");
  o.quiet = true;
  auto p = PrepareDataChannel("file://" + src, o);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*Env::Default().ReadFile(d.File("local/train_0.bin")), std::string(4096, 'x'));
  EXPECT_EQ(*Env::Default().ReadFile(d.File("local/notes.txt")), "not a shard");
  EXPECT_NE(Env::Default().ReadFile(d.File("local/.anneal-channel-complete"))->find("4107 bytes copied"),
            std::string::npos);
  // Again: nothing to copy.
  ASSERT_TRUE(PrepareDataChannel("file://" + src, o).ok());
  EXPECT_NE(Env::Default().ReadFile(d.File("local/.anneal-channel-complete"))->find("0 bytes copied, 4107 kept"),
            std::string::npos);
  // Another local rank waits for the marker instead of copying.
  o.local_rank = 1;
  o.wait_s = 1;
  EXPECT_EQ(*PrepareDataChannel("s3://never/read", o), d.File("local"));
}

TEST(DataChannelTest, FileModeChecksShardsAgainstTheDatasetManifest) {
  testing::TempDir d;
  const std::string src = MakeSource(d);
  // dataset.json claiming another checksum for the shard.
  d.Write("src/dataset.json",
          R"({"format":"anneal.dataset","version":1,"tokenizer":"gpt2","vocab_size":50257,"eot":50256,)"
          R"("token_bytes":2,"inputs_hash":"x","val_fraction":0,"unit_bytes":0,"created_by":"test",)"
          R"("shards":[{"split":"train","file":"train_0.bin","tokens":1,"docs":1,"xxh64":"0123456789abcdef"}]})");
  ChannelOptions o;
  o.mode = "file";
  o.local_dir = d.File("local");
  o.quiet = true;
  auto p = PrepareDataChannel("file://" + src, o);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("fails the checksum its dataset.json gives"), std::string::npos)
      << p.status().message();
  EXPECT_FALSE(Env::Default().Exists(d.File("local/.anneal-channel-complete")));
}

}  // namespace
}  // namespace anneal
