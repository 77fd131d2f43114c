#include "core/crypto.h"
#include "storage/sigv4.h"

#include <gtest/gtest.h>

namespace anneal {
namespace {

// Amazon S3's documented example (Signature Version 4, "GET Object" with a Range header, payload in a
// single chunk): bucket examplebucket, key test.txt, 24 May 2013, the documentation's example keys.
// The expected signature is AWS's published one.
TEST(SigV4Test, AwsDocumentedGetObjectExample) {
  SigV4Request r;
  r.method = "GET";
  r.path = "/test.txt";
  const std::string empty_sha = Sha256Hex("");
  ASSERT_EQ(empty_sha, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  r.headers = {{"Host", "examplebucket.s3.amazonaws.com"},
               {"Range", "bytes=0-9"},
               {"x-amz-content-sha256", empty_sha},
               {"x-amz-date", "20130524T000000Z"}};
  r.payload_sha256 = empty_sha;
  SigV4Credentials c{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""};
  SigV4Result s = SigV4Sign(r, c, "20130524T000000Z", "us-east-1");
  EXPECT_EQ(s.canonical_request,
            "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
            "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
            "x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(s.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  // A different secret must give a different signature (the test can fail).
  c.secret_key[0] = 'x';
  EXPECT_NE(SigV4Sign(r, c, "20130524T000000Z", "us-east-1").authorization, s.authorization);
}

TEST(SigV4Test, QueryAndHeaderCanonicalisation) {
  SigV4Request r;
  r.method = "GET";
  r.path = "/bucket";
  r.query = {{"prefix", "a b/c"}, {"list-type", "2"}, {"continuation-token", "x=y"}};
  r.headers = {{"X-Amz-Date", "20250101T000000Z"}, {"Host", "127.0.0.1:7480"}, {"X-Extra", "  two   spaces "}};
  r.payload_sha256 = "UNSIGNED-PAYLOAD";
  SigV4Result s = SigV4Sign(r, {"AK", "SK", "TOKEN"}, "20250101T000000Z", "default");
  // Sorted, encoded query ('/' and '=' and ' ' encoded); headers lower-cased, sorted, trimmed; the
  // session token signed as x-amz-security-token.
  EXPECT_NE(s.canonical_request.find("\ncontinuation-token=x%3Dy&list-type=2&prefix=a%20b%2Fc\n"), std::string::npos)
      << s.canonical_request;
  EXPECT_NE(s.canonical_request.find("host:127.0.0.1:7480\nx-amz-date:20250101T000000Z\nx-amz-security-token:TOKEN\n"
                                     "x-extra:two spaces\n"),
            std::string::npos)
      << s.canonical_request;
  EXPECT_NE(s.authorization.find("SignedHeaders=host;x-amz-date;x-amz-security-token;x-extra,"), std::string::npos);
  EXPECT_EQ(UriEncode("dir/file name~(1).bin", false), "dir/file%20name~%281%29.bin");
  EXPECT_EQ(UriEncode("a/b", true), "a%2Fb");
}

}  // namespace
}  // namespace anneal
