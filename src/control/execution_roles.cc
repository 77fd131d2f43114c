#include "control/execution_roles.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>

namespace anneal {

namespace {

bool HasDotDot(const std::string& s) {
  size_t i = 0;
  while (i <= s.size()) {
    const size_t j = std::min(s.find('/', i), s.size());
    if (s.compare(i, j - i, "..") == 0 && j - i == 2) return true;
    i = j + 1;
  }
  return false;
}

std::string Normalize(const std::string& uri) {
  if (uri.rfind("s3://", 0) == 0) return uri;
  std::string p = uri.rfind("file://", 0) == 0 ? uri.substr(7) : uri;
  return std::filesystem::path(p).lexically_normal().string();
}

}  // namespace

bool UriUnderPrefix(const std::string& uri, const std::string& prefix) {
  if (HasDotDot(uri)) return false;
  const std::string u = Normalize(uri);
  std::string p = Normalize(prefix);
  if (u == p) return true;
  if (!p.empty() && p.back() != '/') p.push_back('/');
  return u.rfind(p, 0) == 0;
}

Result<ExecutionRoles> LoadExecutionRoles(const std::string& path) {
  ExecutionRoles out;
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const std::exception& e) {
    return InvalidInput("--execution-roles " + path + ": " + e.what());
  }
  auto fail = [&](const std::string& what) { return InvalidInput("--execution-roles " + path + ": " + what); };
  if (!root["roles"] || !root["roles"].IsMap()) return fail("needs a 'roles:' mapping of role names");
  try {
    for (const auto& kv : root["roles"]) {
      ExecutionRole r;
      r.name = kv.first.as<std::string>();
      const YAML::Node& n = kv.second;
      if (!n.IsMap()) return fail("roles." + r.name + " must be a mapping");
      for (const auto& f : n) {
        const std::string k = f.first.as<std::string>();
        if (k != "prefixes" && k != "users" && k != "credentials") {
          return fail("roles." + r.name + "." + k + " is not a field (prefixes, users, credentials)");
        }
      }
      if (!n["prefixes"] || !n["prefixes"].IsSequence() || n["prefixes"].size() == 0) {
        return fail("roles." + r.name + ".prefixes must list at least one s3:// or path prefix");
      }
      for (const auto& p : n["prefixes"]) {
        const std::string s = p.as<std::string>();
        if (s.empty() || HasDotDot(s)) return fail("roles." + r.name + ".prefixes: '" + s + "' is empty or has '..'");
        r.prefixes.push_back(s);
      }
      if (n["users"]) {
        for (const auto& u : n["users"]) r.users.push_back(u.as<std::string>());
      }
      if (n["credentials"]) {
        r.access_key_id = n["credentials"]["access_key_id"].as<std::string>("");
        r.secret_access_key = n["credentials"]["secret_access_key"].as<std::string>("");
        if (r.access_key_id.empty() || r.secret_access_key.empty()) {
          return fail("roles." + r.name + ".credentials needs access_key_id and secret_access_key");
        }
      }
      out.roles[r.name] = r;
    }
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  return out;
}

Status CheckExecutionRole(const ExecutionRoles& roles, const JobSpec& spec, const std::string& user, bool is_admin,
                          std::string* field) {
  if (roles.empty()) return Status::Ok();
  std::string names;
  for (const auto& [n, r] : roles.roles) names += (names.empty() ? "" : ", ") + n;
  auto it = roles.roles.find(spec.role);
  if (it == roles.roles.end()) {
    *field = "role";
    return InvalidInput("role: " + (spec.role.empty() ? std::string("this server requires an execution role")
                                                      : "no execution role '" + spec.role + "'") +
                        "; the roles are: " + names);
  }
  const ExecutionRole& r = it->second;
  const bool allowed = is_admin || std::find(r.users.begin(), r.users.end(), "*") != r.users.end() ||
                       std::find(r.users.begin(), r.users.end(), user) != r.users.end();
  if (!allowed) {
    *field = "role";
    return InvalidInput("role: user " + user + " may not use the execution role " + r.name + "; ask an admin");
  }
  auto check = [&](const std::string& f, const std::string& uri) -> Status {
    if (uri.empty()) return Status::Ok();
    for (const auto& p : r.prefixes) {
      if (UriUnderPrefix(uri, p)) return Status::Ok();
    }
    *field = f;
    std::string list;
    for (const auto& p : r.prefixes) list += (list.empty() ? "" : ", ") + p;
    return InvalidInput(f + ": '" + uri + "' is outside the storage prefixes of execution role " + r.name + " (" + list + ")");
  };
  for (size_t i = 0; i < spec.channels.size(); ++i) {
    ANNEAL_RETURN_IF_ERROR(check("channels[" + std::to_string(i) + "].uri", spec.channels[i].uri));
  }
  ANNEAL_RETURN_IF_ERROR(check("output.uri", spec.output_uri));
  ANNEAL_RETURN_IF_ERROR(check("checkpoint.uri", spec.checkpoint_uri));
  ANNEAL_RETURN_IF_ERROR(check("checkpoint.local_path", spec.checkpoint_local_path));
  return Status::Ok();
}

}  // namespace anneal
