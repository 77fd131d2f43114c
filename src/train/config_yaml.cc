// FlattenYamlConfig (train/config_text.h): a YAML config, parsed under core/bounded_parse.h's limits
// (no aliases, bounded depth and size) with every scalar kept as written, flattened to dotted keys.
#include <algorithm>

#include "core/bounded_parse.h"
#include "train/config_text.h"

namespace anneal {
namespace {

void Flatten(const nlohmann::json& n, const std::string& prefix, std::map<std::string, std::string>* out,
             std::vector<std::string>* errors) {
  if (n.is_object()) {
    for (const auto& [key, value] : n.items()) Flatten(value, prefix.empty() ? key : prefix + "." + key, out, errors);
  } else if (n.is_string()) {
    (*out)[prefix] = n.get<std::string>();
  } else if (n.is_array() && std::all_of(n.begin(), n.end(), [](const nlohmann::json& v) { return v.is_string(); })) {
    std::string joined;  // a list of scalars: "a,b" (train.profile_steps)
    for (const auto& v : n) {
      if (!joined.empty()) joined += ',';
      joined += v.get<std::string>();
    }
    (*out)[prefix] = joined;
  } else {
    errors->push_back(prefix + " must be a single value");
  }
}

}  // namespace

Status FlattenYamlConfig(const std::string& text, const std::string& where, std::map<std::string, std::string>* out,
                         std::vector<std::string>* errors) {
  auto root = ParseYamlBounded(text, ParseLimits{}, /*scalars_as_strings=*/true);
  if (!root.ok()) return InvalidInput(where + ": " + root.status().message());
  if (root->is_null() || *root == "") return Status::Ok();  // an empty file, or one that is only null
  if (!root->is_object()) return InvalidInput(where + ": a config is a YAML mapping of sections");
  Flatten(*root, "", out, errors);
  return Status::Ok();
}

}  // namespace anneal
