#include "data/prep.h"

#include <gtest/gtest.h>

#include "data/dataset.h"
#include "data/shard.h"
#include "testing/fault_env.h"
#include "testing/temp_dir.h"

namespace anneal {
namespace {

// A small corpus: text files (one document each) in a folder and a JSON Lines file of many docs.
void WriteCorpus(const testing::TempDir& dir) {
  for (int f = 0; f < 5; ++f) {
    std::string text;
    for (int i = 0; i < 40; ++i) text += "Book " + std::to_string(f) + ", verse " + std::to_string(i) + ": and it was good.\n";
    dir.Write("in/books/" + std::to_string(f) + ".txt", text);
  }
  std::string jsonl;
  for (int i = 0; i < 300; ++i) {
    jsonl += "{\"id\": " + std::to_string(i) + ", \"text\": \"Document number " + std::to_string(i) +
             " says \\\"hello\\\" \\u00e9\\n with a second line.\"}\n";
  }
  dir.Write("in/docs.jsonl", jsonl);
}

PrepOptions Opts(const testing::TempDir& dir, const std::string& out, int workers) {
  PrepOptions o;
  o.inputs = {dir.File("in/books"), dir.File("in/docs.jsonl")};
  o.output = dir.File(out);
  o.workers = workers;
  o.val_fraction = 0.2;
  o.unit_bytes = 4096;
  o.quiet = true;
  return o;
}

std::map<std::string, std::string> Shards(const std::string& out) {
  std::map<std::string, std::string> m;
  for (const auto& n : *Env::Default().ListDir(out)) {
    if (n.size() > 4 && n.substr(n.size() - 4) == ".bin") m[n] = *Env::Default().ReadFile(JoinPath(out, n));
  }
  return m;
}

TEST(PrepTest, ShardBytesDoNotDependOnWorkerCount) {
  testing::TempDir dir;
  WriteCorpus(dir);
  auto r1 = RunPrep(Env::Default(), Opts(dir, "out1", 1));
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  auto r3 = RunPrep(Env::Default(), Opts(dir, "out3", 3));
  ASSERT_TRUE(r3.ok()) << r3.status().ToString();
  EXPECT_GT(r1->units_total, 3u);
  EXPECT_EQ(r1->docs, 5u + 300u);
  auto s1 = Shards(dir.File("out1")), s3 = Shards(dir.File("out3"));
  EXPECT_EQ(s1.size(), s3.size());
  EXPECT_TRUE(s1 == s3);
  auto d1 = LoadDataset(Env::Default(), dir.File("out1"));
  auto d3 = LoadDataset(Env::Default(), dir.File("out3"));
  ASSERT_TRUE(d1.ok() && d3.ok());
  EXPECT_EQ(d1->inputs_hash, d3->inputs_hash);
  EXPECT_GT(d1->Tokens("val"), 0u);
  EXPECT_GT(d1->Tokens("train"), d1->Tokens("val"));
}

TEST(PrepTest, EveryDocumentStartsWithEndOfText) {
  testing::TempDir dir;
  WriteCorpus(dir);
  auto o = Opts(dir, "out", 2);
  ASSERT_TRUE(RunPrep(Env::Default(), o).ok());
  auto d = *LoadDataset(Env::Default(), o.output);
  uint64_t docs = 0, eots = 0;
  for (const auto& s : d.shards) {
    auto r = *ShardReader::Open(Env::Default(), JoinPath(o.output, s.file));
    EXPECT_EQ(r->Token(0), 50256u) << s.file;
    for (uint64_t i = 0; i < r->tokens(); ++i) eots += r->Token(i) == 50256u;
    docs += s.docs;
    EXPECT_EQ(r->Checksum(), *s.xxh64);
  }
  EXPECT_EQ(docs, 305u);
  EXPECT_EQ(eots, docs);  // the corpus itself never yields id 50256
}

TEST(PrepTest, RerunRedoesOnlyMissingUnits) {
  testing::TempDir dir;
  WriteCorpus(dir);
  auto o = Opts(dir, "out", 2);
  auto first = RunPrep(Env::Default(), o);
  ASSERT_TRUE(first.ok());
  auto before = Shards(o.output);
  // Lose unit 2's record and shard, and leave a torn temporary file as a killed writer would.
  ASSERT_TRUE(Env::Default().Remove(JoinPath(o.output, ".units/000002.json")).ok());
  ASSERT_TRUE(Env::Default().Remove(JoinPath(o.output, "train_000002.bin")).ok());
  std::string torn2 = JoinPath(o.output, "train_000002.bin.tmp.1.1");
  std::string torn3 = JoinPath(o.output, "train_000003.bin.tmp.1.1");
  ASSERT_TRUE(Env::Default().WriteFileAtomic(torn2, "torn").ok());
  ASSERT_TRUE(Env::Default().WriteFileAtomic(torn3, "torn").ok());
  auto again = RunPrep(Env::Default(), o);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->units_done, 1u);
  EXPECT_EQ(again->units_skipped, first->units_total - 1);
  EXPECT_TRUE(Shards(o.output) == before);
  // The redone unit's leftover temporary is removed; another unit's is not this run's to touch.
  EXPECT_FALSE(Env::Default().Exists(torn2));
  EXPECT_TRUE(Env::Default().Exists(torn3));
}

TEST(PrepTest, ShardsOfAnotherPlanAreNamedAndKept) {
  testing::TempDir dir;
  WriteCorpus(dir);
  PrepOptions o = Opts(dir, "out", 2);
  auto first = RunPrep(Env::Default(), o);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->orphans.empty());
  ASSERT_GT(first->units_total, 2u);
  o.unit_bytes = 1 << 20;  // one unit now: units 1.. of the first plan are another plan's
  auto second = RunPrep(Env::Default(), o);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  ASSERT_EQ(second->units_total, 1u);
  EXPECT_FALSE(second->orphans.empty());
  auto info = LoadDataset(Env::Default(), dir.File("out"));
  ASSERT_TRUE(info.ok());
  for (const std::string& n : second->orphans) {
    EXPECT_TRUE(Env::Default().Exists(JoinPath(dir.File("out"), n))) << n << " was removed";
    for (const ShardInfo& s : info->shards) EXPECT_NE(s.file, n);
  }
  EXPECT_NE(std::find(second->orphans.begin(), second->orphans.end(), "train_000001.bin"), second->orphans.end());
}

