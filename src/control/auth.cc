#include "control/auth.h"

#include <sys/stat.h>

#include <cstdio>
#include <regex>

#include "protocol/api_client.h"
#include "protocol/wire.h"
#include "core/clock.h"
#include "core/env.h"
#include "core/crypto.h"
#include "core/text.h"

namespace anneal {

namespace {

// Writes a secret to a file only its owner can read.
Status WriteSecretFile(const std::string& path, const std::string& secret) {
  ANNEAL_RETURN_IF_ERROR(Env::Default().WriteFileAtomic(path, secret + "\n"));
  if (::chmod(path.c_str(), 0600) != 0) return IoError("cannot make " + path + " private (chmod 600)");
  return Status::Ok();
}


}  // namespace

std::string NewTokenSecret() { return "ann_" + RandomHex(32); }

std::string NewTokenId(const std::string& kind) {
  std::string id = kind == "agent" ? "agt-" : kind == "join" ? "join-" : kind == "register" ? "reg-" : "tok-";
  return id.append(RandomHex(6));
}

std::string TokenHash(const std::string& secret) { return Sha256Hex(secret); }

bool ValidRole(const std::string& role) { return role == "admin" || role == "user" || role == "viewer"; }

Status ValidateUserName(const std::string& name) {
  static const std::regex re("[a-z][a-z0-9_.-]{0,31}");
  if (!std::regex_match(name, re)) {
    return InvalidInput("user name '" + name + "' must be 1-32 characters of a-z 0-9 _ . - starting with a letter");
  }
  return Status::Ok();
}

Result<Principal> Authenticate(JobStore* store, const std::string& header) {
  const std::string prefix = "Bearer ";
  if (header.empty()) {
    return InvalidInput("401: this server needs a token: send 'Authorization: Bearer <token>' (the CLI reads "
                        "$ANNEAL_TOKEN; an admin creates one with 'anneal tokens create --user NAME')");
  }
  if (header.rfind(prefix, 0) != 0) return InvalidInput("401: the Authorization header must be 'Bearer <token>'");
  const std::string secret = TrimTrailing(header.substr(prefix.size()));
  ANNEAL_ASSIGN_OR_RETURN(std::optional<TokenRecord> t, store->FindToken(TokenHash(secret)));
  if (!t) return InvalidInput("401: the token is not valid (revoked, mistyped, or from another server)");
  const double now = WallSeconds();
  if (t->expires_at > 0 && now >= t->expires_at) {
    return InvalidInput("401: the token " + t->id + " expired at " + FormatTime(t->expires_at) +
                        ": create a new one with anneal tokens create");
  }
  // Last use, for anneal tokens list: a write at most once a minute per token, not one per request.
  if (now - t->last_used_at > 60) ANNEAL_RETURN_IF_ERROR(store->TouchToken(t->id, now));
  Principal p;
  p.kind = t->kind;
  p.name = t->principal;
  if (t->kind == "user") {
    ANNEAL_ASSIGN_OR_RETURN(std::optional<UserRecord> u, store->GetUser(t->principal));
    if (!u) return InvalidInput("401: the token's user " + t->principal + " no longer exists");
    p.role = u->role;
  }
  return p;
}

Result<std::string> IssueToken(JobStore* store, const std::string& principal, const std::string& kind,
                               const std::string& description, double now, double expires_at) {
  TokenRecord t;
  t.id = NewTokenId(kind);
  t.principal = principal;
  t.kind = kind;
  const std::string secret = NewTokenSecret();
  t.sha256 = TokenHash(secret);
  t.description = description;
  t.created_at = now;
  t.expires_at = expires_at;
  ANNEAL_RETURN_IF_ERROR(store->PutToken(t));
  return secret;
}

Status BootstrapAuth(JobStore* store, const std::string& data_dir, const std::string& join_token_file, double now) {
  Env& env = Env::Default();
  ANNEAL_ASSIGN_OR_RETURN(auto users, store->Users());
  if (users.empty()) {
    UserRecord admin;
    admin.name = "admin";
    admin.role = "admin";
    admin.created_at = now;
    ANNEAL_RETURN_IF_ERROR(store->PutUser(admin));
    ANNEAL_ASSIGN_OR_RETURN(std::string secret, IssueToken(store, "admin", "user", "created at the first start", now));
    ANNEAL_RETURN_IF_ERROR(WriteSecretFile(JoinPath(data_dir, "admin.token"), secret));
  }
  // The join token: the operator's file, or <data-dir>/join.token (re-issued if it is missing or
  // no longer matches the store, e.g. after it was deleted to rotate it).
  const std::string path = join_token_file.empty() ? JoinPath(data_dir, "join.token") : join_token_file;
  if (env.Exists(path)) {
    ANNEAL_ASSIGN_OR_RETURN(std::string secret, ReadSecretFile(path));
    if (secret.size() < 16) return InvalidInput("the join token in " + path + " is shorter than 16 characters: use a long random one");
    ANNEAL_ASSIGN_OR_RETURN(auto known, store->FindToken(TokenHash(secret)));
    if (known && known->kind == "join") return Status::Ok();
    if (!join_token_file.empty()) {
      ANNEAL_RETURN_IF_ERROR(store->DeleteTokensOf("@join", "join"));
      TokenRecord t;
      t.id = NewTokenId("join");
      t.principal = "@join";
      t.kind = "join";
      t.sha256 = TokenHash(secret);
      t.description = "from " + path;
      t.created_at = now;
      return store->PutToken(t);
    }
  }
  ANNEAL_RETURN_IF_ERROR(store->DeleteTokensOf("@join", "join"));
  ANNEAL_ASSIGN_OR_RETURN(std::string secret, IssueToken(store, "@join", "join", "agents' join token", now));
  return WriteSecretFile(path, secret);
}

}  // namespace anneal
