// Reading a Hugging Face config.json (model/gpt2, model/llama): the fields a family needs, each
// missing or mistyped one an error naming the file and the field (exit 2).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace anneal::hf {

// The parsed object, or an error naming the file.
Result<nlohmann::json> ParseConfig(const std::string& text, const std::string& file);
// j[key] as an integer in [lo, hi]; as a number; as a bool. `def` when absent (no default: required).
Result<int> Int(const nlohmann::json& j, const std::string& key, const std::string& file, int lo, int hi);
Result<int> Int(const nlohmann::json& j, const std::string& key, const std::string& file, int lo, int hi, int def);
Result<double> Num(const nlohmann::json& j, const std::string& key, const std::string& file, double def);
Result<bool> Bool(const nlohmann::json& j, const std::string& key, const std::string& file, bool def);
Result<std::string> Str(const nlohmann::json& j, const std::string& key, const std::string& file, const std::string& def);

}  // namespace anneal::hf
