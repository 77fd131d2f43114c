// Hugging Face folders without transformers (the peers tier has it: tests/peers/hf_interop_test.sh):
// export -> import round trips per family and dtype, f16 conversion, and a corpus of config.json
// fields and folders anneal refuses, each with its message (exit 2).
#include "ckpt/hf_folder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <fstream>
#include <map>
#include <random>

#include "core/env.h"
#include "core/safetensors.h"
#include "data/hf_tokenizer.h"
#include "data/tokenizer.h"
#include "model/family.h"
#include "tensor/dtype.h"
#include "testing/small_models.h"
#include "testing/temp_dir.h"

namespace anneal {
namespace {

std::vector<float> RandomParams(const ModelConfig& c, uint64_t seed) {
  const ParamLayout l(c);
  std::vector<float> p(l.total_floats(), 0.0f);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.5f);
  for (const ParamInfo& i : l.params()) {
    for (size_t k = 0; k < i.size; ++k) p[i.offset + k] = d(rng);  // canonical rows; padding stays 0
  }
  return p;
}

TEST(HfFolderTest, ExportThenImportGivesTheSameModelAndValues) {
  testing::TempDir dir;
  for (const ModelConfig& c : {ModelConfig::Make(300, 16, 2, 4, 32).value(), SmallLlama(300, 16, 2, 4, 2, 32, 48),
                               SmallLlama(300, 16, 2, 4, 1, 32, 40, true)}) {
    const std::vector<float> p = RandomParams(c, 3);
    for (const char* dt : {"f32", "bf16", "f16"}) {
      SCOPED_TRACE(c.ToString() + " " + dt);
      HfExportOptions o;
      o.dtype = dt;
      o.max_shard_bytes = 20000;  // several shards
      const std::string out = dir.path() + "/" + c.family + std::to_string(c.n_kv_head) + dt;
      ASSERT_TRUE(ExportHfFolder(c, p, out, o).ok());
      EXPECT_TRUE(Env::Default().Exists(out + "/model.safetensors.index.json"));
      auto m = ImportHfFolder(out);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      EXPECT_EQ(m->config.ToString(), c.ToString());
      EXPECT_EQ(m->dtype, dt);
      ASSERT_EQ(m->params.size(), p.size());
      for (size_t i = 0; i < p.size(); ++i) {
        const float want = std::string(dt) == "f32" ? p[i] : std::string(dt) == "bf16" ? RoundToBf16(p[i])
                                                                                        : F16ToFloat(FloatToF16(p[i]));
        ASSERT_EQ(m->params[i], want) << "element " << i;
      }
    }
  }
}

// The mapping itself, element by element (a round trip through the same mapping would not see a
// swapped q/k/v block or a missing transpose): GPT-2's Conv1D tensors are transposes, c_attn's
// column blocks q, k, v in order; and a Llama's config fields come back.
TEST(HfFolderTest, Gpt2ConvTensorsAreTransposesAndLlamaFieldsRoundTrip) {
  testing::TempDir dir;
  const ModelConfig g = ModelConfig::Make(300, 16, 1, 4, 32).value();
  const std::vector<float> p = RandomParams(g, 9);
  ASSERT_TRUE(ExportHfFolder(g, p, dir.path() + "/g", HfExportOptions()).ok());
  auto r = SafeTensorsReader::Open(Env::Default(), dir.path() + "/g/model.safetensors");
  ASSERT_TRUE(r.ok());
  const ParamLayout l(g);
  const int64_t C = 32;
  auto attn = (*r)->ReadF32("transformer.h.0.attn.c_attn.weight").value();  // (C, 3C)
  auto fc = (*r)->ReadF32("transformer.h.0.mlp.c_fc.weight").value();       // (C, 4C)
  const float* q = p.data() + l.Find("h.0.attn.q.weight")->offset;
  const float* k = p.data() + l.Find("h.0.attn.k.weight")->offset;
  const float* v = p.data() + l.Find("h.0.attn.v.weight")->offset;
  const float* w = p.data() + l.Find("h.0.mlp.fc.weight")->offset;  // (4C, C)
  for (int64_t i : {0, 5, 31}) {
    for (int64_t j : {0, 7, 31}) {
      EXPECT_EQ(attn[i * 3 * C + j], q[j * C + i]);
      EXPECT_EQ(attn[i * 3 * C + C + j], k[j * C + i]);
      EXPECT_EQ(attn[i * 3 * C + 2 * C + j], v[j * C + i]);
      EXPECT_EQ(fc[i * 4 * C + 96 + j], w[(96 + j) * C + i]);  // rows 96..127 of the (4C, C) fc
    }
  }
  ModelConfig c = SmallLlama(300, 64, 1, 4, 2, 32, 48);
  c.rope_theta = 500000.0f;
  c.norm_eps = 1e-6f;
  c.rope_scaling = {8.0f, 1.0f, 4.0f, 32};
  ASSERT_TRUE(c.Finish().ok());
  ASSERT_TRUE(ExportHfFolder(c, RandomParams(c, 2), dir.path() + "/l", HfExportOptions()).ok());
  auto m = ImportHfFolder(dir.path() + "/l");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->config.rope_theta, 500000.0f);
  EXPECT_EQ(m->config.norm_eps, 1e-6f);
  EXPECT_EQ(m->config.rope_scaling.factor, 8.0f);
  EXPECT_EQ(m->config.rope_scaling.original_max_seq_len, 32);
  EXPECT_EQ(m->config.n_kv_head, 2);
  EXPECT_FALSE(m->config.tie_embeddings);
}

