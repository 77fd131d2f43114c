#include "control/type_options.h"

namespace anneal {

Status ReadTypeOptions(const std::string& flag, const std::string& path, const std::string& what,
                       const std::function<Status(const std::string& type, const std::string& key, const YAML::Node& v)>& set) {
  const std::string where = flag + " " + path;
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const std::exception& e) {
    return InvalidInput(where + ": " + e.what());
  }
  if (!root.IsMap()) return InvalidInput(where + ": must map each instance type to " + what);
  for (const auto& kv : root) {
    const std::string type = kv.first.as<std::string>();
    if (!kv.second.IsMap()) return InvalidInput(where + ": " + type + " must be a map of " + what);
    for (const auto& f : kv.second) {
      const std::string key = f.first.as<std::string>();
      Status st;
      try {
        st = set(type, key, f.second);
      } catch (const YAML::Exception&) {
        return InvalidInput(where + ": " + type + "." + key + " has the wrong type");
      }
      if (!st.ok()) return InvalidInput(where + ": " + st.message());
    }
  }
  return Status::Ok();
}

}  // namespace anneal
