#include "storage/s3_xml.h"

#include <gtest/gtest.h>

namespace anneal::s3xml {
namespace {

TEST(S3Xml, AListPageGivesKeysUnderThePrefixUnescaped) {
  const std::string body =
      "<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>t&amp;1</NextContinuationToken>"
      "<Contents><Key>run/a&amp;b&#x0D;&#233;.bin</Key><ETag>&quot;e1&quot;</ETag><Size>12</Size></Contents>"
      "<Contents><Key>run/c</Key><ETag>&quot;e2-3&quot;</ETag><Size>0</Size></Contents></ListBucketResult>";
  auto page = ParseListPage(body, "run/");
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].key, "a&b\r\xc3\xa9.bin");
  EXPECT_EQ(page->objects[0].size, 12u);
  EXPECT_EQ(page->objects[0].etag, "\"e1\"");
  EXPECT_EQ(page->objects[1].key, "c");
  EXPECT_EQ(page->next, "t&1");
  auto last = ParseListPage("<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>", "run/");
  ASSERT_TRUE(last.ok());
  EXPECT_TRUE(last->objects.empty());
  EXPECT_TRUE(last->next.empty());
}

// What a broken server or proxy could send: errors naming it, never a crash (the key outside the prefix
// once threw std::out_of_range from substr) or a listing that never ends.
TEST(S3Xml, AnAnswerThatCannotBeRightIsAPeerErrorNamingIt) {
  auto outside = ParseListPage("<Contents><Key>ru</Key><Size>1</Size></Contents>", "run/");
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().code(), Code::kPeer);
  EXPECT_NE(outside.status().message().find("'ru', which is not under the prefix 'run/'"), std::string::npos);
  auto size = ParseListPage("<Contents><Key>run/a</Key><Size>-1</Size></Contents>", "run/");
  ASSERT_FALSE(size.ok());
  EXPECT_NE(size.status().message().find("the size '-1', which is no number"), std::string::npos);
  auto endless = ParseListPage("<IsTruncated>true</IsTruncated>", "run/");
  ASSERT_FALSE(endless.ok());
  EXPECT_NE(endless.status().message().find("no NextContinuationToken"), std::string::npos);
}

TEST(S3Xml, UnescapeTakesEachReferenceOnceAndKeepsWhatItDoesNotKnow) {
  EXPECT_EQ(Unescape("&amp;lt; &lt;&gt;&quot;&apos; &#65;&#x42;&#x1F600;"), "&lt; <>\"' AB\xf0\x9f\x98\x80");
  EXPECT_EQ(Unescape("&nbsp; &#xD800; &#; & &#99999999999;"), "&nbsp; &#xD800; &#; & &#99999999999;");
  const ErrorBody e = ParseError("<Error><Code>SlowDown</Code><Message>a &lt; b</Message><RequestId>r1</RequestId></Error>");
  EXPECT_EQ(e.code, "SlowDown");
  EXPECT_EQ(e.message, "a < b");
  EXPECT_EQ(e.request_id, "r1");
  EXPECT_EQ(Tag("<a>1</a><a>2</a>", "a", 3), "2");
  EXPECT_EQ(Tag("<a>1", "a"), "");
}

}  // namespace
}  // namespace anneal::s3xml
