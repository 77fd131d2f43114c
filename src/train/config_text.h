// A training config file's text as flat "section.key" -> value pairs, which train/config.cc checks
// against its table of keys. The full build reads YAML (train/config_yaml.cc; JSON is YAML too), the
// slim build (ANNEAL_SLIM, no yaml-cpp) reads JSON only (train/config_json.cc).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace anneal {

// Each adds every scalar of the mapping's nested sections to *out (an empty value for a null; JSON's
// numbers and booleans as JSON writes them); a list or other non-scalar is an entry in *errors; text
// that is no mapping at all is the returned error. TrainConfig::Parse uses the YAML one where the
// build has yaml-cpp (ANNEAL_HAVE_YAML), the JSON one otherwise.
Status FlattenYamlConfig(const std::string& text, const std::string& where, std::map<std::string, std::string>* out,
                         std::vector<std::string>* errors);
Status FlattenJsonConfig(const std::string& text, const std::string& where, std::map<std::string, std::string>* out,
                         std::vector<std::string>* errors);

}  // namespace anneal
