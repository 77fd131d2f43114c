// The roofline price of a step's op records (kernels/cost/cost_backend.h) on a device
// (kernels/cost/device_specs.h): each record's time is the larger of its FLOPs over the attained
// compute rate (tensor cores for bf16 GEMMs, the CUDA cores' fp32 rate otherwise) and its bytes over
// the attained memory bandwidth, plus a launch gap per kernel and the device's idle time per host
// synchronisation. Copies on the copy stream overlap compute and are listed apart, not added.
#pragma once

#include <string>
#include <vector>

#include "kernels/cost/cost_backend.h"
#include "kernels/cost/device_specs.h"

namespace anneal {

struct PricedOp {
  OpRecord rec;
  double compute_us = 0, memory_us = 0, launch_us = 0, sync_us = 0;
  bool overlapped = false;  // the copy stream's: not on the step's critical path
  double us() const { return (compute_us > memory_us ? compute_us : memory_us) + launch_us + sync_us; }
  const char* bound() const;  // "compute", "memory", "launch" or "sync": the largest term
};

struct StepPrice {
  std::vector<PricedOp> ops;  // sorted by time, the longest first
  double step_us = 0;         // the sum over the critical path
  long launches = 0, syncs = 0;
  double flops = 0, bytes = 0;
};

StepPrice PriceStep(const std::vector<OpRecord>& records, const DeviceSpec& device, bool bf16);

// The table, the longest op first, and the totals; `tokens` per step and `model_flops` per step (the
// MFU numerator, ModelConfig::FlopsPerToken x tokens) give the predicted tokens/s and MFU.
std::string FormatStepPrice(const StepPrice& p, const DeviceSpec& device, double tokens, double model_flops);

}  // namespace anneal
