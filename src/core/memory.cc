#include "core/memory.h"

#include <cmath>
#include <map>
#include <string>

#include <sys/mman.h>

#include <cstdint>

namespace anneal {

void AdviseHugePages(void* p, size_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
  if (end > begin) (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

Result<uint64_t> ParseByteSize(const std::string& text, const std::string& what) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (...) {
    pos = 0;
  }
  const std::string unit = text.substr(pos);
  const std::map<std::string, double> units = {{"", 1},          {"B", 1},           {"KB", 1e3},
                                               {"MB", 1e6},      {"GB", 1e9},        {"TB", 1e12},
                                               {"KiB", 1024.0},  {"MiB", 1048576.0}, {"GiB", 1073741824.0},
                                               {"TiB", 1099511627776.0}};
  auto it = units.find(unit);
  if (pos == 0 || it == units.end() || !(v > 0) || !std::isfinite(v) || v * it->second >= 1.8e19) {
    return InvalidInput(what + " '" + text + "' must be a size such as 5GB, 500MB, 80GiB or 100000");
  }
  return static_cast<uint64_t>(v * it->second);
}

}  // namespace anneal
