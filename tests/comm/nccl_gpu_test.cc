// The NCCL backend on a GPU (anneal_cuda_tests, label needs-gpu: skipped without one, never passed):
// with one GPU, a group of one rank — every operation on device memory, through the same stream,
// event and watchdog path a multi-GPU group uses.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "comm/communicator.h"
#include "comm/store.h"
#include "testing/gpu.h"

namespace anneal {
namespace {

TEST(NcclCommunicatorTest, OneRankOperationsOnDeviceMemory) {
  NEED_GPU();
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  auto store = ConnectTcpStore("127.0.0.1", (*server)->port(), std::chrono::milliseconds(2000));
  ASSERT_TRUE(store.ok());
  CommOptions o;
  o.group = "nccl-test";
  o.timeout = std::chrono::milliseconds(20000);
  auto c = ConnectNccl(store->get(), o, 0);
  ASSERT_TRUE(c.ok()) << c.status().message();
  const size_t n = 1 << 20;
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>(i % 1000);
  float* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dev, host.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_TRUE((*c)->AllReduceSum(dev, n).ok());
  ASSERT_TRUE((*c)->ReduceScatterSum(dev, {n}, dev).ok());
  ASSERT_TRUE((*c)->AllGatherV(dev, {n}).ok());
  ASSERT_TRUE((*c)->Broadcast(dev, n * sizeof(float), 0).ok());
  ASSERT_TRUE((*c)->Barrier().ok());
  std::vector<float> back(n);
  ASSERT_EQ(cudaMemcpy(back.data(), dev, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, host);  // a group of one: every reduction is the identity
  cudaFree(dev);
}

}  // namespace
}  // namespace anneal
