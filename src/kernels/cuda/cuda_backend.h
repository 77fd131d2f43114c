// The CUDA backend ("cuda"): every op of tensor/backend.h in f32 and bf16 (fp32 accumulation) on one
// GPU, its memory from cudaMalloc (zeroed), its work on one non-blocking stream, events from a
// reused ring. The ops have no error path (the Backend contract): a failing CUDA or cuBLAS call
// prints its Status (the call, file, line and a hint) and ends the process with its exit code —
// an out-of-memory inside an op is exit 1 with the advice to recompute or shrink the batch.
// Registered by kernels/registry.cc when the build has CUDA kernels and a device is present.
#pragma once

#include <memory>

#include "tensor/backend.h"

namespace anneal {

// The backend for device `index`, or null when there is no usable device (no driver, no GPU):
// *why says which.
std::unique_ptr<Backend> MakeCudaBackend(int index, std::string* why);
// Visible CUDA devices (0 without a driver); creates no context.
int CudaDeviceCount();

}  // namespace anneal
