#include "data/pretokenize.h"

#include <array>

#include "data/utf8.h"

namespace anneal {

namespace {

// Class bits (data/utf8.h's ClassBitsOf) of the ASCII characters.
constexpr std::array<uint8_t, 128> MakeAsciiBits() {
  std::array<uint8_t, 128> t{};
  for (int c = 0; c < 128; ++c) {
    if (c >= 'a' && c <= 'z') {
      t[c] = static_cast<uint8_t>(CharClass::kLetter) | kLowerSet;
    } else if (c >= 'A' && c <= 'Z') {
      t[c] = static_cast<uint8_t>(CharClass::kLetter) | kUpperSet;
    } else if (c >= '0' && c <= '9') {
      t[c] = static_cast<uint8_t>(CharClass::kNumber);
    } else if (c == ' ' || (c >= 0x09 && c <= 0x0D)) {
      t[c] = static_cast<uint8_t>(CharClass::kSpace);
    } else {
      t[c] = static_cast<uint8_t>(CharClass::kOther);
    }
  }
  return t;
}
constexpr std::array<uint8_t, 128> kAsciiBits = MakeAsciiBits();

constexpr std::array<CharClass, 128> MakeAsciiClasses() {
  std::array<CharClass, 128> t{};
  for (int c = 0; c < 128; ++c) t[c] = static_cast<CharClass>(kAsciiBits[c] & kClassMask);
  return t;
}
constexpr std::array<CharClass, 128> kAscii = MakeAsciiClasses();

// Class bits and byte length of the character at s[i].
inline uint8_t BitsAt(std::string_view s, size_t i, size_t* len) {
  unsigned char b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) {
    *len = 1;
    return kAsciiBits[b];
  }
  uint32_t cp;
  if (!DecodeUtf8(s, i, &cp, len)) {
    *len = 1;
    return static_cast<uint8_t>(CharClass::kOther);
  }
  return ClassBitsOf(cp);
}

// Class and byte length of the character at s[i].
inline CharClass ClassAt(std::string_view s, size_t i, size_t* len) {
  unsigned char b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) {
    *len = 1;
    return kAscii[b];
  }
  return static_cast<CharClass>(BitsAt(s, i, len) & kClassMask);
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

// End of the run of characters having one of the bits `set` (kUpperSet or kLowerSet) from i.
inline size_t SetRunEnd(std::string_view s, size_t i, uint8_t set) {
  const size_t n = s.size();
  size_t len;
  while (i < n && (BitsAt(s, i, &len) & set)) i += len;
  return i;
}

inline bool IsNewline(char c) { return c == '\r' || c == '\n'; }

// [^\r\n\p{L}\p{N}]: the optional character before a letter piece (cl100k, o200k).
inline bool IsLetterPrefix(char c, CharClass k) {
  return (k == CharClass::kOther || k == CharClass::kSpace) && !IsNewline(c);
}

// End of (?i:'s|'t|'re|'ve|'m|'ll|'d) at s[i], or 0. Case folds as Unicode's simple folding:
// ASCII letters either case, and U+017F (long s, C5 BF) for s.
size_t ContractionEnd(std::string_view s, size_t i) {
  const size_t n = s.size();
  if (i + 1 >= n || s[i] != '\'') return 0;
  const char c1 = static_cast<char>(s[i + 1] | 0x20);
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return i + 2;
  if (i + 2 >= n) return 0;
  if (static_cast<unsigned char>(s[i + 1]) == 0xC5 && static_cast<unsigned char>(s[i + 2]) == 0xBF) return i + 3;
  const char c2 = static_cast<char>(s[i + 2] | 0x20);
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return i + 3;
  return 0;
}

// \p{N}{1,3} from a number at i.
inline size_t NumberEnd(std::string_view s, size_t i) {
  size_t len;
  ClassAt(s, i, &len);
  size_t j = i + len;
  for (int c = 1; c < 3 && j < s.size(); ++c) {
    if (ClassAt(s, j, &len) != CharClass::kNumber) break;
    j += len;
  }
  return j;
}

// ' ?[^\s\p{L}\p{N}]+[\r\n]*' (and '/' in the tail when slash), or 0 when no such piece starts at i.
inline size_t PunctuationEnd(std::string_view s, size_t i, bool slash) {
  const size_t n = s.size();
  size_t start = i;
  if (s[i] == ' ' && i + 1 < n) {
    size_t len;
    if (ClassAt(s, i + 1, &len) == CharClass::kOther) start = i + 1;
  }
  size_t len;
  if (ClassAt(s, start, &len) != CharClass::kOther) return 0;
  size_t j = RunEnd(s, start + len, CharClass::kOther);
  while (j < n && (IsNewline(s[j]) || (slash && s[j] == '/'))) ++j;
  return j;
}

// From a whitespace character at i: \s*[\r\n]+ (up to the run's last newline), else \s+(?!\S)
// (the run giving back its last character when a non-space follows), else \s+.
inline size_t SpaceEnd(std::string_view s, size_t i) {
  const size_t n = s.size();
  size_t j = i, last = i, after_newline = 0;
  while (j < n) {
    size_t len;
    if (ClassAt(s, j, &len) != CharClass::kSpace) break;
    if (IsNewline(s[j])) after_newline = j + 1;
    last = j;
    j += len;
  }
  if (after_newline) return after_newline;
  if (j == n || last == i) return j;
  return last;
}

// o200k's letter pieces from i: [^\r\n\p{L}\p{N}]?U*W+C? then [^\r\n\p{L}\p{N}]?U+W*C?, each
// trying the prefix character first; 0 when neither matches.
size_t O200kLetterEnd(std::string_view s, size_t i) {
  const size_t n = s.size();
  size_t len0;
  const uint8_t b0 = BitsAt(s, i, &len0);
  const bool prefix = IsLetterPrefix(s[i], static_cast<CharClass>(b0 & kClassMask));
  const size_t starts[2] = {i + len0, i};
  const int first = prefix ? 0 : 1;
  auto with_contraction = [&](size_t e) {
    size_t c = ContractionEnd(s, e);
    return c ? c : e;
  };
  // U*W+: U* greedy, giving back until W+ can match.
  for (int k = first; k < 2; ++k) {
    const size_t start = starts[k];
    if (start >= n) continue;
    size_t j = start, after_last_lower = 0, len;
    uint8_t b = 0;
    while (j < n && ((b = BitsAt(s, j, &len)) & kUpperSet)) {
      if (b & kLowerSet) after_last_lower = j + len;
      j += len;
    }
    if (j < n && (b & kLowerSet)) return with_contraction(SetRunEnd(s, j, kLowerSet));
    if (after_last_lower) return with_contraction(after_last_lower);
  }
  // U+W*
  for (int k = first; k < 2; ++k) {
    const size_t start = starts[k];
    if (start >= n) continue;
    const size_t u = SetRunEnd(s, start, kUpperSet);
    if (u > start) return with_contraction(SetRunEnd(s, u, kLowerSet));
  }
  return 0;
}

}  // namespace

