// Execution roles (docs/security.md): what storage a job may touch. An admin defines them in a YAML
// file given to `anneal server --execution-roles FILE`:
//
//   roles:
//     team-a:
//       prefixes: [s3://anneal/team-a/, /srv/data/team-a/]   # channels, output and checkpoint
//       users: [alice, bob]                                  # who may submit with it; "*" = all
//       credentials: {access_key_id: ..., secret_access_key: ...}   # optional, see below
//
// With roles defined, a job must name one its user may use (admins may use every role), and every
// channel, output and checkpoint URI of its spec must lie under one of the role's prefixes; any
// other spec is refused at submit (403 naming the field). The role's credentials (a store user whose
// own policy allows only those prefixes, e.g. a radosgw user with a bucket policy) are what the
// agent uses for the job's storage and what its ranks get as AWS_ACCESS_KEY_ID /
// AWS_SECRET_ACCESS_KEY, so a rank reaching outside the prefixes is refused by the store itself.
// Without roles, every job may use any URI with the instances' own credentials.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "protocol/job_definition.h"
#include "core/status.h"

namespace anneal {

struct ExecutionRole {
  std::string name;
  std::vector<std::string> prefixes;  // normalized: s3://bucket/key-prefix or an absolute path
  std::vector<std::string> users;     // "*" = every user
  std::string access_key_id, secret_access_key;
};

struct ExecutionRoles {
  std::map<std::string, ExecutionRole> roles;
  bool empty() const { return roles.empty(); }
};

Result<ExecutionRoles> LoadExecutionRoles(const std::string& path);

// Ok, or (403) PermissionDenied-style InvalidInput whose message starts with the field's dotted path;
// *field is set to it. is_admin: may use every role.
Status CheckExecutionRole(const ExecutionRoles& roles, const JobSpec& spec, const std::string& user, bool is_admin,
                          std::string* field);

// Whether uri lies under prefix (s3 keys by string prefix at a '/' boundary, paths lexically
// normalized first; any ".." segment is refused).
bool UriUnderPrefix(const std::string& uri, const std::string& prefix);

}  // namespace anneal
