// The ObjectStore conformance suite on a live S3 server (peers tier: tests/peers/s3_vs_radosgw.sh
// starts Ceph radosgw and sets ANNEAL_S3_URI and the credentials). Skipped without ANNEAL_S3_URI.
#include <gtest/gtest.h>

#include <cstdlib>

#include "storage/object_store.h"
#include "storage/fault_proxy.h"
#include "storage/object_store_conformance.h"

namespace anneal {
namespace {

TEST(S3ObjectStoreTest, ConformanceOnALiveServer) {
  const char* uri = std::getenv("ANNEAL_S3_URI");
  if (!uri) GTEST_SKIP() << "ANNEAL_S3_URI is not set (tests/peers/s3_vs_radosgw.sh sets it)";
  auto s = OpenObjectStore(uri);
  ASSERT_TRUE(s.ok()) << s.status().message();
  RunObjectStoreConformance(**s);
}

TEST(S3ObjectStoreTest, AWrongSecretIsAnAuthenticationErrorAtOnce) {
  const char* uri = std::getenv("ANNEAL_S3_URI");
  if (!uri) GTEST_SKIP() << "ANNEAL_S3_URI is not set";
  const char* ep = std::getenv("ANNEAL_S3_ENDPOINT");
  ASSERT_NE(ep, nullptr) << "the peers scripts set ANNEAL_S3_ENDPOINT with ANNEAL_S3_URI";
  // Through a pass-through proxy that counts requests: refused credentials are not retried.
  const std::string e = ep;
  FaultProxy proxy("127.0.0.1", std::atoi(e.c_str() + e.rfind(':') + 1),
                   [](const std::string&, int) { return FaultProxy::Action::kForward; });
  const std::string good = std::getenv("AWS_SECRET_ACCESS_KEY");
  setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret", 1);
  setenv("ANNEAL_S3_ENDPOINT", ("http://127.0.0.1:" + std::to_string(proxy.port())).c_str(), 1);
  auto s = OpenObjectStore(uri);
  setenv("AWS_SECRET_ACCESS_KEY", good.c_str(), 1);
  setenv("ANNEAL_S3_ENDPOINT", e.c_str(), 1);
  ASSERT_TRUE(s.ok());
  Status st = (*s)->Put("x", "1");
  EXPECT_EQ(st.code(), Code::kInvalidInput) << st.message();
  EXPECT_NE(st.message().find("credentials were refused"), std::string::npos) << st.message();
  EXPECT_EQ(proxy.requests(), 1) << "refused credentials were retried";
}

}  // namespace
}  // namespace anneal

namespace anneal {
namespace {

// Interoperability with a peer client: the script put an object with s3cmd (ANNEAL_S3_PEER_KEY,
// content ANNEAL_S3_PEER_CONTENT) that anneal must read; anneal writes one the script reads back with
// s3cmd.
TEST(S3ObjectStoreTest, InteropWithAPeerClient) {
  const char* uri = std::getenv("ANNEAL_S3_PEER_URI");
  if (!uri) GTEST_SKIP() << "ANNEAL_S3_PEER_URI is not set";
  auto s = OpenObjectStore(uri);
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto got = (*s)->Get(std::getenv("ANNEAL_S3_PEER_KEY"));
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, std::getenv("ANNEAL_S3_PEER_CONTENT"));
  ASSERT_TRUE((*s)->Put("written by anneal.txt", "hello from anneal\n").ok());
}

}  // namespace
}  // namespace anneal