std::string_view PatternOf(PreTokenizer r) {
  switch (r) {
    case PreTokenizer::kGpt2:
      return R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
    case PreTokenizer::kCl100k:
      return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
    case PreTokenizer::kO200k:
      return R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  }
  return {};
}

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

size_t NextPieceCl100k(std::string_view s, size_t i) {
  const size_t n = s.size();
  if (size_t e = ContractionEnd(s, i)) return e;
  size_t len0;
  const CharClass k0 = ClassAt(s, i, &len0);
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (k0 == CharClass::kLetter) return RunEnd(s, i + len0, CharClass::kLetter);
  if (IsLetterPrefix(s[i], k0) && i + len0 < n) {
    size_t len1;
    if (ClassAt(s, i + len0, &len1) == CharClass::kLetter) return RunEnd(s, i + len0 + len1, CharClass::kLetter);
  }
  if (k0 == CharClass::kNumber) return NumberEnd(s, i);
  if (size_t e = PunctuationEnd(s, i, /*slash=*/false)) return e;
  return SpaceEnd(s, i);
}

size_t NextPieceO200k(std::string_view s, size_t i) {
  if (size_t e = O200kLetterEnd(s, i)) return e;
  size_t len0;
  const CharClass k0 = ClassAt(s, i, &len0);
  if (k0 == CharClass::kNumber) return NumberEnd(s, i);
  if (size_t e = PunctuationEnd(s, i, /*slash=*/true)) return e;
  return SpaceEnd(s, i);
}

}  // namespace anneal
