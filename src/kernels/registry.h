// The backends this build and machine have: "ref" (kernels/ref: plain loops, double accumulators,
// one thread — the truth; f32, and bf16 by emulation: inputs widened exactly, outputs rounded to
// nearest even once) and "cpu" (kernels/cpu: OpenBLAS + OpenMP + AVX2, f32 only; deterministic for
// a given thread count); "cuda" joins when built with CUDA and a GPU is present. Backends live for
// the process; a rank's compute runs on one of them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tensor/backend.h"

namespace anneal {

// nullptr for an unknown or absent name.
// The backend called `name` (ref, cpu, cuda), or null; *why then says why (for cuda: no kernels in
// this build, no driver or no device). "cuda" is created on its first lookup.
Backend* BackendByName(const std::string& name, std::string* why = nullptr);
// Whether this build has CUDA kernels, their plugin loads and a CUDA device is visible (no context
// is created).
bool CudaDevicePresent();
// Names of the backends this build and machine have, in registry order.
std::vector<std::string> BackendNames();
// A backend made outside the registry (tests: a sealed-memory backend), found by name from then on.
// A name already registered is replaced for later lookups (the old object stays alive).
void RegisterBackend(std::unique_ptr<Backend> b);
// The two host backends themselves.
Backend& RefBackend();
Backend& CpuBackend();

}  // namespace anneal
