// ConnectNccl in a build without the CUDA toolkit or NCCL (ANNEAL_WITH_NCCL off).
#include "comm/communicator.h"

namespace anneal {

bool NcclAvailable() { return false; }

Result<std::unique_ptr<Communicator>> ConnectNccl(Store*, const CommOptions&, int) {
  return InvalidInput("this anneal was built without NCCL (no CUDA toolkit with NCCL was found at build time): "
                      "rebuild on a machine with /usr/local/cuda, or use the Gloo backend");
}

}  // namespace anneal
