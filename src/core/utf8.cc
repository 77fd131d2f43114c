#include "core/utf8.h"

namespace anneal {

bool DecodeUtf8(std::string_view s, size_t i, uint32_t* cp, size_t* len) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
  size_t avail = s.size() - i;
  unsigned char b0 = p[0];
  if (b0 < 0x80) {
    *cp = b0;
    *len = 1;
    return true;
  }
  // Expected length and the allowed range of the second byte (Unicode Table 3-7).
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;
  uint32_t v;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
    v = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    v = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    v = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    *len = 1;
    return false;
  }
  for (size_t k = 1; k < need; ++k) {
    if (k >= avail) {
      *len = k;
      return false;
    }
    unsigned char b = p[k];
    unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) {
      *len = k;
      return false;
    }
    v = (v << 6) | (b & 0x3F);
  }
  *cp = v;
  *len = need;
  return true;
}

size_t FindInvalidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    uint32_t cp;
    size_t len;
    if (!DecodeUtf8(s, i, &cp, &len)) return i;
    i += len;
  }
  return std::string_view::npos;
}

std::string ReplaceInvalidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    uint32_t cp;
    size_t len;
    if (DecodeUtf8(s, i, &cp, &len)) {
      out.append(s.substr(i, len));
    } else {
      out.append("\xEF\xBF\xBD");
    }
    i += len;
  }
  return out;
}

}  // namespace anneal
