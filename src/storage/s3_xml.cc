#include "storage/s3_xml.h"

#include <cstdint>
#include <cstring>

namespace anneal::s3xml {
namespace {

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// A numeric reference's code point from the text between "&#" and ";" ("x1F" or "31"), or -1.
int64_t CodePoint(const std::string& s) {
  const bool hex = !s.empty() && (s[0] == 'x' || s[0] == 'X');
  const std::string digits = hex ? s.substr(1) : s;
  if (digits.empty() || digits.size() > 8) return -1;
  int64_t v = 0;
  for (char c : digits) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (hex && c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (hex && c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return -1;
    v = v * (hex ? 16 : 10) + d;
  }
  const bool surrogate = v >= 0xD800 && v <= 0xDFFF;
  return v > 0 && v <= 0x10FFFF && !surrogate ? v : -1;
}

bool ParseSize(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

}  // namespace

std::string Tag(const std::string& xml, const std::string& tag, size_t from, size_t* end) {
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  const size_t a = xml.find(open, from);
  if (a == std::string::npos) return "";
  const size_t b = xml.find(close, a + open.size());
  if (b == std::string::npos) return "";
  if (end) *end = b + close.size();
  return xml.substr(a + open.size(), b - a - open.size());
}

std::string Unescape(const std::string& s) {
  static const std::pair<const char*, char> kNamed[] = {{"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}, {"amp", '&'}};
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const size_t semi = s[i] == '&' ? s.find(';', i + 1) : std::string::npos;
    if (semi == std::string::npos || semi - i > 12) {
      out += s[i];
      continue;
    }
    const std::string name = s.substr(i + 1, semi - i - 1);
    bool done = false;
    for (const auto& [n, c] : kNamed) {
      if (name == n) out += c, done = true;
    }
    if (!done && name.size() > 1 && name[0] == '#') {
      if (const int64_t cp = CodePoint(name.substr(1)); cp >= 0) AppendUtf8(static_cast<uint32_t>(cp), &out), done = true;
    }
    if (done) {
      i = semi;
    } else {
      out += s[i];
    }
  }
  return out;
}

Result<ListPage> ParseListPage(const std::string& body, const std::string& prefix) {
  ListPage page;
  size_t pos = 0, end = 0;
  for (;;) {
    const std::string c = Tag(body, "Contents", pos, &end);
    if (end <= pos) break;  // no further <Contents>
    pos = end;
    ObjectInfo info;
    const std::string key = Unescape(Tag(c, "Key"));
    if (key.compare(0, prefix.size(), prefix) != 0) {
      return PeerError("the server listed the key '" + key.substr(0, 200) + "', which is not under the prefix '" + prefix +
                       "' asked for: a listing that cannot be right (a proxy or the server is broken)");
    }
    info.key = key.substr(prefix.size());
    const std::string size = Tag(c, "Size");
    if (!ParseSize(size, &info.size)) {
      return PeerError("the server listed '" + key.substr(0, 200) + "' with the size '" + size.substr(0, 40) +
                       "', which is no number of bytes");
    }
    info.etag = Unescape(Tag(c, "ETag"));
    page.objects.push_back(std::move(info));
  }
  if (Tag(body, "IsTruncated") == "true") {
    page.next = Unescape(Tag(body, "NextContinuationToken"));
    if (page.next.empty()) {
      return PeerError("the server said the listing of '" + prefix + "' goes on (IsTruncated) but gave no "
                       "NextContinuationToken: the rest of it cannot be asked for");
    }
  }
  return page;
}

ErrorBody ParseError(const std::string& body) {
  return {Unescape(Tag(body, "Code")), Unescape(Tag(body, "Message")), Unescape(Tag(body, "RequestId"))};
}

}  // namespace anneal::s3xml