TEST(PrepTest, ShardOfWrongSizeIsRedone) {
  testing::TempDir dir;
  WriteCorpus(dir);
  auto o = Opts(dir, "out", 1);
  ASSERT_TRUE(RunPrep(Env::Default(), o).ok());
  auto before = Shards(o.output);
  std::string p = JoinPath(o.output, "train_000001.bin");
  ASSERT_TRUE(Env::Default().WriteFileAtomic(p, before["train_000001.bin"].substr(0, 1500)).ok());
  auto again = RunPrep(Env::Default(), o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->units_done, 1u);
  EXPECT_TRUE(Shards(o.output) == before);
}

TEST(PrepTest, WriteFailureLeavesNoCompleteLookingOutputAndRerunHeals) {
  testing::TempDir dir;
  WriteCorpus(dir);
  auto clean = Opts(dir, "clean", 1);
  ASSERT_TRUE(RunPrep(Env::Default(), clean).ok());
  for (int fail_at : {1, 4, 7}) {
    testing::FaultEnv env(Env::Default());
    auto o = Opts(dir, "out" + std::to_string(fail_at), 1);
    env.FailAppendNumber(fail_at);
    auto r = RunPrep(env, o);
    ASSERT_FALSE(r.ok()) << "fail_at " << fail_at;
    EXPECT_FALSE(Env::Default().Exists(JoinPath(o.output, "dataset.json")));
    // Whatever shards exist are complete (their size matches the header).
    for (const auto& [name, bytes] : Shards(o.output)) {
      EXPECT_TRUE(ShardReader::Open(Env::Default(), JoinPath(o.output, name)).ok()) << name;
    }
    auto healed = RunPrep(Env::Default(), o);
    ASSERT_TRUE(healed.ok()) << healed.status().ToString();
    EXPECT_EQ(healed->units_done + healed->units_skipped, healed->units_total);
    EXPECT_TRUE(Shards(o.output) == Shards(clean.output));
  }
}

