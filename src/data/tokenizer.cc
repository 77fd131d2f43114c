#include "data/tokenizer.h"

#include <xxhash.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "data/byte_level.h"
#include "data/pretokenize.h"

namespace anneal {

namespace {

constexpr uint64_t kEmpty = ~uint64_t{0};
constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();
constexpr size_t kMaxCachedPiece = 64;     // longer pieces are encoded without the cache
constexpr size_t kCacheSlots = 1u << 16;   // cleared when half full

inline uint64_t MixPair(uint64_t key) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdULL;
  key ^= key >> 33;
  return key;
}

// Collects (key, id) pairs of encoder.json with nlohmann's SAX interface (no DOM: ~4x faster).
struct EncoderJsonSax : nlohmann::json_sax<nlohmann::json> {
  std::vector<std::pair<std::string, uint64_t>> entries;
  std::string key_;
  int depth = 0;
  bool bad = false;
  std::string error;
  bool null() override { return Bad(); }
  bool boolean(bool) override { return Bad(); }
  bool number_integer(number_integer_t v) override { return v >= 0 ? Add(static_cast<uint64_t>(v)) : Bad(); }
  bool number_unsigned(number_unsigned_t v) override { return Add(v); }
  bool number_float(number_float_t, const string_t&) override { return Bad(); }
  bool string(string_t&) override { return Bad(); }
  bool binary(binary_t&) override { return Bad(); }
  bool start_object(std::size_t) override { return ++depth == 1 || Bad(); }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool end_object() override {
    --depth;
    return true;
  }
  bool start_array(std::size_t) override { return Bad(); }
  bool end_array() override { return Bad(); }
  bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception& e) override {
    error = "byte " + std::to_string(pos) + ": " + e.what();
    return false;
  }
  bool Add(uint64_t v) {
    if (depth != 1) return Bad();
    entries.emplace_back(std::move(key_), v);
    return true;
  }
  bool Bad() {
    bad = true;
    return false;
  }
};
}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromEncoderJson(std::string_view json, std::string name) {
  EncoderJsonSax sax;
  bool parsed = nlohmann::json::sax_parse(json, &sax);
  if (!parsed || sax.bad || sax.entries.empty()) {
    return InvalidInput("tokenizer '" + name + "': encoder.json is not a JSON object of token -> id" +
                        (sax.error.empty() ? "" : " (" + sax.error + ")"));
  }
  const size_t n = sax.entries.size();
  std::vector<std::string> token_bytes(n);
  std::vector<bool> seen(n, false);
  std::vector<std::pair<std::string, uint32_t>> specials;
  for (auto& [k, v] : sax.entries) {
    if (v >= n) {
      return InvalidInput("tokenizer '" + name + "': id of '" + k + "' is not in [0, " + std::to_string(n) + ")");
    }
    uint32_t id = static_cast<uint32_t>(v);
    if (seen[id]) return InvalidInput("tokenizer '" + name + "': id " + std::to_string(id) + " used twice");
    seen[id] = true;
    if (k == "<|endoftext|>") {
      specials.emplace_back(k, id);
      continue;
    }
    if (!ByteLevelBytes(k, &token_bytes[id])) {
      return InvalidInput("tokenizer '" + name + "': token '" + k + "' is not byte-level BPE text");
    }
  }
  if (specials.empty()) return InvalidInput("tokenizer '" + name + "': encoder.json has no <|endoftext|>");
  return Build(std::move(name), PreTokenizer::kGpt2, std::move(token_bytes), specials, "<|endoftext|>",
               "<|endoftext|>");
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::Build(std::string name, PreTokenizer rule,
                                                    std::vector<std::string> token_bytes,
                                                    const std::vector<std::pair<std::string, uint32_t>>& specials,
                                                    const std::string& bos, const std::string& eos) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  t->name_ = std::move(name);
  t->rule_ = rule;
  auto bad = [&](const std::string& what) { return InvalidInput("tokenizer '" + t->name_ + "': " + what); };
  size_t n = token_bytes.size();
  for (const auto& [text, id] : specials) n = std::max<size_t>(n, size_t{id} + 1);
  token_bytes.resize(n);
  t->is_special_.assign(n, false);
  bool have_bos = false, have_eos = false;
  for (const auto& [text, id] : specials) {
    if (!token_bytes[id].empty() || t->is_special_[id]) {
      return bad("special token " + text + " has id " + std::to_string(id) + ", which another token has");
    }
    token_bytes[id] = text;
    t->is_special_[id] = true;
    if (text == bos) t->bos_ = id, have_bos = true;
    if (text == eos) t->eos_ = id, have_eos = true;
  }
  if (!have_bos || !have_eos) return bad("no " + (have_bos ? eos : bos) + " special token");
  t->token_bytes_ = std::move(token_bytes);
  size_t cap = 1;
  while (cap < n * 4) cap <<= 1;
  t->id_slots_.assign(cap, 0);
  t->id_mask_ = cap - 1;
  for (uint32_t id = 0; id < n; ++id) {
    if (t->is_special_[id] || t->token_bytes_[id].empty()) continue;
    if (t->Lookup(t->token_bytes_[id]) != kNoToken) {
      return bad("two tokens have the same bytes (id " + std::to_string(id) + ")");
    }
    t->Insert(id);
  }
  for (int b = 0; b < 256; ++b) {
    char c = static_cast<char>(b);
    uint32_t id = t->Lookup(std::string_view(&c, 1));
    if (id == kNoToken) return bad("byte " + std::to_string(b) + " has no token");
    t->byte_id_[b] = id;
  }
  // Every split of every token into two tokens is a pair that merges into it.
  std::vector<std::pair<uint64_t, uint32_t>> pairs;
  pairs.reserve(n * 4);
  for (uint32_t id = 0; id < n; ++id) {
    if (t->is_special_[id]) continue;
    std::string_view bytes = t->token_bytes_[id];
    for (size_t k = 1; k < bytes.size(); ++k) {
      uint32_t l = t->Lookup(bytes.substr(0, k));
      if (l == kNoToken) continue;
      uint32_t r = t->Lookup(bytes.substr(k));
      if (r == kNoToken) continue;
      pairs.emplace_back((uint64_t{l} << 32) | r, id);
    }
  }
  cap = 1;
  while (cap < pairs.size() * 2) cap <<= 1;  // load factor <= 1/2
  t->pair_keys_.assign(cap, kEmpty);
  t->pair_vals_.assign(cap, 0);
  t->pair_mask_ = cap - 1;
  for (const auto& [key, id] : pairs) t->AddPair(static_cast<uint32_t>(key >> 32), static_cast<uint32_t>(key), id);
  return t;
}

