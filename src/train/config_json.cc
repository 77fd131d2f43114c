#include <algorithm>
#include <nlohmann/json.hpp>

#include "train/config_text.h"

namespace anneal {
namespace {

// A scalar as YAML would spell it: strings unquoted, numbers and booleans as JSON writes them.
std::string Scalar(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

void Flatten(const nlohmann::json& n, const std::string& prefix, std::map<std::string, std::string>* out,
             std::vector<std::string>* errors) {
  if (n.is_object()) {
    for (const auto& [key, value] : n.items()) Flatten(value, prefix.empty() ? key : prefix + "." + key, out, errors);
  } else if (n.is_null()) {
    (*out)[prefix] = "";
  } else if (n.is_primitive()) {
    (*out)[prefix] = Scalar(n);
  } else if (n.is_array() && std::all_of(n.begin(), n.end(), [](const nlohmann::json& v) { return v.is_primitive() && !v.is_null(); })) {
    std::string joined;  // a list of scalars: "a,b" (train.profile_steps)
    for (const auto& v : n) joined += (joined.empty() ? "" : ",") + Scalar(v);
    (*out)[prefix] = joined;
  } else {
    errors->push_back(prefix + " must be a single value");
  }
}

}  // namespace

Status FlattenJsonConfig(const std::string& text, const std::string& where, std::map<std::string, std::string>* out,
                         std::vector<std::string>* errors) {
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(text.empty() ? std::string("null") : text);
  } catch (const nlohmann::json::parse_error& e) {
    return InvalidInput(where + ": JSON error (this slim build reads JSON configs only, not YAML) at byte " +
                        std::to_string(e.byte) + ": " + e.what());
  }
  if (!root.is_null() && !root.is_object()) return InvalidInput(where + ": a config is a JSON object of sections");
  if (!root.is_null()) Flatten(root, "", out, errors);
  return Status::Ok();
}

}  // namespace anneal
