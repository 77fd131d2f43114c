// Where the s3:// backend finds its endpoint, region and credentials — the AWS CLI's rules, so a user's
// existing setup works unchanged:
//   credentials  AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN) from the environment;
//                else the shared credentials file (AWS_SHARED_CREDENTIALS_FILE, default
//                ~/.aws/credentials), section [PROFILE]; else the config file (AWS_CONFIG_FILE,
//                default ~/.aws/config), section [profile PROFILE] ([default] for "default").
//                PROFILE = AWS_PROFILE, default "default".
//   region       AWS_REGION, AWS_DEFAULT_REGION, the profile's `region`, else us-east-1.
//   endpoint     ANNEAL_S3_ENDPOINT, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's
//                `endpoint_url`; none is an error (anneal speaks to self-hosted stores).
//   addressing   ANNEAL_S3_ADDRESSING = path (default: http://host/bucket/key) | virtual
//                (http://bucket.host/key).
// Errors name the variable or file to set (exit 2). Pure apart from reading the two files.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "core/status.h"

namespace anneal {

struct AwsSettings {
  std::string access_key, secret_key, session_token;
  std::string region = "us-east-1";
  std::string endpoint;
  bool virtual_host = false;
  std::string profile = "default";
  std::string credentials_from;  // "environment" or the file it came from, for messages
};

// getenv is injectable for tests (returns null for unset).
Result<AwsSettings> ResolveAwsSettings(const std::function<const char*(const char*)>& getenv);
Result<AwsSettings> ResolveAwsSettings();

// An INI file as the AWS CLI writes it: [section] lines and key = value pairs; '#' and ';' start
// comments; names are trimmed. Section -> key -> value.
std::map<std::string, std::map<std::string, std::string>> ParseIni(const std::string& text);

}  // namespace anneal
