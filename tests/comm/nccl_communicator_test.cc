// The NCCL backend: runs only where this build has NCCL and the machine a GPU; elsewhere "skipped"
// (never "passed"). With one GPU, a group of one rank: every operation on device memory, through the
// same stream, event and watchdog path a multi-GPU group uses.
#include <gtest/gtest.h>

#include "comm/communicator.h"
#include "comm/store.h"

#ifdef ANNEAL_TEST_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace anneal {
namespace {

TEST(NcclCommunicatorTest, WithoutAGpuConnectingSaysSo) {
  if (NcclAvailable()) GTEST_SKIP() << "this machine has a GPU: the error path for GPU-less machines is not reachable";
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  auto store = ConnectTcpStore("127.0.0.1", (*server)->port(), std::chrono::milliseconds(2000));
  ASSERT_TRUE(store.ok());
  CommOptions o;
  auto c = ConnectNccl(store->get(), o, 0);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kInvalidInput);
  EXPECT_NE(c.status().message().find("Gloo"), std::string::npos) << c.status().message();
}

TEST(NcclCommunicatorTest, OneRankOperationsOnDeviceMemory) {
#ifndef ANNEAL_TEST_WITH_CUDA
  GTEST_SKIP() << "built without NCCL";
#else
  if (!NcclAvailable()) GTEST_SKIP() << "no CUDA GPU on this machine";
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
#endif
}

}  // namespace
}  // namespace anneal
