// The XML answers of an S3 server, read (storage/s3_object_store.cc): ListObjectsV2 pages, the
// UploadId of CreateMultipartUpload, and error bodies. S3's XML is flat, so the reader takes the text
// of the first <Tag>...</Tag> after a position and unescapes the five named entities and numeric
// character references. What a server sends is input anneal does not control (a proxy, a bug, an
// attacker): an answer that cannot be right (a key outside the listed prefix, a size that is no number,
// a truncated page without its continuation token) is a PeerError naming it, never a crash or an
// endless listing.
#pragma once

#include <cstddef>
#include <string>

#include "core/status.h"
#include "storage/object_store.h"

namespace anneal::s3xml {

// The text between the first "<tag>" at or after `from` and the next "</tag>" ("" when either is
// missing); *end (when given) gets the position after the close.
std::string Tag(const std::string& xml, const std::string& tag, size_t from = 0, size_t* end = nullptr);
// &lt; &gt; &quot; &apos; &amp; and &#N; / &#xH; (as UTF-8) replaced, in one left-to-right pass;
// anything else is kept as it is.
std::string Unescape(const std::string& s);

// A ListObjectsV2 page whose every key starts with `prefix` (the store's own key prefix, removed).
Result<ListPage> ParseListPage(const std::string& body, const std::string& prefix);

// The fields of an <Error> body ("" where absent).
struct ErrorBody {
  std::string code, message, request_id;
};
ErrorBody ParseError(const std::string& body);

}  // namespace anneal::s3xml