std::vector<std::pair<std::string, uint32_t>> Tokenizer::SpecialTokens() const {
  std::vector<std::pair<std::string, uint32_t>> out;
  for (uint32_t id = 0; id < is_special_.size(); ++id) {
    if (is_special_[id]) out.emplace_back(token_bytes_[id], id);
  }
  return out;
}

// A slot holds (the high 32 bits of the key's hash) << 32 | (id + 1); 0 is empty. The hash bits
// spare most probes the comparison of bytes (a cache miss into token_bytes_).
uint32_t Tokenizer::Lookup(std::string_view b) const {
  const uint64_t hash = XXH3_64bits(b.data(), b.size());
  const uint64_t tag = hash >> 32;
  for (uint64_t h = hash & id_mask_;; h = (h + 1) & id_mask_) {
    const uint64_t v = id_slots_[h];
    if (v == 0) return kNoToken;
    const uint32_t id = static_cast<uint32_t>(v) - 1;
    if ((v >> 32) == tag && token_bytes_[id] == b) return id;
  }
}

void Tokenizer::Insert(uint32_t id) {
  const std::string& b = token_bytes_[id];
  const uint64_t hash = XXH3_64bits(b.data(), b.size());
  uint64_t h = hash & id_mask_;
  while (id_slots_[h] != 0) h = (h + 1) & id_mask_;
  id_slots_[h] = ((hash >> 32) << 32) | (uint64_t{id} + 1);
}

void Tokenizer::AddPair(uint32_t a, uint32_t b, uint32_t merged) {
  uint64_t key = (uint64_t{a} << 32) | b;
  for (uint64_t h = MixPair(key) & pair_mask_;; h = (h + 1) & pair_mask_) {
    if (pair_keys_[h] == kEmpty || pair_keys_[h] == key) {
      pair_keys_[h] = key;
      pair_vals_[h] = merged;
      return;
    }
  }
}

inline uint32_t Tokenizer::PairRank(uint32_t a, uint32_t b) const {
  uint64_t key = (uint64_t{a} << 32) | b;
  for (uint64_t h = MixPair(key) & pair_mask_;; h = (h + 1) & pair_mask_) {
    if (pair_keys_[h] == key) return pair_vals_[h];
    if (pair_keys_[h] == kEmpty) return kNoRank;
  }
}

std::string_view Tokenizer::TokenBytes(uint32_t id) const {
  if (id >= token_bytes_.size()) return {};
  return token_bytes_[id];
}

