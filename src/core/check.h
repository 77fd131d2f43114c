// ANNEAL_CHECK(cond, message): an invariant of the program itself, never of its input (bad input is a
// Status: core/status.h). When cond is false the process prints
//   anneal: internal error at FILE:LINE: `cond` failed: message
// to stderr and aborts — a bug to report, with the place to look. Cheap: one branch when it holds.
// ANNEAL_FAIL(message): the same for a place the program never reaches ("... at FILE:LINE: message").
#pragma once

namespace anneal {

// condition: nullptr for ANNEAL_FAIL.
[[noreturn]] void CheckFailed(const char* file, int line, const char* condition, const char* message);

}  // namespace anneal

#define ANNEAL_CHECK(cond, message) \
  ((cond) ? static_cast<void>(0) : ::anneal::CheckFailed(__FILE__, __LINE__, #cond, message))
#define ANNEAL_FAIL(message) ::anneal::CheckFailed(__FILE__, __LINE__, nullptr, message)
