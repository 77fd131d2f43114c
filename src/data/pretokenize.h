// The pre-tokenizers: split text into the pieces BPE runs on, exactly as tiktoken's regexes do
// (leftmost-first alternation, greedy runs with backtracking where the regex has it). Written as
// scanners instead of a regex engine: one pass, no allocation. Input should be valid UTF-8; an
// invalid byte is treated as one "other" character.
//
// kGpt2 (gpt2):
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// kCl100k (cl100k_base, and Llama 3, whose pattern is the same):
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//   \s*[\r\n]+|\s+(?!\S)|\s+
// kO200k (o200k_base), with U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], W = [\p{Ll}\p{Lm}\p{Lo}\p{M}] and
// C = (?i:'s|'t|'re|'ve|'m|'ll|'d):
//   [^\r\n\p{L}\p{N}]?U*W+C?|[^\r\n\p{L}\p{N}]?U+W*C?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|
//   \s*[\r\n]+|\s+(?!\S)|\s+
// (?i:...) folds case as Unicode does: 'ſ (U+017F) is a contraction like 's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace anneal {

enum class PreTokenizer : uint8_t { kGpt2, kCl100k, kO200k };

// The regex each scanner implements, as tiktoken's rank files and tokenizer.json write it.
std::string_view PatternOf(PreTokenizer r);

// End (exclusive) of the piece that starts at s[i]; i < s.size(). Returns a value > i.
size_t NextPiece(std::string_view s, size_t i);  // kGpt2
size_t NextPieceCl100k(std::string_view s, size_t i);
size_t NextPieceO200k(std::string_view s, size_t i);

template <PreTokenizer R>
inline size_t NextPieceOf(std::string_view s, size_t i) {
  if constexpr (R == PreTokenizer::kGpt2) return NextPiece(s, i);
  if constexpr (R == PreTokenizer::kCl100k) return NextPieceCl100k(s, i);
  if constexpr (R == PreTokenizer::kO200k) return NextPieceO200k(s, i);
}

// Calls fn(piece) for every piece of s in order.
template <PreTokenizer R = PreTokenizer::kGpt2, typename Fn>
void ForEachPiece(std::string_view s, Fn&& fn) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = NextPieceOf<R>(s, i);
    fn(s.substr(i, j - i));
    i = j;
  }
}

// Calls f(std::integral_constant<PreTokenizer, R>{}) for the run-time rule r = R: code templated
// on the rule gets one instance per pre-tokenizer, chosen once per call.
template <typename F>
decltype(auto) WithPreTokenizer(PreTokenizer r, F&& f) {
  switch (r) {
    case PreTokenizer::kCl100k:
      return f(std::integral_constant<PreTokenizer, PreTokenizer::kCl100k>{});
    case PreTokenizer::kO200k:
      return f(std::integral_constant<PreTokenizer, PreTokenizer::kO200k>{});
    case PreTokenizer::kGpt2:
      break;
  }
  return f(std::integral_constant<PreTokenizer, PreTokenizer::kGpt2>{});
}

}  // namespace anneal
