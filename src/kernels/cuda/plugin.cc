// libanneal_cuda.so's entry points (kernels/cuda/plugin.h).
#include "kernels/cuda/plugin.h"

#include "kernels/cuda/cuda_backend.h"

extern "C" {

__attribute__((visibility("default"))) anneal::Backend* anneal_make_cuda_backend(int index, std::string* why) {
  return anneal::MakeCudaBackend(index, why).release();
}

__attribute__((visibility("default"))) int anneal_cuda_device_count() { return anneal::CudaDeviceCount(); }

}  // extern "C"
