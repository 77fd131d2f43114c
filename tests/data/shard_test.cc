#include "data/shard.h"

#include <gtest/gtest.h>

#include <cstring>

#include "testing/fault_env.h"
#include "testing/temp_dir.h"

namespace anneal {
namespace {

TEST(ShardTest, RoundTripUint16AndUint32) {
  testing::TempDir dir;
  for (uint32_t width : {2u, 4u}) {
    std::vector<uint32_t> toks = {50256, 1, 2, 65535, 7};
    if (width == 4) toks.push_back(100000);
    std::string name = std::to_string(width);
    name += ".bin";  // (a one-expression concatenation trips a GCC 12 -Wrestrict false positive)
    std::string p = dir.File(name);
    ASSERT_TRUE(WriteShard(Env::Default(), p, toks, width).ok());
    EXPECT_EQ(*Env::Default().FileSize(p), kShardHeaderBytes + toks.size() * width);
    auto r = ShardReader::Open(Env::Default(), p);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ((*r)->tokens(), toks.size());
    EXPECT_EQ((*r)->token_bytes(), width);
    std::vector<uint32_t> back(toks.size());
    (*r)->Read(0, toks.size(), back.data());
    EXPECT_EQ(back, toks);
  }
}

TEST(ShardTest, HeaderIsLlmcs) {
  std::string img = EncodeShard({1, 2, 3}, 2);
  int32_t h[4];
  std::memcpy(h, img.data(), sizeof(h));
  EXPECT_EQ(h[0], 20240520);
  EXPECT_EQ(h[1], 1);
  EXPECT_EQ(h[2], 3);
  EXPECT_EQ(h[3], 0);
  img = EncodeShard({1, 2, 3}, 4);
  std::memcpy(h, img.data(), sizeof(h));
  EXPECT_EQ(h[0], 20240801);
  EXPECT_EQ(h[1], 7);
}

TEST(ShardTest, TruncatedShardIsNamedWithFix) {
  testing::TempDir dir;
  std::string img = EncodeShard({1, 2, 3, 4}, 2);
  std::string p = dir.Write("train_000000.bin", img.substr(0, img.size() - 2));
  auto r = ShardReader::Open(Env::Default(), p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().ExitCode(), 2);
  EXPECT_NE(r.status().message().find(p), std::string::npos);
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos);
  EXPECT_NE(r.status().message().find("anneal prep"), std::string::npos);
}

TEST(ShardTest, WrongMagicAndShortFile) {
  testing::TempDir dir;
  std::string img = EncodeShard({1, 2}, 2);
  img[0] ^= 0x55;
  EXPECT_FALSE(ShardReader::Open(Env::Default(), dir.Write("a.bin", img)).ok());
  EXPECT_FALSE(ShardReader::Open(Env::Default(), dir.Write("b.bin", "short")).ok());
}

TEST(ShardTest, FailedWriteLeavesNoShard) {
  testing::TempDir dir;
  testing::FaultEnv env(Env::Default());
  env.FailAppendNumber(1);
  std::string p = dir.File("train_000000.bin");
  EXPECT_FALSE(WriteShard(env, p, {1, 2, 3}, 2).ok());
  EXPECT_FALSE(Env::Default().Exists(p));
  EXPECT_TRUE(Env::Default().ListDir(dir.path())->empty());
}

}  // namespace
}  // namespace anneal
