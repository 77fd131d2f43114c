#include "storage/sigv4.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <vector>

#include "core/crypto.h"

namespace anneal {

namespace {

std::string CanonicalHeaderValue(const std::string& v) {
  // Canonical header values: leading/trailing spaces removed, inner runs of spaces collapsed.
  std::string out;
  bool space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

}  // namespace

std::string UriEncode(std::string_view s, bool encode_slash) {
  std::string out;
  out.reserve(s.size() * 3);
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (c == '/' && !encode_slash)) {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

SigV4Result SigV4Sign(const SigV4Request& r, const SigV4Credentials& c, const std::string& amz_date,
                      const std::string& region, const std::string& service) {
  SigV4Result out;
  // Canonical query: names and values encoded, sorted by encoded name (then value).
  std::vector<std::pair<std::string, std::string>> q;
  for (const auto& [k, v] : r.query) q.push_back({UriEncode(k, true), UriEncode(v, true)});
  std::sort(q.begin(), q.end());
  std::string query;
  for (const auto& [k, v] : q) query += (query.empty() ? "" : "&") + k + "=" + v;
  // Canonical headers: lower-case names, sorted, trimmed values.
  std::map<std::string, std::string> h;
  for (const auto& [k, v] : r.headers) {
    std::string name = k;
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return std::tolower(ch); });
    h[name] = CanonicalHeaderValue(v);
  }
  if (!c.session_token.empty()) h["x-amz-security-token"] = c.session_token;
  std::string canonical_headers, signed_headers;
  for (const auto& [k, v] : h) {
    canonical_headers += k + ":" + v + "\n";
    signed_headers += (signed_headers.empty() ? "" : ";") + k;
  }
  out.canonical_request = r.method + "\n" + (r.path.empty() ? "/" : r.path) + "\n" + query + "\n" + canonical_headers +
                          "\n" + signed_headers + "\n" + r.payload_sha256;
  const std::string date = amz_date.substr(0, 8);
  const std::string scope = date + "/" + region + "/" + service + "/aws4_request";
  out.string_to_sign = "AWS4-HMAC-SHA256\n" + amz_date + "\n" + scope + "\n" + Sha256Hex(out.canonical_request);
  const std::string k_date = HmacSha256("AWS4" + c.secret_key, date);
  const std::string k_region = HmacSha256(k_date, region);
  const std::string k_service = HmacSha256(k_region, service);
  const std::string k_signing = HmacSha256(k_service, "aws4_request");
  const std::string sig = HmacSha256(k_signing, out.string_to_sign);
  out.authorization = "AWS4-HMAC-SHA256 Credential=" + c.access_key + "/" + scope + ",SignedHeaders=" + signed_headers +
                      ",Signature=" + HexLower(sig);
  return out;
}

}  // namespace anneal
