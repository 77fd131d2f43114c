// GPT-2's pre-tokenizer: splits text into the pieces BPE runs on, exactly as tiktoken's gpt2 regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// does (leftmost-first alternation, greedy runs, the look-ahead giving back one whitespace
// character). Written as a scanner instead of a regex engine: one pass, no allocation.
// Input should be valid UTF-8; an invalid byte is treated as one "other" character.
#pragma once

#include <cstddef>
#include <string_view>

namespace anneal {

// End (exclusive) of the piece that starts at s[i]; i < s.size(). Returns a value > i.
size_t NextPiece(std::string_view s, size_t i);

// Calls fn(piece) for every piece of s in order.
template <typename Fn>
void ForEachPiece(std::string_view s, Fn&& fn) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = NextPiece(s, i);
    fn(s.substr(i, j - i));
    i = j;
  }
}

}  // namespace anneal
