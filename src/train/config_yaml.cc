#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "train/config_text.h"

namespace anneal {
namespace {

void Flatten(const YAML::Node& n, const std::string& prefix, std::map<std::string, std::string>* out,
             std::vector<std::string>* errors) {
  if (n.IsMap()) {
    for (const auto& kv : n) {
      const std::string key = kv.first.as<std::string>();
      Flatten(kv.second, prefix.empty() ? key : prefix + "." + key, out, errors);
    }
  } else if (n.IsScalar()) {
    (*out)[prefix] = n.as<std::string>();
  } else if (n.IsNull()) {
    (*out)[prefix] = "";
  } else if (n.IsSequence() && std::all_of(n.begin(), n.end(), [](const YAML::Node& v) { return v.IsScalar(); })) {
    std::string joined;  // a list of scalars: "a,b" (train.profile_steps)
    for (const auto& v : n) joined += (joined.empty() ? "" : ",") + v.as<std::string>();
    (*out)[prefix] = joined;
  } else {
    errors->push_back(prefix + " must be a single value");
  }
}

}  // namespace

Status FlattenYamlConfig(const std::string& text, const std::string& where, std::map<std::string, std::string>* out,
                         std::vector<std::string>* errors) {
  try {
    YAML::Node root = YAML::Load(text);
    if (!root.IsNull() && !root.IsMap()) return InvalidInput(where + ": a config is a YAML mapping of sections");
    if (!root.IsNull()) Flatten(root, "", out, errors);
  } catch (const YAML::Exception& e) {
    return InvalidInput(where + ": YAML error at line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  return Status::Ok();
}

}  // namespace anneal
