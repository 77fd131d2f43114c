#include "tensor/device.h"

#include <cstdlib>

namespace anneal {

Result<Device> ParseDevice(const std::string& s) {
  if (s == "cpu") return Device::Cpu();
  if (s == "cuda") return Device::Cuda(0);
  if (s.rfind("cuda:", 0) == 0 && s.size() > 5 && s.size() < 9) {
    char* end = nullptr;
    const long i = std::strtol(s.c_str() + 5, &end, 10);
    if (*end == '\0' && i >= 0) return Device::Cuda(static_cast<int>(i));
  }
  return InvalidInput("unknown device '" + s + "': use cpu, cuda or cuda:N");
}

}  // namespace anneal
