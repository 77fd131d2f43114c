// For the tests of CUDA code on a GPU (label needs-gpu): NEED_GPU() skips a test where no CUDA
// device is usable, so it is reported skipped, never passed.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

namespace anneal::testing {

inline bool HaveGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

}  // namespace anneal::testing

#define NEED_GPU() \
  if (!::anneal::testing::HaveGpu()) GTEST_SKIP() << "no CUDA device: this test needs a GPU"