std::string Tokenizer::Decode(const std::vector<uint32_t>& ids) const {
  std::string out;
  for (uint32_t id : ids) out.append(TokenBytes(id));
  return out;
}

std::unique_ptr<Encoder> Tokenizer::NewEncoder() const { return std::make_unique<Encoder>(*this); }

void Tokenizer::EncodePiece(std::string_view piece, std::vector<uint32_t>* out) const {
  if (piece.size() == 1) {
    out->push_back(byte_id_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (uint32_t whole = Lookup(piece); whole != kNoToken) {
    out->push_back(whole);
    return;
  }
  // parts[k] is a token; rank[k] the id its merge with parts[k+1] would make (kNoRank if none).
  const size_t base = out->size();
  std::vector<uint32_t>& parts = *out;
  for (char c : piece) parts.push_back(byte_id_[static_cast<unsigned char>(c)]);
  size_t n = piece.size();
  uint32_t stack_ranks[128];
  std::vector<uint32_t> heap_ranks;
  uint32_t* rank = stack_ranks;
  if (n > 128) {
    heap_ranks.resize(n);
    rank = heap_ranks.data();
  }
  uint32_t* p = parts.data() + base;
  for (size_t k = 0; k + 1 < n; ++k) rank[k] = PairRank(p[k], p[k + 1]);
  while (n > 1) {
    uint32_t best = kNoRank;
    size_t bi = 0;
    for (size_t k = 0; k + 1 < n; ++k) {
      if (rank[k] < best) {
        best = rank[k];
        bi = k;
      }
    }
    if (best == kNoRank) break;
    p[bi] = best;
    for (size_t k = bi + 1; k + 1 < n; ++k) {
      p[k] = p[k + 1];
      rank[k] = rank[k + 1];
    }
    --n;
    if (bi + 1 < n) rank[bi] = PairRank(p[bi], p[bi + 1]);
    if (bi > 0) rank[bi - 1] = PairRank(p[bi - 1], p[bi]);
    rank[n - 1] = kNoRank;
  }
  parts.resize(base + n);
}

Encoder::Encoder(const Tokenizer& tok) : tok_(tok) { Reset(); }

void Encoder::Reset() {
  slots_.assign(kCacheSlots, Slot{0, 0, 0, 0, 0});
  key_arena_.clear();
  ids_arena_.clear();
  // Sized for a full cache of typical pieces (~8 bytes, ~2 ids), so the arenas rarely regrow.
  key_arena_.reserve(kCacheSlots / 2 * 8);
  ids_arena_.reserve(kCacheSlots / 2 * 2);
  used_ = 0;
}

void Encoder::Encode(std::string_view text, std::vector<uint32_t>* out) {
  WithPreTokenizer(tok_.rule(), [&](auto rule) { EncodeWith<decltype(rule)::value>(text, out); });
}

template <PreTokenizer R>
void Encoder::EncodeWith(std::string_view text, std::vector<uint32_t>* out) {
  const uint64_t mask = slots_.size() - 1;
  ForEachPiece<R>(text, [&](std::string_view piece) {
    if (piece.size() == 1) {
      tok_.EncodePiece(piece, out);
      return;
    }
    if (piece.size() > kMaxCachedPiece) {
      tok_.EncodePiece(piece, out);
      return;
    }
    const uint64_t h = XXH3_64bits(piece.data(), piece.size());
    uint64_t s = h & mask;
    for (;; s = (s + 1) & mask) {
      const Slot& slot = slots_[s];
      if (slot.key_len == 0) break;
      if (slot.hash == h && slot.key_len == piece.size() &&
          std::string_view(key_arena_.data() + slot.key_off, slot.key_len) == piece) {
        out->insert(out->end(), ids_arena_.begin() + slot.ids_off,
                    ids_arena_.begin() + slot.ids_off + slot.ids_len);
        return;
      }
    }
    const size_t before = out->size();
    tok_.EncodePiece(piece, out);
    if (used_ * 2 >= slots_.size()) {  // full: start over (keeps memory bounded)
      Reset();
      s = h & mask;
      while (slots_[s].key_len != 0) s = (s + 1) & mask;
    }
    Slot& slot = slots_[s];
    slot.hash = h;
    slot.key_off = static_cast<uint32_t>(key_arena_.size());
    slot.key_len = static_cast<uint16_t>(piece.size());
    slot.ids_off = static_cast<uint32_t>(ids_arena_.size());
    slot.ids_len = static_cast<uint16_t>(out->size() - before);
    key_arena_.append(piece);
    ids_arena_.insert(ids_arena_.end(), out->begin() + before, out->end());
    ++used_;
  });
}

}  // namespace anneal
