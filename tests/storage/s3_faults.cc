// The S3 backend under faults, against a live server (peers tier: tests/peers/s3_vs_radosgw.sh and
// s3_vs_s3rver.sh set ANNEAL_S3_ENDPOINT, ANNEAL_S3_URI and the credentials): a FaultProxy in front of
// the real server answers 503 storms, resets, truncates and stalls responses and loses answers; the
// backend must ride them out within its retry budget, or fail clearly after it. Also multipart
// uploads (parallel parts, abort on failure, the lost CompleteMultipartUpload answer), conditional
// reads, credentials from a shared file and profile, and virtual-host addressing.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>

#include <openssl/evp.h>

#include "storage/fault_proxy.h"
#include "storage/object_store.h"
#include "storage/s3_stats.h"
#include "testing/temp_dir.h"

namespace anneal {
namespace {

// Sets environment variables for the scope, restoring the previous values after.
class ScopedEnv {
 public:
  void Set(const char* k, const std::string& v) {
    Save(k);
    setenv(k, v.c_str(), 1);
  }
  void Unset(const char* k) {
    Save(k);
    unsetenv(k);
  }
  ~ScopedEnv() {
    for (auto& [k, v] : saved_) {
      if (v) setenv(k.c_str(), v->c_str(), 1);
      else unsetenv(k.c_str());
    }
  }

 private:
  void Save(const char* k) {
    if (saved_.count(k)) return;
    const char* v = std::getenv(k);
    saved_[k] = v ? std::optional<std::string>(v) : std::nullopt;
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

std::string Md5Hex(const std::string& data) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), d, &n, EVP_md5(), nullptr);
  std::string out;
  for (unsigned int i = 0; i < n; ++i) {
    out += "0123456789abcdef"[d[i] >> 4];
    out += "0123456789abcdef"[d[i] & 15];
  }
  return out;
}

class S3FaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* uri = std::getenv("ANNEAL_S3_URI");
    const char* ep = std::getenv("ANNEAL_S3_ENDPOINT");
    if (!uri || !ep) GTEST_SKIP() << "ANNEAL_S3_URI / ANNEAL_S3_ENDPOINT not set (the peers scripts set them)";
    uri_ = std::string(uri) + "-faults";
    const std::string e = ep;
    const size_t colon = e.rfind(':');
    port_ = std::atoi(e.c_str() + colon + 1);
    env_.Set("ANNEAL_S3_STALL_S", "1");
    env_.Set("ANNEAL_S3_RETRY_BUDGET_S", "20");
  }
  // A store that talks to the server through `proxy`.
  std::unique_ptr<ObjectStore> Through(const FaultProxy& proxy) {
    ScopedEnv e;
    e.Set("ANNEAL_S3_ENDPOINT", "http://127.0.0.1:" + std::to_string(proxy.port()));
    auto s = OpenObjectStore(uri_);
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  std::unique_ptr<ObjectStore> Direct() { return std::move(OpenObjectStore(uri_)).value(); }
  static std::string Bytes(size_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    return s;
  }
  std::string uri_;
  int port_ = 0;
  ScopedEnv env_;
};

using Action = FaultProxy::Action;

TEST_F(S3FaultTest, AStormOf503sIsRiddenOut) {
  FaultProxy proxy("127.0.0.1", port_, [](const std::string&, int i) { return i < 3 ? Action::k503 : Action::kForward; });
  auto s = Through(proxy);
  const S3Snapshot before = S3CounterSnapshot();
  ASSERT_TRUE(s->Put("storm/a", "after the storm").ok());
  EXPECT_EQ(proxy.requests(), 4);
  // What the agent ships as the node's s3_* metrics: 4 requests, 3 of them retries after SlowDown.
  const S3Snapshot d = S3CounterDelta(before, S3CounterSnapshot());
  EXPECT_EQ(d[0], (std::pair<std::string, double>{"s3_requests", 4}));
  EXPECT_EQ(d[1], (std::pair<std::string, double>{"s3_retries", 3}));
  EXPECT_EQ(d[2], (std::pair<std::string, double>{"s3_throttled", 3}));
  EXPECT_EQ(d[3], (std::pair<std::string, double>{"s3_failures", 0}));
  EXPECT_EQ(d[4].second, 4 * 15.0);  // "after the storm", sent each time
  EXPECT_EQ(*Direct()->Get("storm/a"), "after the storm");
}

