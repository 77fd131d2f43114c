// The NCCL backend where it cannot run: without a GPU (or NCCL), connecting is an InvalidInput naming
// Gloo. Its operations on a GPU are tests/comm/nccl_gpu_test.cc (anneal_cuda_tests, needs-gpu).
#include <gtest/gtest.h>

#include "comm/communicator.h"
#include "comm/store.h"

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

}  // namespace
}  // namespace anneal
