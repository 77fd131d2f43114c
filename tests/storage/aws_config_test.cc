#include "storage/aws_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "testing/temp_dir.h"

namespace anneal {
namespace {

// Resolves with exactly these environment variables.
Result<AwsSettings> With(const std::map<std::string, std::string>& vars) {
  return ResolveAwsSettings([&](const char* n) -> const char* {
    auto it = vars.find(n);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(AwsConfigTest, EnvironmentFirstWithSessionToken) {
  auto s = With({{"AWS_ACCESS_KEY_ID", "AK"}, {"AWS_SECRET_ACCESS_KEY", "SK"}, {"AWS_SESSION_TOKEN", "TOK"},
                 {"AWS_DEFAULT_REGION", "eu-west-1"}, {"AWS_ENDPOINT_URL", "http://h:1"}, {"HOME", "/nonexistent"}});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->access_key, "AK");
  EXPECT_EQ(s->session_token, "TOK");
  EXPECT_EQ(s->region, "eu-west-1");
  EXPECT_EQ(s->endpoint, "http://h:1");
  EXPECT_EQ(s->credentials_from, "environment");
  EXPECT_FALSE(s->virtual_host);
}

TEST(AwsConfigTest, SharedFilesAndProfilesAsTheAwsCliReadsThem) {
  testing::TempDir d;
  std::ofstream(d.path() + "/credentials") << "# comment\n[default]\naws_access_key_id = D\naws_secret_access_key = DS\n"
                                           << "[work]\n aws_access_key_id=W \naws_secret_access_key = WS\n"
                                           << "aws_session_token = WT\n";
  std::ofstream(d.path() + "/config") << "[default]\nregion = us-west-2\n[profile work]\nregion = ap-south-1\n"
                                      << "endpoint_url = http://rgw:7480\n[profile cfgonly]\n"
                                      << "aws_access_key_id = C\naws_secret_access_key = CS\nendpoint_url = http://c\n";
  const std::map<std::string, std::string> base = {{"AWS_SHARED_CREDENTIALS_FILE", d.path() + "/credentials"},
                                                   {"AWS_CONFIG_FILE", d.path() + "/config"},
                                                   {"ANNEAL_S3_ENDPOINT", "http://e"}};
  auto s = With(base);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->access_key, "D");
  EXPECT_EQ(s->region, "us-west-2");  // [default] of the config file
  auto vars = base;
  vars["AWS_PROFILE"] = "work";
  vars.erase("ANNEAL_S3_ENDPOINT");
  s = With(vars);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->access_key, "W");
  EXPECT_EQ(s->session_token, "WT");
  EXPECT_EQ(s->region, "ap-south-1");
  EXPECT_EQ(s->endpoint, "http://rgw:7480");  // the profile's endpoint_url
  EXPECT_NE(s->credentials_from.find("[work]"), std::string::npos);
  vars["AWS_PROFILE"] = "cfgonly";  // keys in the config file only
  s = With(vars);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->access_key, "C");
  vars["AWS_REGION"] = "r1";  // the environment wins over the file
  vars["ANNEAL_S3_ADDRESSING"] = "virtual";
  s = With(vars);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->region, "r1");
  EXPECT_TRUE(s->virtual_host);
}

TEST(AwsConfigTest, ErrorsNameWhatToSet) {
  auto s = With({{"HOME", "/nonexistent"}, {"ANNEAL_S3_ENDPOINT", "http://e"}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().ExitCode(), 2);
  EXPECT_NE(s.status().message().find("AWS_ACCESS_KEY_ID"), std::string::npos);
  EXPECT_NE(s.status().message().find("/nonexistent/.aws/credentials"), std::string::npos);
  s = With({{"AWS_ACCESS_KEY_ID", "A"}, {"HOME", "/nonexistent"}, {"ANNEAL_S3_ENDPOINT", "http://e"}});
  EXPECT_NE(s.status().message().find("only one of"), std::string::npos);
  s = With({{"AWS_ACCESS_KEY_ID", "A"}, {"AWS_SECRET_ACCESS_KEY", "B"}, {"HOME", "/nonexistent"}});
  EXPECT_NE(s.status().message().find("ANNEAL_S3_ENDPOINT"), std::string::npos);
  s = With({{"AWS_ACCESS_KEY_ID", "A"}, {"AWS_SECRET_ACCESS_KEY", "B"}, {"ANNEAL_S3_ENDPOINT", "http://e"},
            {"ANNEAL_S3_ADDRESSING", "sideways"}});
  EXPECT_NE(s.status().message().find("must be path or virtual"), std::string::npos);
}

}  // namespace
}  // namespace anneal