TEST(HfFolderTest, Float16RoundTripsEveryValueAndRoundsToNearestEven) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t b = static_cast<uint16_t>(h);
    if (((b >> 10) & 0x1f) == 31 && (b & 0x3ff)) continue;  // NaNs: stay NaN (checked below)
    ASSERT_EQ(FloatToF16(F16ToFloat(b)), b) << h;
  }
  EXPECT_TRUE(std::isnan(F16ToFloat(FloatToF16(NAN))));
  EXPECT_EQ(F16ToFloat(FloatToF16(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(F16ToFloat(FloatToF16(65520.0f))));  // the tie above the largest: to infinity
  EXPECT_EQ(F16ToFloat(FloatToF16(1.0f + 1.0f / 2048)), 1.0f);              // a tie: to the even mantissa
  EXPECT_EQ(F16ToFloat(FloatToF16(1.0f + 3.0f / 2048)), 1.0f + 2.0f / 1024);  // a tie: up to the even one
  const float sub = std::ldexp(1.0f, -24);                                    // the smallest subnormal
  EXPECT_EQ(F16ToFloat(FloatToF16(sub * 1.5f)), 2 * sub);                     // a tie between 1 and 2: to 2
  EXPECT_EQ(F16ToFloat(FloatToF16(sub * 0.5f)), 0.0f);                        // a tie between 0 and 1: to 0
  EXPECT_EQ(F16ToFloat(FloatToF16(sub * 0.75f)), sub);
}

// config.json fields anneal refuses, each with the words its message must hold.
TEST(HfFolderTest, ConfigFieldsAnnealCannotTakeAreNamed) {
  const ModelFamily& llama = **FindHfFamily("LlamaForCausalLM");
  const ModelFamily& gpt2 = **FindHfFamily("GPT2LMHeadModel");
  const std::string base = llama.HfConfig(SmallLlama(300, 16, 2, 4, 2, 32, 48), "float32");
  struct Case {
    const ModelFamily* f;
    std::string from, to, want;
  };
  const Case cases[] = {
      {&llama, "\"hidden_act\": \"silu\"", "\"hidden_act\": \"relu\"", "\"hidden_act\" 'relu' is not silu"},
      {&llama, "\"attention_bias\": false", "\"attention_bias\": true", "\"attention_bias\" true"},
      {&llama, "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3", "n_kv_head 3 does not divide n_head 4"},
      {&llama, "\"head_dim\": 8", "\"head_dim\": 16", "\"head_dim\" 16 is not hidden_size / num_attention_heads"},
      {&llama, "\"hidden_size\": 32", "\"hidden_size\": \"32\"", "\"hidden_size\" must be an integer"},
      {&llama, "\"vocab_size\": 300,", "", "\"vocab_size\" is missing"},
      {&llama, "\"rope_type\": \"default\"", "\"rope_type\": \"yarn\"", "rope type 'yarn' is not one anneal computes"},
      {&llama, "{", "[", "is not a JSON object"},
      {&llama, "\"hidden_act\": \"silu\"", "\"hidden_act\": 5", "\"hidden_act\" must be a string"},
      {&llama, "\"rope_parameters\": {", "\"rope_parameters\": \"x\", \"unused\": {", "\"rope_parameters\" must be an object"},
  };
  for (const Case& k : cases) {
    std::string text = base;
    const size_t at = text.find(k.from);
    ASSERT_NE(at, std::string::npos) << k.from;
    text.replace(at, k.from.size(), k.to);
    auto r = k.f->FromHfConfig(text, "config.json");
    ASSERT_FALSE(r.ok()) << k.want;
    EXPECT_EQ(r.status().ExitCode(), 2);
    EXPECT_NE(r.status().message().find(k.want), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("config.json"), std::string::npos) << r.status().message();
  }
  const std::string g = gpt2.HfConfig(ModelConfig::Make(300, 16, 2, 4, 32).value(), "float32");
  for (const auto& [from, to, want] :
       {std::tuple<std::string, std::string, std::string>{"\"n_inner\": null", "\"n_inner\": 100", "is not 4 n_embd"},
        {"\"activation_function\": \"gelu_new\"", "\"activation_function\": \"relu\"", "is not GELU's tanh form"},
        {"\"tie_word_embeddings\": true", "\"tie_word_embeddings\": false", "ties its head to wte"},
        {"\"scale_attn_weights\": true", "\"scale_attn_weights\": false", "scales by 1/sqrt(head size)"}}) {
    std::string text = g;
    text.replace(text.find(from), from.size(), to);
    auto r = gpt2.FromHfConfig(text, "config.json");
    ASSERT_FALSE(r.ok()) << want;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
  EXPECT_NE(FindHfFamily("BertModel").status().message().find("GPT2LMHeadModel, LlamaForCausalLM"), std::string::npos);
}

TEST(HfFolderTest, FoldersAnnealCannotTakeAreNamed) {
  testing::TempDir dir;
  const ModelConfig c = SmallLlama(300, 16, 2, 4, 2, 32, 48);
  const std::string good = dir.path() + "/good";
  ASSERT_TRUE(ExportHfFolder(c, RandomParams(c, 5), good, HfExportOptions()).ok());
  auto fails = [](const std::string& d, const std::string& want) {
    auto r = ImportHfFolder(d);
    ASSERT_FALSE(r.ok()) << want;
    EXPECT_EQ(r.status().ExitCode(), 2);
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  };
  fails(dir.path() + "/nothing", "no config.json in");
  const std::string cfg_only = dir.path() + "/cfg_only";
  ASSERT_TRUE(ExportHfFolder(c, RandomParams(c, 5), cfg_only, HfExportOptions()).ok());
  ASSERT_EQ(std::remove((cfg_only + "/model.safetensors").c_str()), 0);
  fails(cfg_only, "no model.safetensors or model.safetensors.index.json");
  const std::string shorter = dir.path() + "/shorter";  // a model of 3 layers where the file has 2
  ASSERT_TRUE(ExportHfFolder(c, RandomParams(c, 5), shorter, HfExportOptions()).ok());
  ModelConfig deeper = c;
  deeper.n_layer = 3;
  ASSERT_TRUE(Env::Default().WriteFileAtomic(shorter + "/config.json", FamilyOf(c).HfConfig(deeper, "float32")).ok());
  fails(shorter, "tensor model.layers.2.input_layernorm.weight is missing");
  EXPECT_EQ(ExportHfFolder(c, RandomParams(c, 5), good, HfExportOptions()).ExitCode(), 2);  // not empty
  EXPECT_FALSE(ParseShardSize("5 parsecs").ok());
  EXPECT_EQ(*ParseShardSize("5GB"), 5000000000u);
  EXPECT_EQ(*ParseShardSize("100KB"), 100000u);
}

// GPT-2's vocabulary as tokenizer files: 50,000 merges whose first ones are OpenAI's ("Ġ t", "Ġ a",
// "h e"), every multi-byte token one merge; <|endoftext|> the special token.
TEST(HfFolderTest, Gpt2TokenizerFilesHoldItsMerges) {
  auto tok = Tokenizer::Load("gpt2");
  ASSERT_TRUE(tok.ok());
  auto files = HfTokenizerFiles(**tok, 1024);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  std::map<std::string, std::string> f(files->begin(), files->end());
  ASSERT_EQ(f.size(), 5u);
  const std::string& merges = f.at("merges.txt");
  EXPECT_EQ(std::count(merges.begin(), merges.end(), '\n'), 50001);  // the version line and 50,000 merges
  EXPECT_EQ(merges.rfind("#version: 0.2\n\xc4\xa0 t\n\xc4\xa0 a\nh e\n", 0), 0u);
  EXPECT_NE(f.at("tokenizer.json").find("\"content\":\"<|endoftext|>\""), std::string::npos);
  EXPECT_NE(f.at("vocab.json").find("\"<|endoftext|>\":50256"), std::string::npos);
  EXPECT_EQ(ByteLevelText(" \n"), "\xc4\xa0\xc4\x8a");  // space -> U+0120, newline -> U+010A
}

}  // namespace
}  // namespace anneal
