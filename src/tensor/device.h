// Where a tensor's memory lives: the host ("cpu") or a GPU ("cuda:N").
#pragma once

#include <string>

#include "core/status.h"

namespace anneal {

struct Device {
  enum class Kind : uint8_t { kCpu = 0, kCuda = 1 };
  Kind kind = Kind::kCpu;
  int index = 0;  // the GPU's ordinal (cuda); 0 on the host

  static Device Cpu() { return {}; }
  static Device Cuda(int i) { return {Kind::kCuda, i}; }
  bool is_cpu() const { return kind == Kind::kCpu; }
  bool operator==(const Device& o) const { return kind == o.kind && (is_cpu() || index == o.index); }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string ToString() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
};

// "cpu", "cuda" (= cuda:0) or "cuda:N"; exit 2 naming the forms otherwise.
Result<Device> ParseDevice(const std::string& s);

}  // namespace anneal
