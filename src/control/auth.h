// Auth: who is calling the API (bearer tokens) and what their role lets them do (docs/security.md).
//
// Principals: users (roles admin, user, viewer) and agents. A token is "ann_" + 64 hex characters of
// /dev/urandom; the store keeps only its SHA-256 (a token's entropy makes a slow hash unnecessary),
// so a copied database grants nothing. Token kinds:
//   user  — a user's API token (`anneal tokens create`);
//   join  — lets an operator's own agent register (`anneal agent --join-token-file`), under an id
//           of its own: never one the server asked a backend for;
//   register — a one-time secret for one instance the server asked a backend for (the scheduler
//           issues it with the request; the local backend hands it to the agent through a pipe, the
//           Slurm backend in a 0600 file the agent deletes): it registers that id once, then is gone;
//   agent — issued to an instance at registration; valid for that instance's own endpoints only.
// Roles: admin does everything (users, tokens, every job); user submits jobs and sees and changes
// only their own (another user's job answers 404, as if it did not exist); viewer reads every job
// and changes nothing.
//
// Bootstrap: a server whose store has no user creates "admin" and writes its token to
// <data-dir>/admin.token, and a join token to <data-dir>/join.token (both mode 0600) unless
// --join-token-file names one.
//
// Thread-safety: Authenticate may be called from any thread (the store is thread-safe).
#pragma once

#include <string>

#include "control/job_store.h"
#include "core/status.h"

namespace anneal {

struct Principal {
  std::string kind;  // user | agent | join | register
  std::string name;  // the user, or the instance id of an agent (or of a register secret)
  std::string role;  // users: admin | user | viewer
  bool admin() const { return kind == "user" && role == "admin"; }
  bool reads_all() const { return kind == "user" && (role == "admin" || role == "viewer"); }
  bool submits() const { return kind == "user" && (role == "admin" || role == "user"); }
};

// A new random token secret ("ann_..."), and the public id stored beside its hash.
std::string NewTokenSecret();
std::string NewTokenId(const std::string& kind);
std::string TokenHash(const std::string& secret);

bool ValidRole(const std::string& role);
// [a-z][a-z0-9_.-]{0,31}
Status ValidateUserName(const std::string& name);

// The principal a request's Authorization header ("Bearer <token>") names; Unauthenticated
// (returned as InvalidInput with a message starting "401:") when it is missing or unknown.
Result<Principal> Authenticate(JobStore* store, const std::string& authorization_header);

// Creates the token for principal and stores its hash; returns the secret (shown once). expires_at:
// when Authenticate starts refusing it (401, "expired"); 0: never.
Result<std::string> IssueToken(JobStore* store, const std::string& principal, const std::string& kind,
                               const std::string& description, double now, double expires_at = 0);

// First start: the admin user and its token file, and the join token file.
// join_token_file non-empty: that file's content is the join token (created if missing).

Status BootstrapAuth(JobStore* store, const std::string& data_dir, const std::string& join_token_file, double now);

}  // namespace anneal
