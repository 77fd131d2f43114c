#include "data/pretokenize.h"

#include <array>

#include "data/utf8.h"

namespace anneal {

namespace {

constexpr std::array<CharClass, 128> MakeAsciiClasses() {
  std::array<CharClass, 128> t{};
  for (int c = 0; c < 128; ++c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      t[c] = CharClass::kLetter;
    } else if (c >= '0' && c <= '9') {
      t[c] = CharClass::kNumber;
    } else if (c == ' ' || (c >= 0x09 && c <= 0x0D)) {
      t[c] = CharClass::kSpace;
    } else {
      t[c] = CharClass::kOther;
    }
  }
  return t;
}
constexpr std::array<CharClass, 128> kAscii = MakeAsciiClasses();

// Class and byte length of the character at s[i].
inline CharClass ClassAt(std::string_view s, size_t i, size_t* len) {
  unsigned char b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) {
    *len = 1;
    return kAscii[b];
  }
  uint32_t cp;
  if (!DecodeUtf8(s, i, &cp, len)) {
    *len = 1;
    return CharClass::kOther;
  }
  return ClassOf(cp);
}

// End of the run of characters of class k starting at i.
inline size_t RunEnd(std::string_view s, size_t i, CharClass k) {
  const size_t n = s.size();
  while (i < n) {
    unsigned char b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      if (kAscii[b] != k) break;
      ++i;
      continue;
    }
    size_t len;
    if (ClassAt(s, i, &len) != k) break;
    i += len;
  }
  return i;
}

}  // namespace

size_t NextPiece(std::string_view s, size_t i) {
  const size_t n = s.size();
  const char c0 = s[i];
  // 's 't 're 've 'm 'll 'd
  if (c0 == '\'' && i + 1 < n) {
    const char c1 = s[i + 1];
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return i + 2;
    if (i + 2 < n) {
      const char c2 = s[i + 2];
      if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return i + 3;
    }
  }
  size_t len0;
  const CharClass k0 = ClassAt(s, i, &len0);
  // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": an optional single space, then a run.
  if (c0 == ' ' && i + 1 < n) {
    size_t len1;
    const CharClass k1 = ClassAt(s, i + 1, &len1);
    if (k1 != CharClass::kSpace) return RunEnd(s, i + 1 + len1, k1);
  }
  if (k0 != CharClass::kSpace) return RunEnd(s, i + len0, k0);
  // "\s+(?!\S)|\s+": a whitespace run; when a non-space follows, the run gives its last character
  // back (so " word" keeps its space), unless the run is a single character.
  size_t j = i + len0, last = i;
  while (j < n) {
    size_t len;
    if (ClassAt(s, j, &len) != CharClass::kSpace) break;
    last = j;
    j += len;
  }
  if (j == n || last == i) return j;
  return last;
}

}  // namespace anneal