TEST_F(S3FaultTest, EndlessSlowDownFailsWithinTheBudget) {
  env_.Set("ANNEAL_S3_RETRY_BUDGET_S", "2");
  FaultProxy proxy("127.0.0.1", port_, [](const std::string&, int) { return Action::k503; });
  auto s = Through(proxy);
  const auto t0 = std::chrono::steady_clock::now();
  Status st = s->Put("storm/b", "never");
  EXPECT_EQ(st.code(), Code::kPeer) << st.message();
  EXPECT_NE(st.message().find("503"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("SlowDown"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("[request id fault-"), std::string::npos) << st.message();  // the server's id
  // Within the 2 s budget plus one backoff sleep and the last request's time (a margin of the
  // configured budget, not of the machine's speed).
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2 * 2));
  EXPECT_GE(proxy.requests(), 2);
  EXPECT_LE(proxy.requests(), 6);
}

TEST_F(S3FaultTest, ResetTruncatedAndStalledResponsesAreRetried) {
  const std::string data = Bytes(300000, 1);
  ASSERT_TRUE(Direct()->Put("flaky/obj", data).ok());
  FaultProxy proxy("127.0.0.1", port_, [](const std::string&, int i) {
    return i == 0 ? Action::kReset : i == 1 ? Action::kTruncate : i == 2 ? Action::kStall : Action::kForward;
  });
  auto s = Through(proxy);
  auto got = s->Get("flaky/obj");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, data);
  EXPECT_EQ(proxy.requests(), 4);
}

TEST_F(S3FaultTest, MultipartUploadSendsPartsInParallelAndReassembles) {
  env_.Set("ANNEAL_S3_MULTIPART_MB", "6");
  env_.Set("ANNEAL_S3_PART_MB", "5");
  FaultProxy proxy("127.0.0.1", port_, [](const std::string&, int) { return Action::kForward; });
  auto s = Through(proxy);
  const std::string data = Bytes(12 << 20, 2);
  ASSERT_TRUE(s->Put("multi/big", data).ok());
  int parts = 0;
  for (const auto& l : proxy.lines()) parts += l.find("partNumber=") != std::string::npos;
  EXPECT_EQ(parts, 3);
  auto info = Direct()->Head("multi/big");
  ASSERT_TRUE(info.ok() && *info);
  EXPECT_EQ((*info)->size, data.size());
  // S3's multipart ETag ("<md5 of the parts' md5s>-3"; radosgw), or a plain MD5 of the whole (s3rver).
  std::string plain = "\"";
  plain.append(Md5Hex(data)).append("\"");
  EXPECT_TRUE((*info)->etag.find("-3\"") != std::string::npos || (*info)->etag == plain) << (*info)->etag;
  EXPECT_EQ(*Direct()->Get("multi/big"), data);
}

TEST_F(S3FaultTest, AFailingPartAbortsTheUpload) {
  env_.Set("ANNEAL_S3_MULTIPART_MB", "6");
  env_.Set("ANNEAL_S3_PART_MB", "5");
  env_.Set("ANNEAL_S3_RETRY_BUDGET_S", "1");
  FaultProxy proxy("127.0.0.1", port_, [](const std::string& l, int) {
    return l.find("partNumber=2") != std::string::npos ? Action::k503 : Action::kForward;
  });
  auto s = Through(proxy);
  Status st = s->Put("multi/failed", Bytes(12 << 20, 3));
  EXPECT_EQ(st.code(), Code::kPeer) << st.message();
  EXPECT_NE(st.message().find("multipart upload aborted"), std::string::npos) << st.message();
  bool aborted = false;
  for (const auto& l : proxy.lines()) aborted |= l.rfind("DELETE ", 0) == 0 && l.find("uploadId=") != std::string::npos;
  EXPECT_TRUE(aborted) << "no AbortMultipartUpload was sent";
  auto info = Direct()->Head("multi/failed");
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->has_value()) << "a failed upload left an object";
}

TEST_F(S3FaultTest, ALostCompleteAnswerIsCheckedWithHead) {
  env_.Set("ANNEAL_S3_MULTIPART_MB", "6");
  env_.Set("ANNEAL_S3_PART_MB", "5");
  std::atomic<bool> dropped{false};
  FaultProxy proxy("127.0.0.1", port_, [&](const std::string& l, int) {
    const bool complete = l.rfind("POST ", 0) == 0 && l.find("uploadId=") != std::string::npos;
    if (complete && !dropped.exchange(true)) return Action::kDropResponse;  // the server completes it
    return Action::kForward;
  });
  auto s = Through(proxy);
  const std::string data = Bytes(11 << 20, 4);
  Status st = s->Put("multi/lost-answer", data);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(dropped);
  EXPECT_EQ(*Direct()->Get("multi/lost-answer"), data);
}