TEST(PrepTest, SeparateWorkerProcessesThenFinalize) {
  testing::TempDir dir;
  WriteCorpus(dir);
  auto all = Opts(dir, "all", 1);
  ASSERT_TRUE(RunPrep(Env::Default(), all).ok());
  auto o = Opts(dir, "split", 1);
  o.num_workers = 2;
  o.finalize_only = true;
  auto early = RunPrep(Env::Default(), o);  // nothing done yet: finalize names the missing unit
  ASSERT_FALSE(early.ok());
  EXPECT_NE(early.status().message().find("--worker-index"), std::string::npos);
  o.finalize_only = false;
  for (int w = 0; w < 2; ++w) {
    o.worker_index = w;
    auto r = RunPrep(Env::Default(), o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_FALSE(r->finalized);
  }
  o.worker_index = -1;
  o.finalize_only = true;
  auto fin = RunPrep(Env::Default(), o);
  ASSERT_TRUE(fin.ok()) << fin.status().ToString();
  EXPECT_TRUE(Shards(o.output) == Shards(all.output));
  EXPECT_EQ(LoadDataset(Env::Default(), o.output)->inputs_hash, LoadDataset(Env::Default(), all.output)->inputs_hash);
}

TEST(PrepTest, BadInputsAreRejectedWithExitCode2) {
  testing::TempDir dir;
  PrepOptions o;
  o.output = dir.File("out");
  o.quiet = true;
  o.inputs = {dir.Write("empty.txt", "")};
  auto r = RunPrep(Env::Default(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().ExitCode(), 2);
  EXPECT_NE(r.status().message().find("empty.txt is empty"), std::string::npos);

  o.inputs = {dir.File("missing.txt")};
  EXPECT_EQ(RunPrep(Env::Default(), o).status().ExitCode(), 2);

  o.inputs = {dir.Write("bad.jsonl", "{\"text\":\"a\"}\n{\"content\":\"b\"}\n")};
  r = RunPrep(Env::Default(), o);
  EXPECT_EQ(r.status().ExitCode(), 2);
  EXPECT_NE(r.status().message().find("no \"text\" field"), std::string::npos);

  o.inputs = {dir.Write("latin1.txt", "caf\xE9\n")};
  r = RunPrep(Env::Default(), o);
  EXPECT_EQ(r.status().ExitCode(), 2);
  EXPECT_NE(r.status().message().find("not valid UTF-8"), std::string::npos);
  EXPECT_FALSE(Env::Default().Exists(JoinPath(o.output, "dataset.json")));
  EXPECT_FALSE(Env::Default().Exists(JoinPath(o.output, "train_000000.bin")));
  o.replace_invalid_utf8 = true;
  EXPECT_TRUE(RunPrep(Env::Default(), o).ok());
}

TEST(PrepTest, PlanDependsOnInputsNotWorkers) {
  testing::TempDir dir;
  WriteCorpus(dir);
  auto a = PlanUnits(Env::Default(), Opts(dir, "x", 1));
  auto b = PlanUnits(Env::Default(), Opts(dir, "x", 7));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i) EXPECT_EQ((*a)[i].plan_key, (*b)[i].plan_key);
  // JSON Lines segments end at line ends.
  for (const auto& u : *a) {
    for (const auto& s : u.segments) {
      if (s.path.find("docs.jsonl") == std::string::npos || s.begin == 0) continue;
      std::string prev = Env::Default().ReadFile(s.path)->substr(s.begin - 1, 1);
      EXPECT_EQ(prev, "\n");
    }
  }
}

}  // namespace
}  // namespace anneal
