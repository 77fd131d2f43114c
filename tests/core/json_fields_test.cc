#include "core/json_fields.h"

#include <gtest/gtest.h>

namespace anneal {
namespace {

using nlohmann::json;

// The wire's readers (protocol/wire.cc) through it: what fuzzing them found (tests/fuzz/wire_fuzz.cc)
// was a field of another type, or a document that is no object, ending the process with nlohmann's
// type_error from .value().
TEST(JsonFields, EachFieldIsReadAsItsTypeAndAnotherTypeNamesTheField) {
  int node = 7;
  int64_t seq = 0;
  double at = 0;
  bool local = false;
  std::string text = "keep";
  std::vector<std::string> hosts;
  std::map<std::string, std::string> env;
  json health;
  const json doc = {{"node", 3}, {"seq", int64_t{1} << 40}, {"at", 1.5}, {"local", true}, {"hosts", {"a", "b"}},
                    {"env", {{"A", "1"}}}, {"health", {{"round", 1}}}, {"text", nullptr}};
  JsonFields f(doc, "the report");
  f.Get("node", &node).Get("seq", &seq).Get("at", &at).Get("local", &local).Get("text", &text);
  f.Get("hosts", &hosts).Get("env", &env).GetObject("health", &health);
  ASSERT_TRUE(f.status().ok()) << f.status().ToString();
  EXPECT_EQ(node, 3);
  EXPECT_EQ(seq, int64_t{1} << 40);
  EXPECT_EQ(at, 1.5);
  EXPECT_TRUE(local);
  EXPECT_EQ(text, "keep");  // null keeps the default
  EXPECT_EQ(hosts, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(env.at("A"), "1");
  EXPECT_EQ(health.at("round"), 1);

  int n = 0;
  EXPECT_EQ(JsonFields(json{{"node", "x"}}, "the report").Get("node", &n).status().message(),
            "the report: node: must be a whole number of 32 bits, got \"x\"");
  EXPECT_NE(JsonFields(json{{"node", 1} }, "r").Get("node", &n).status().code(), Code::kInvalidInput);
  EXPECT_NE(JsonFields(json{{"node", 4294967297LL}}, "r").Get("node", &n).status().message().find("32 bits"),
            std::string::npos);  // not wrapped to 1
  EXPECT_NE(JsonFields(json{{"hosts", {"a", 1}}}, "r").Get("hosts", &hosts).status().message().find("hosts: must be a list of strings"),
            std::string::npos);
  EXPECT_EQ(JsonFields(json::array(), "the heartbeat").status().message(), "the heartbeat is not a JSON object");
  // The first error stays; later fields are not read.
  const json ab = {{"a", "x"}, {"b", "y"}};
  JsonFields two(ab, "d");
  int a = 0, b = 5;
  two.Get("a", &a).Get("b", &b);
  EXPECT_NE(two.status().message().find("a: must be"), std::string::npos);
  EXPECT_EQ(b, 5);
}

}  // namespace
}  // namespace anneal
