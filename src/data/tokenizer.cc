#include "data/tokenizer.h"

#include <xxhash.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "core/env.h"
#include "data/pretokenize.h"
#include "data/utf8.h"

// The embedded GPT-2 encoder.json (see data/gpt2_vocab_blob.S; path set by CMake).
extern "C" const char anneal_gpt2_encoder_json[];
extern "C" const char anneal_gpt2_encoder_json_end[];

namespace anneal {

namespace {

constexpr uint64_t kEmpty = ~uint64_t{0};
constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();
constexpr size_t kMaxCachedPiece = 64;     // longer pieces are encoded without the cache
constexpr size_t kCacheSlots = 1u << 16;   // cleared when half full

// GPT-2's byte <-> printable-unicode map (bytes_to_unicode in OpenAI's encoder.py).
void ByteUnicodeMaps(uint32_t byte_to_cp[256]) {
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    byte_to_cp[b] = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + n++);
  }
}

inline uint64_t MixPair(uint64_t key) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdULL;
  key ^= key >> 33;
  return key;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& name) {
  if (name == "gpt2") {
    std::string_view blob(anneal_gpt2_encoder_json,
                          static_cast<size_t>(anneal_gpt2_encoder_json_end - anneal_gpt2_encoder_json));
    return FromEncoderJson(blob, "gpt2");
  }
  std::string path = JoinPath(name, "encoder.json");
  auto text = Env::Default().ReadFile(path);
  if (!text.ok()) {
    return InvalidInput("unknown tokenizer '" + name +
                        "': use 'gpt2', or a directory holding OpenAI's encoder.json (" +
                        text.status().message() + ")");
  }
  return FromEncoderJson(*text, name);
}

namespace {
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
  uint32_t byte_to_cp[256];
  ByteUnicodeMaps(byte_to_cp);
  int16_t cp_to_byte[512];
  for (auto& c : cp_to_byte) c = -1;
  for (int b = 0; b < 256; ++b) cp_to_byte[byte_to_cp[b]] = static_cast<int16_t>(b);

  std::unique_ptr<Tokenizer> t(new Tokenizer());
  t->name_ = std::move(name);
  const size_t n = sax.entries.size();
  t->token_bytes_.resize(n);
  std::vector<bool> seen(n, false);
  bool have_eot = false;
  for (auto& [k, v] : sax.entries) {
    if (v >= n) {
      return InvalidInput("tokenizer '" + t->name_ + "': id of '" + k + "' is not in [0, " + std::to_string(n) + ")");
    }
    uint32_t id = static_cast<uint32_t>(v);
    if (seen[id]) return InvalidInput("tokenizer '" + t->name_ + "': id " + std::to_string(id) + " used twice");
    seen[id] = true;
    if (k == "<|endoftext|>") {
      t->eot_ = id;
      have_eot = true;
      t->token_bytes_[id] = k;
      continue;
    }
    std::string bytes;
    bytes.reserve(k.size());
    for (size_t i = 0; i < k.size();) {
      uint32_t cp;
      size_t len;
      if (!DecodeUtf8(k, i, &cp, &len) || cp >= 512 || cp_to_byte[cp] < 0) {
        return InvalidInput("tokenizer '" + t->name_ + "': token '" + k + "' is not byte-level BPE text");
      }
      bytes.push_back(static_cast<char>(cp_to_byte[cp]));
      i += len;
    }
    t->token_bytes_[id] = std::move(bytes);
  }
  if (!have_eot) return InvalidInput("tokenizer '" + t->name_ + "': encoder.json has no <|endoftext|>");
  size_t cap = 1;
  while (cap < n * 4) cap <<= 1;
  t->id_slots_.assign(cap, 0);
  t->id_mask_ = cap - 1;
  for (uint32_t id = 0; id < n; ++id) {
    if (id == t->eot_) continue;
    if (t->Lookup(t->token_bytes_[id]) != kNoToken) {
      return InvalidInput("tokenizer '" + t->name_ + "': two tokens have the same bytes (id " + std::to_string(id) + ")");
    }
    t->Insert(id);
  }
  for (int b = 0; b < 256; ++b) {
    char c = static_cast<char>(b);
    uint32_t id = t->Lookup(std::string_view(&c, 1));
    if (id == kNoToken) return InvalidInput("tokenizer '" + t->name_ + "': byte " + std::to_string(b) + " has no token");
    t->byte_id_[b] = id;
  }
  // Every split of every token into two tokens is a pair that merges into it.
  std::vector<std::pair<uint64_t, uint32_t>> pairs;
  pairs.reserve(n * 4);
  for (uint32_t id = 0; id < n; ++id) {
    if (id == t->eot_) continue;
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

uint32_t Tokenizer::Lookup(std::string_view b) const {
  for (uint64_t h = XXH3_64bits(b.data(), b.size()) & id_mask_;; h = (h + 1) & id_mask_) {
    uint32_t v = id_slots_[h];
    if (v == 0) return kNoToken;
    if (token_bytes_[v - 1] == b) return v - 1;
  }
}

void Tokenizer::Insert(uint32_t id) {
  const std::string& b = token_bytes_[id];
  uint64_t h = XXH3_64bits(b.data(), b.size()) & id_mask_;
  while (id_slots_[h] != 0) h = (h + 1) & id_mask_;
  id_slots_[h] = id + 1;
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
  const uint64_t mask = slots_.size() - 1;
  ForEachPiece(text, [&](std::string_view piece) {
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
