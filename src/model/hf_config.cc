#include "model/hf_config.h"

namespace anneal::hf {

using nlohmann::json;

namespace {
Status Bad(const std::string& file, const std::string& key, const std::string& what) {
  return InvalidInput(file + ": \"" + key + "\" " + what);
}
}  // namespace

Result<json> ParseConfig(const std::string& text, const std::string& file) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InvalidInput(file + " is not a JSON object (a config.json)");
  return j;
}

Result<int> Int(const json& j, const std::string& key, const std::string& file, int lo, int hi) {
  if (!j.contains(key) || j.at(key).is_null()) return Bad(file, key, "is missing");
  const json& v = j.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
    return Bad(file, key, "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], not " +
                              v.dump());
  }
  return static_cast<int>(v.get<int64_t>());
}

Result<int> Int(const json& j, const std::string& key, const std::string& file, int lo, int hi, int def) {
  if (!j.contains(key) || j.at(key).is_null()) return def;
  return Int(j, key, file, lo, hi);
}

Result<double> Num(const json& j, const std::string& key, const std::string& file, double def) {
  if (!j.contains(key) || j.at(key).is_null()) return def;
  if (!j.at(key).is_number()) return Bad(file, key, "must be a number, not " + j.at(key).dump());
  return j.at(key).get<double>();
}

Result<bool> Bool(const json& j, const std::string& key, const std::string& file, bool def) {
  if (!j.contains(key) || j.at(key).is_null()) return def;
  if (!j.at(key).is_boolean()) return Bad(file, key, "must be true or false, not " + j.at(key).dump());
  return j.at(key).get<bool>();
}

Result<std::string> Str(const json& j, const std::string& key, const std::string& file, const std::string& def) {
  if (!j.contains(key) || j.at(key).is_null()) return def;
  if (!j.at(key).is_string()) return Bad(file, key, "must be a string, not " + j.at(key).dump());
  return j.at(key).get<std::string>();
}

}  // namespace anneal::hf
