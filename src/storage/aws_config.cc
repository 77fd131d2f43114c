#include "storage/aws_config.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/text.h"

namespace anneal {

namespace {

// The file's text, or "" when it does not exist.
std::string ReadIfExists(const std::string& path) {
  std::ifstream f(path);
  if (!f) return "";
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

std::map<std::string, std::map<std::string, std::string>> ParseIni(const std::string& text) {
  std::map<std::string, std::map<std::string, std::string>> out;
  std::string section;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    line = Trim(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      section = Trim(line.substr(1, line.size() - 2));
      out[section];
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    out[section][Trim(line.substr(0, eq))] = Trim(line.substr(eq + 1));
  }
  return out;
}

Result<AwsSettings> ResolveAwsSettings(const std::function<const char*(const char*)>& getenv) {
  auto env = [&](const char* name) -> std::string {
    const char* v = getenv(name);
    return v ? v : "";
  };
  AwsSettings s;
  if (!env("AWS_PROFILE").empty()) s.profile = env("AWS_PROFILE");
  const std::string home = env("HOME");
  const std::string cred_path =
      !env("AWS_SHARED_CREDENTIALS_FILE").empty() ? env("AWS_SHARED_CREDENTIALS_FILE") : home + "/.aws/credentials";
  const std::string config_path = !env("AWS_CONFIG_FILE").empty() ? env("AWS_CONFIG_FILE") : home + "/.aws/config";
  auto creds_file = ParseIni(ReadIfExists(cred_path));
  auto config_file = ParseIni(ReadIfExists(config_path));
  const std::string config_section = s.profile == "default" ? "default" : "profile " + s.profile;
  const std::map<std::string, std::string> none;
  const auto& from_creds = creds_file.count(s.profile) ? creds_file[s.profile] : none;
  const auto& from_config = config_file.count(config_section) ? config_file[config_section] : none;
  auto get = [](const std::map<std::string, std::string>& m, const char* k) {
    auto it = m.find(k);
    return it == m.end() ? std::string() : it->second;
  };
  if (!env("AWS_ACCESS_KEY_ID").empty() || !env("AWS_SECRET_ACCESS_KEY").empty()) {
    s.access_key = env("AWS_ACCESS_KEY_ID");
    s.secret_key = env("AWS_SECRET_ACCESS_KEY");
    s.session_token = env("AWS_SESSION_TOKEN");
    s.credentials_from = "environment";
    if (s.access_key.empty() || s.secret_key.empty()) {
      return InvalidInput("only one of AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY is set: set both, or neither to use " +
                          cred_path);
    }
  } else {
    for (const auto* m : {&from_creds, &from_config}) {
      if (!get(*m, "aws_access_key_id").empty()) {
        s.access_key = get(*m, "aws_access_key_id");
        s.secret_key = get(*m, "aws_secret_access_key");
        s.session_token = get(*m, "aws_session_token");
        s.credentials_from = m == &from_creds ? cred_path + " [" + s.profile + "]"
                                              : config_path + " [" + config_section + "]";
        break;
      }
    }
    if (s.access_key.empty() || s.secret_key.empty()) {
      return InvalidInput("s3:// needs credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or put "
                          "aws_access_key_id and aws_secret_access_key under [" + s.profile + "] in " + cred_path +
                          " (profile from AWS_PROFILE)");
    }
  }
  for (const char* k : {"AWS_REGION", "AWS_DEFAULT_REGION"}) {
    if (!env(k).empty()) {
      s.region = env(k);
      break;
    }
  }
  if (env("AWS_REGION").empty() && env("AWS_DEFAULT_REGION").empty() && !get(from_config, "region").empty()) {
    s.region = get(from_config, "region");
  }
  for (const char* k : {"ANNEAL_S3_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"}) {
    if (!env(k).empty()) {
      s.endpoint = env(k);
      break;
    }
  }
  if (s.endpoint.empty()) s.endpoint = get(from_config, "endpoint_url");
  if (s.endpoint.empty()) {
    return InvalidInput("s3:// needs an endpoint: set ANNEAL_S3_ENDPOINT (or AWS_ENDPOINT_URL, or endpoint_url under [" +
                        config_section + "] in " + config_path + "), e.g. http://127.0.0.1:7480");
  }
  const std::string addressing = env("ANNEAL_S3_ADDRESSING");
  if (addressing == "virtual") {
    s.virtual_host = true;
  } else if (!addressing.empty() && addressing != "path") {
    return InvalidInput("ANNEAL_S3_ADDRESSING = '" + addressing + "' must be path or virtual");
  }
  return s;
}

Result<AwsSettings> ResolveAwsSettings() {
  return ResolveAwsSettings([](const char* n) { return std::getenv(n); });
}

}  // namespace anneal
