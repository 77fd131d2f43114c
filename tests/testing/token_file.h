// The secret in a token file the server wrote (<data-dir>/admin.token, join.token), without its
// trailing newline; a test failure when it cannot be read.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "core/env.h"

namespace anneal::testing {

inline std::string ReadTokenFile(const std::string& path) {
  auto t = Env::Default().ReadFile(path);
  EXPECT_TRUE(t.ok()) << path;
  std::string s = t.ok() ? *t : "";
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

}  // namespace anneal::testing
