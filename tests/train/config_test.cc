#include "train/config.h"

#include <gtest/gtest.h>

namespace anneal {
namespace {

const char* kYaml = R"(
model: {vocab_size: 300, max_seq_len: 64, n_layer: 2, n_head: 4, n_embd: 32}
data: {dir: /tmp/x, seq_len: 32, batch_size: 2}
train: {steps: 10}
)";

TEST(TrainConfigTest, ParsesDefaultsAndOverrides) {
  auto c = TrainConfig::Parse(kYaml, {"optim.lr=0.01", "train.grad_accum=4"}, "t.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model.vocab_size, 300);
  EXPECT_EQ(c->model.padded_vocab, 384);
  EXPECT_EQ(c->train.steps, 10);
  EXPECT_FLOAT_EQ(c->optim.lr, 0.01f);
  EXPECT_EQ(c->train.grad_accum, 4);
  EXPECT_EQ(c->optim.decay_steps, 10);  // defaults to train.steps
  EXPECT_EQ(c->values.at("data.dir"), "/tmp/x");
}

TEST(TrainConfigTest, APresetTakesTheVocabularyAndContextGiven) {
  auto c = TrainConfig::Parse("model:\n  preset: llama-tiny\ndata:\n  dir: /tmp/x\n",
                              {"model.vocab_size=128256", "model.max_seq_len=512"},
                              "t.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model.family, "llama");
  EXPECT_EQ(c->model.vocab_size, 128256);
  EXPECT_EQ(c->model.padded_vocab, 128256);
  EXPECT_EQ(c->model.max_seq_len, 512);
  EXPECT_EQ(c->model.n_embd, ModelConfig::Preset("llama-tiny")->n_embd);
  auto plain = TrainConfig::Parse("model:\n  preset: llama-tiny\ndata:\n  dir: /tmp/x\n", {}, "t.yaml");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->model.vocab_size, ModelConfig::Preset("llama-tiny")->vocab_size);
  // A value equal to the keys' defaults is still given; the resolved config records what was used,
  // so replaying it (anneal eval does, from a checkpoint's lineage) builds the same model.
  auto big = TrainConfig::Parse("model:\n  preset: llama-3.2-1b\ndata:\n  dir: /tmp/x\n",
                                {"model.vocab_size=50257", "model.max_seq_len=256"}, "t.yaml");
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(big->model.vocab_size, 50257);
  EXPECT_EQ(big->model.max_seq_len, 256);
  auto preset = TrainConfig::Parse("model:\n  preset: llama-3.2-1b\ndata:\n  dir: /tmp/x\n", {}, "t.yaml");
  ASSERT_TRUE(preset.ok());
  EXPECT_EQ(preset->values.at("model.vocab_size"), "128256");
  std::vector<std::string> replay;
  for (const auto& [k, v] : preset->values) replay.push_back(k + "=" + v);
  auto again = TrainConfig::Parse("", replay, "replay");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->model.vocab_size, 128256);
  EXPECT_EQ(again->model.max_seq_len, preset->model.max_seq_len);
}

TEST(TrainConfigTest, UnknownKeysNameTheClosestValidKey) {
  auto c = TrainConfig::Parse(kYaml, {"optim.learning_rate=1", "trian.steps=3", "model.n_heads=2"}, "t.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().ExitCode(), 2);
  const std::string& m = c.status().message();
  EXPECT_NE(m.find("'trian.steps' (did you mean 'train.steps'?)"), std::string::npos) << m;
  EXPECT_NE(m.find("'model.n_heads' (did you mean 'model.n_head'?)"), std::string::npos) << m;
  EXPECT_NE(m.find("optim.learning_rate"), std::string::npos) << m;
}

TEST(TrainConfigTest, AnOverridesMistakeIsBlamedOnItsSet) {
  auto c = TrainConfig::Parse(kYaml, {"optim.lrr=1"}, "t.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "--set optim.lrr=1: unknown key 'optim.lrr' (did you mean 'optim.lr'?)");
  c = TrainConfig::Parse(kYaml, {"train.steps=ten"}, "t.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message().rfind("--set train.steps=ten: train.steps = 'ten' must be an integer", 0), 0u)
      << c.status().message();
  // The file's own mistake stays the file's, beside an override's.
  c = TrainConfig::Parse(std::string(kYaml) + "optim: {lrr: 1}\n", {"data.batch_size=x"}, "t.yaml");
  ASSERT_FALSE(c.ok());
  const std::string& m = c.status().message();
  EXPECT_EQ(m.rfind("t.yaml: unknown key 'optim.lrr'", 0), 0u) << m;
  EXPECT_NE(m.find("; --set data.batch_size=x: data.batch_size = 'x' must be"), std::string::npos) << m;
}

TEST(TrainConfigTest, TheResolvedYamlReadsBackToTheSameValues) {
  auto c = TrainConfig::Parse(kYaml, {"optim.lr=0.01", "train.checkpoint_dir=s3://b/p x", "train.profile_steps=3,5"},
                              "t.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::string y = c->ResolvedYaml();
  EXPECT_NE(y.find("optim:\n  lr: 0.01\n"), std::string::npos) << y;
  EXPECT_NE(y.find("  checkpoint_dir: \"s3://b/p x\"\n"), std::string::npos) << y;
  EXPECT_NE(y.find("  warmup_steps: 10\n"), std::string::npos) << y;  // a default
  auto back = TrainConfig::Parse(y, {}, "printed");
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << y;
  EXPECT_EQ(back->values, c->values);
  EXPECT_EQ(back->values.size(), TrainConfig::Keys().size());
}

TEST(TrainConfigTest, ValidatesEverythingBeforeWork) {
  EXPECT_NE(TrainConfig::Parse(kYaml, {"model.n_head=5"}, "t").status().message().find("not divisible by n_head 5"),
            std::string::npos);
  EXPECT_NE(TrainConfig::Parse(kYaml, {"data.seq_len=65"}, "t").status().message().find("longer than the model's"),
            std::string::npos);
  EXPECT_NE(TrainConfig::Parse(kYaml, {"train.steps=ten"}, "t").status().message().find("must be an integer"),
            std::string::npos);
  EXPECT_NE(TrainConfig::Parse(kYaml, {"train.resume=maybe"}, "t").status().message().find("auto or none"),
            std::string::npos);
  EXPECT_FALSE(TrainConfig::Parse("model: [1, 2", {}, "t").ok());
  EXPECT_NE(TrainConfig::Parse("train: {steps: 1}", {}, "t").status().message().find("data.dir is required"),
            std::string::npos);
}

// One way to choose the backend (issue 35, item 6): train.kernels; train.device is its deprecated alias.
TEST(TrainConfigTest, TrainDeviceIsADeprecatedAliasOfTrainKernels) {
  auto k = TrainConfig::Parse(kYaml, {"train.kernels=ref"}, "t");
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_EQ(k->train.kernels, "ref");
  EXPECT_FALSE(k->train.on_gpu());  // derived from the kernels
  EXPECT_TRUE(k->deprecations.empty());
  EXPECT_EQ(k->DeprecationText(), "");

  auto d = TrainConfig::Parse(kYaml, {"train.device=cpu", "train.kernels=ref"}, "t");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->train.kernels, "ref");  // an alias of cpu keeps the kernels given
  ASSERT_EQ(d->deprecations.size(), 1u);
  EXPECT_NE(d->deprecations[0].find("train.device is deprecated: write train.kernels = ref"), std::string::npos);
  EXPECT_EQ(d->DeprecationText().rfind("anneal: warning: train.device is deprecated", 0), 0u);

  const std::string both = TrainConfig::Parse(kYaml, {"train.device=cuda", "train.kernels=ref"}, "t").status().message();
  EXPECT_NE(both.find("train.kernels = ref runs on the CPU but train.device = cuda"), std::string::npos) << both;
  EXPECT_NE(TrainConfig::Parse(kYaml, {"train.device=tpu"}, "t").status().message().find("train.device"),
            std::string::npos);
}

TEST(TrainConfigTest, EditDistance) {
  EXPECT_EQ(EditDistance("steps", "steps"), 0u);
  EXPECT_EQ(EditDistance("stpes", "steps"), 2u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
}

}  // namespace
}  // namespace anneal
