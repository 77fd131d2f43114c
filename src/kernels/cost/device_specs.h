// The GPUs the step cost model (kernels/cost/cost_backend.h, `anneal plan --device NAME`) knows: one
// table (device_specs.cc), each row the vendor's published dense bf16 rate, memory bandwidth and
// memory size, plus the figures the roofline needs that no datasheet gives — what fraction of those
// peaks good kernels attain, the device-side gap between two dependent kernel launches, and what one
// host synchronisation costs the device (it idles while the host reads back and issues again).
// Those are assumptions, stated so the device check can measure them (bench/gpu/device_check.sh
// prints the measured op-time table beside the model's).
#pragma once

#include <string>
#include <vector>

namespace anneal {

struct DeviceSpec {
  std::string name;         // h200, h100, a100 (`--device`)
  std::string description;  // the part, as its vendor names it
  double bf16_tflops = 0;   // dense bf16 tensor-core peak, TFLOP/s
  double f32_tflops = 0;    // fp32 peak (non-tensor-core), TFLOP/s
  double hbm_gbps = 0;      // memory bandwidth, GB/s (1e9 bytes)
  double memory_gb = 0;     // device memory, GB (1e9 bytes)
  double gemm_efficiency = 0;    // the fraction of the tensor-core peak a large GEMM attains
  double flash_efficiency = 0;   // the same for anneal's flash-attention kernels (path 2)
  double memory_efficiency = 0;  // the fraction of the bandwidth a streaming kernel attains
  double launch_us = 0;     // device time between two dependent kernels (launch and tail)
  double sync_us = 0;       // device idle per host synchronisation (read back, issue again)
};

// Every row of the table, and one by name (null when unknown).
const std::vector<DeviceSpec>& DeviceSpecs();
const DeviceSpec* FindDeviceSpec(const std::string& name);

}  // namespace anneal
