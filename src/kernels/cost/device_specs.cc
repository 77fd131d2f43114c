#include "kernels/cost/device_specs.h"

namespace anneal {

// Peaks: NVIDIA's datasheets (SXM parts, dense — without 2:4 sparsity). H200 has H100's compute and
// a faster, larger memory. The efficiencies, launch and sync costs are this project's assumptions
// (cuBLASLt's large bf16 GEMMs reach about 75-80 % of the tensor-core peak on Hopper; a streaming
// kernel about 85-90 % of the bandwidth; back-to-back dependent launches a few microseconds; anneal's
// flash kernels, whose loads wait right after they are issued (no cp.async pipelining yet), a third of
// the peak at best, where FlashAttention-2 reaches 50-70 %) until the device check measures them.
const std::vector<DeviceSpec>& DeviceSpecs() {
  static const std::vector<DeviceSpec> specs = {
      {"h200", "NVIDIA H200 SXM 141GB", 989.4, 66.9, 4800, 141, 0.78, 0.33, 0.85, 2.5, 15},
      {"h100", "NVIDIA H100 SXM5 80GB", 989.4, 66.9, 3350, 80, 0.78, 0.33, 0.85, 2.5, 15},
      {"a100", "NVIDIA A100 SXM4 80GB", 312.0, 19.5, 2039, 80, 0.80, 0.33, 0.85, 3.0, 15},
  };
  return specs;
}

const DeviceSpec* FindDeviceSpec(const std::string& name) {
  for (const DeviceSpec& s : DeviceSpecs()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

}  // namespace anneal
