// The config text readers (train/config_text.h): the slim build's JSON reader flattens a config as
// the full build's YAML reader does (the same JSON text through both, where the build has both),
// and each refuses what is no mapping, naming it.
#include "train/config_text.h"

#include <gtest/gtest.h>

namespace anneal {
namespace {

using Flat = std::map<std::string, std::string>;

const char* kJson = R"({"model": {"preset": "gpt2", "n_layer": 2}, "optim": {"lr": 0.003, "warmup_steps": 0},
  "train": {"steps": 6, "kernels": "cuda", "dtype": "bf16", "resume": "auto", "checkpoint_dir": null},
  "data": {"dir": "/tmp/d", "verify_checksums": false}, "x": {"list": [3, "a", true]}})";

Flat FlatJson(const std::string& text, std::vector<std::string>* errors, Status* st) {
  Flat f;
  *st = FlattenJsonConfig(text, "cfg.json", &f, errors);
  return f;
}

TEST(ConfigTextTest, JsonFlattensSectionsToDottedKeysWithYamlSpelling) {
  std::vector<std::string> errors;
  Status st;
  const Flat f = FlatJson(kJson, &errors, &st);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(f.at("model.preset"), "gpt2");
  EXPECT_EQ(f.at("model.n_layer"), "2");
  EXPECT_EQ(f.at("optim.lr"), "0.003");
  EXPECT_EQ(f.at("data.verify_checksums"), "false");
  EXPECT_EQ(f.at("train.checkpoint_dir"), "");
  EXPECT_EQ(f.at("x.list"), "3,a,true");
  EXPECT_EQ(f.size(), 12u);
}

TEST(ConfigTextTest, JsonJoinsListsOfScalarsAndRefusesNestedValuesNonObjectsAndSyntaxErrors) {
  std::vector<std::string> errors;
  Status st;
  EXPECT_EQ(FlatJson(R"({"train": {"profile_steps": [3, 5]}})", &errors, &st).at("train.profile_steps"), "3,5");
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(errors.empty());
  FlatJson(R"({"train": {"profile_steps": [1, [2]]}})", &errors, &st);
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "train.profile_steps must be a single value");
  FlatJson("[1, 2]", &errors, &st);
  EXPECT_NE(st.ToString().find("a config is a JSON object of sections"), std::string::npos) << st.ToString();
  FlatJson("model: {n_layer: 2}", &errors, &st);
  EXPECT_NE(st.ToString().find("reads JSON configs only"), std::string::npos) << st.ToString();
  EXPECT_TRUE(FlatJson("", &errors, &st).empty());
  EXPECT_TRUE(st.ok());
}

#ifdef ANNEAL_HAVE_YAML
TEST(ConfigTextTest, JsonAndYamlReadersAgreeOnTheSameJsonText) {
  std::vector<std::string> ej, ey;
  Status st;
  const Flat j = FlatJson(kJson, &ej, &st);
  ASSERT_TRUE(st.ok());
  Flat y;
  ASSERT_TRUE(FlattenYamlConfig(kJson, "cfg.json", &y, &ey).ok());
  EXPECT_EQ(ej, ey);
  // YAML keeps a number's spelling, JSON writes it back: the same value either way.
  EXPECT_EQ(std::stod(y.at("optim.lr")), std::stod(j.at("optim.lr")));
  y.erase("optim.lr");
  Flat j2 = j;
  j2.erase("optim.lr");
  EXPECT_EQ(j2, y);
}
#endif

}  // namespace
}  // namespace anneal
