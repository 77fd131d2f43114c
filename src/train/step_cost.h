// The step cost model: one training step of a config, run through the model's own code on the cost
// backend (kernels/cost/cost_backend.h: records what the CUDA kernels launch, compute, read, write and
// synchronise; computes nothing), priced on a device (kernels/cost/roofline.h). Step 1 is run and
// thrown away (first-step allocations), step 2 is the one priced. `anneal plan --device NAME`.
#pragma once

#include <string>

#include "core/status.h"
#include "kernels/cost/roofline.h"
#include "train/config.h"

namespace anneal {

struct StepCost {
  StepPrice price;
  double tokens = 0;       // per step: B x T x grad_accum
  double model_flops = 0;  // per step: ModelConfig::FlopsPerToken(T) x tokens
  double peak_bytes = 0;   // the cost backend allocator's high-water mark over the two steps
  std::string table;       // FormatStepPrice
};

// `flash`: attention path 2 (ANNEAL_CUDA_ATTENTION=flash), else path 1.
Result<StepCost> PredictStep(const TrainConfig& c, const DeviceSpec& device, bool flash);

}  // namespace anneal
