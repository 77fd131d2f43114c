// Operator files that give options per instance type (--slurm-instance-types, kubernetes render's
// --instance-types): a YAML map of type -> map of options, read in one place so both report a bad file,
// a wrong shape, an unknown key or a wrong value type the same way.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <string>

#include "core/status.h"

namespace anneal {

// Calls set(type, key, value) for every option of every type in order; set returns InvalidInput for an
// unknown key (naming the keys it takes) and may throw YAML::Exception for a value of the wrong type,
// which becomes "FLAG PATH: TYPE.KEY has the wrong type". `what` says what a type maps to.
Status ReadTypeOptions(const std::string& flag, const std::string& path, const std::string& what,
                       const std::function<Status(const std::string& type, const std::string& key, const YAML::Node& v)>& set);

}  // namespace anneal
