#include "core/check.h"

#include <cstdio>
#include <cstdlib>

namespace anneal {

void CheckFailed(const char* file, int line, const char* condition, const char* message) {
  if (condition) {
    std::fprintf(stderr, "anneal: internal error at %s:%d: `%s` failed: %s\n", file, line, condition, message);
  } else {
    std::fprintf(stderr, "anneal: internal error at %s:%d: %s\n", file, line, message);
  }
  std::fflush(stderr);
  std::abort();
}

}  // namespace anneal
