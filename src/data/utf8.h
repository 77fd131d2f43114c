// UTF-8 decoding and the Unicode classes the pre-tokenizers' regexes use.
//
// Invalid UTF-8 policy (docs/formats/tokenizer.md): anneal rejects invalid input by default, naming
// the byte offset; with replacement on, each maximal invalid subpart becomes U+FFFD, exactly as the
// WHATWG decoder (Node's TextDecoder, what tiktoken in JavaScript sees) does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/utf8.h"  // DecodeUtf8, FindInvalidUtf8, ReplaceInvalidUtf8

namespace anneal {

enum class CharClass : uint8_t { kOther = 0, kLetter = 1, kNumber = 2, kSpace = 3 };

// \p{L} -> kLetter, \p{N} -> kNumber, White_Space -> kSpace, everything else kOther.
CharClass ClassOf(uint32_t cp);

// The letter-case sets of o200k_base's regex, as bits beside the class (ClassBitsOf):
// kUpperSet = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], kLowerSet = [\p{Ll}\p{Lm}\p{Lo}\p{M}] (marks are
// in both sets but their class is kOther: \p{M} is not \p{L}).
inline constexpr uint8_t kClassMask = 3, kUpperSet = 4, kLowerSet = 8;
// The CharClass of cp (bits & kClassMask) with its case-set bits.
uint8_t ClassBitsOf(uint32_t cp);


}  // namespace anneal
