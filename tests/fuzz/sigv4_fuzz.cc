// SigV4 canonical requests (storage/sigv4.h): keys and query values come from users' paths and
// listings. Properties: UriEncode leaves only unreserved characters, '%XX' escapes (and '/' when
// asked), and decodes back to its input; signing any path and query gives a well-formed header.
#include <cctype>

#include "fuzz/fuzz_target.h"
#include "storage/sigv4.h"

namespace {

int Hex(char c) { return std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : c - 'A' + 10; }

std::string Decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += static_cast<char>(Hex(s[i + 1]) * 16 + Hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

ANNEAL_FUZZ_TARGET(sigv4) {
  const std::string text = anneal::fuzz::Text(data, size);
  for (const bool slash : {false, true}) {
    const std::string e = anneal::UriEncode(text, slash);
    for (size_t i = 0; i < e.size(); ++i) {
      const char c = e[i];
      const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '~' ||
                      (c == '/' && !slash) || (c == '%' && i + 2 < e.size() && std::isxdigit(static_cast<unsigned char>(e[i + 1])) &&
                                               std::isxdigit(static_cast<unsigned char>(e[i + 2])));
      FUZZ_EXPECT(ok);
    }
    FUZZ_EXPECT(Decode(e) == text);
  }
  // The input split at its first NUL: a key (the path) and a query value.
  const size_t nul = text.find('\0');
  anneal::SigV4Request r;
  r.method = "GET";
  r.path = "/bucket/" + anneal::UriEncode(text.substr(0, nul), false);
  if (nul != std::string::npos) r.query["prefix"] = text.substr(nul + 1);
  r.query["list-type"] = "2";
  r.headers["host"] = "localhost:7480";
  r.headers["x-amz-date"] = "20261206T000000Z";
  r.payload_sha256 = "UNSIGNED-PAYLOAD";
  const auto s = anneal::SigV4Sign(r, {"AKID", "SECRET", ""}, "20261206T000000Z", "us-east-1");
  FUZZ_EXPECT(s.authorization.rfind("AWS4-HMAC-SHA256 Credential=AKID/20261206/us-east-1/s3/aws4_request", 0) == 0);
  FUZZ_EXPECT(s.canonical_request.find(r.path) != std::string::npos);
  return 0;
}
