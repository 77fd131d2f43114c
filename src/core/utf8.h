// UTF-8 decoding and validation: the WHATWG decoder's rules (each maximal invalid subpart is one
// error, replaced by U+FFFD), for text anneal does not control — the tokenizer's input
// (data/utf8.h adds its Unicode classes), and label values and names that must be UTF-8 to be read
// at all (Prometheus's exposition format, JSON).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace anneal {

// Decodes one scalar value at s[i]; sets len to its byte length. Returns false (len = length of the
// maximal invalid subpart, at least 1) when the bytes there are not valid UTF-8.
bool DecodeUtf8(std::string_view s, size_t i, uint32_t* cp, size_t* len);

// Offset of the first invalid byte, or npos when s is valid UTF-8.
size_t FindInvalidUtf8(std::string_view s);

// s with every maximal invalid subpart replaced by U+FFFD (EF BF BD).
std::string ReplaceInvalidUtf8(std::string_view s);

}  // namespace anneal