TEST_F(S3FaultTest, AnObjectRewrittenUnderAStreamingReadIsAnError) {
  auto s = Direct();
  ASSERT_TRUE(s->Put("stream/x", "version one").ok());
  auto info = s->Head("stream/x");
  ASSERT_TRUE(info.ok() && *info);
  auto part = s->GetIfMatch("stream/x", (*info)->etag, 0, 7);
  ASSERT_TRUE(part.ok()) << part.status().message();
  EXPECT_EQ(*part, "version");
  ASSERT_TRUE(s->Put("stream/x", "version two, longer").ok());
  auto rest = s->GetIfMatch("stream/x", (*info)->etag, 7);
  ASSERT_FALSE(rest.ok());
  EXPECT_EQ(rest.status().code(), Code::kPeer);
  EXPECT_NE(rest.status().message().find("changed while it was being read"), std::string::npos);
}

TEST_F(S3FaultTest, AMissingBucketIsBadInputNamingTheFix) {
  // Through a pass-through proxy, which counts the requests: a missing bucket is not retried (one
  // request), whatever the machine's load (no wall-clock bound).
  FaultProxy proxy("127.0.0.1", port_, [](const std::string&, int) { return Action::kForward; });
  ScopedEnv e;
  e.Set("ANNEAL_S3_ENDPOINT", "http://127.0.0.1:" + std::to_string(proxy.port()));
  auto s = OpenObjectStore("s3://anneal-no-such-bucket-9f3a/p");
  ASSERT_TRUE(s.ok()) << s.status().message();
  Status st = (*s)->Put("x", "1");
  EXPECT_EQ(st.ExitCode(), 2) << st.message();
  EXPECT_NE(st.message().find("NoSuchBucket"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("create the bucket"), std::string::npos) << st.message();
  EXPECT_EQ(proxy.requests(), 1) << "a missing bucket was retried";
}

TEST_F(S3FaultTest, CredentialsFromTheSharedFileAndAProfile) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/credentials";
  std::ofstream(path) << "[default]\naws_access_key_id = nobody\naws_secret_access_key = nothing\n\n[rgw]\n"
                      << "aws_access_key_id = " << std::getenv("AWS_ACCESS_KEY_ID") << "\naws_secret_access_key = "
                      << std::getenv("AWS_SECRET_ACCESS_KEY") << "\n";
  env_.Set("AWS_SHARED_CREDENTIALS_FILE", path);
  env_.Set("AWS_CONFIG_FILE", dir.path() + "/no-config");
  env_.Unset("AWS_ACCESS_KEY_ID");
  env_.Unset("AWS_SECRET_ACCESS_KEY");
  env_.Set("AWS_PROFILE", "rgw");
  auto s = OpenObjectStore(uri_);
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_TRUE((*s)->Put("profile/x", "from a profile").ok());
  EXPECT_EQ(*(*s)->Get("profile/x"), "from a profile");
  env_.Set("AWS_PROFILE", "default");  // the wrong keys: refused at once, naming the file
  auto bad = OpenObjectStore(uri_);
  ASSERT_TRUE(bad.ok());
  Status st = (*bad)->Put("profile/y", "no");
  EXPECT_EQ(st.code(), Code::kInvalidInput);
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
}

TEST_F(S3FaultTest, VirtualHostAddressing) {
  // bucket.localhost resolves to loopback (curl); the server must accept the bucket in the Host
  // (radosgw with rgw_dns_name = localhost: scripts/start_radosgw.sh). s3rver 5.0.0 answers
  // virtual-host requests with SignatureDoesNotMatch, so its script leaves this out.
  if (!std::getenv("ANNEAL_S3_VHOST")) GTEST_SKIP() << "this server is not set up for virtual-host addressing";
  env_.Set("ANNEAL_S3_ADDRESSING", "virtual");
  env_.Set("ANNEAL_S3_ENDPOINT", "http://localhost:" + std::to_string(port_));
  auto s = OpenObjectStore(uri_);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_NE((*s)->Describe().find("virtual-host"), std::string::npos);
  Status st = (*s)->Put("vhost/x", "virtual");
  ASSERT_TRUE(st.ok()) << st.message();
  env_.Unset("ANNEAL_S3_ADDRESSING");
  EXPECT_EQ(*Direct()->Get("vhost/x"), "virtual");
  auto listed = (*s)->ListAll("vhost/");
  ASSERT_TRUE(listed.ok()) << listed.status().message();
  ASSERT_EQ(listed->size(), 1u);
}

}  // namespace
}  // namespace anneal
