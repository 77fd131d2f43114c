#include "core/check.h"

#include <cstdio>
#include <cstdlib>

namespace anneal {

void CheckFailed(const char* file, int line, const char* condition, const char* message) {
  std::fprintf(stderr, "anneal: internal error at %s:%d: `%s` failed: %s\n", file, line, condition, message);
  std::fflush(stderr);
  std::abort();
}

}  // namespace anneal
