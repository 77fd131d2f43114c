#include "core/text.h"

namespace anneal {

namespace {
constexpr const char* kSpace = " \t\r\n";
}  // namespace

std::string TrimTrailing(std::string s) {
  const size_t e = s.find_last_not_of(kSpace);
  s.erase(e == std::string::npos ? 0 : e + 1);
  return s;
}

std::string Trim(std::string s) {
  s = TrimTrailing(std::move(s));
  s.erase(0, s.find_first_not_of(kSpace));
  return s;
}

}  // namespace anneal
