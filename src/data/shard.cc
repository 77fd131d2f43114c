#include "data/shard.h"

#include <algorithm>
#include <cstring>

#include "core/checksum.h"

namespace anneal {

Result<ShardHeader> ParseShardHeader(const std::string& path, std::string_view header, uint64_t file_size) {
  if (header.size() < kShardHeaderBytes || file_size < kShardHeaderBytes) {
    return InvalidInput("shard " + path + " is " + std::to_string(file_size) +
                        " bytes, shorter than its 1024-byte header: it is truncated or not a token "
                        "shard; re-create it with anneal prep");
  }
  int32_t h[3];
  std::memcpy(h, header.data(), sizeof(h));
  ShardHeader out;
  if (h[0] == kShardMagicU16 && h[1] == kShardVersionU16) {
    out.token_bytes = 2;
  } else if (h[0] == kShardMagicU32 && h[1] == kShardVersionU32) {
    out.token_bytes = 4;
  } else {
    return InvalidInput("shard " + path + " has magic " + std::to_string(h[0]) + " version " +
                        std::to_string(h[1]) + "; expected 20240520/1 (uint16) or 20240801/7 (uint32): "
                        "it is corrupt or not an llm.c token shard; re-create it with anneal prep");
  }
  if (h[2] < 0) return InvalidInput("shard " + path + " has a negative token count: it is corrupt; re-create it");
  out.tokens = static_cast<uint64_t>(h[2]);
  uint64_t want = kShardHeaderBytes + out.tokens * out.token_bytes;
  if (file_size != want) {
    return InvalidInput("shard " + path + " is " + std::to_string(file_size) + " bytes but its header says " +
                        std::to_string(out.tokens) + " tokens (" + std::to_string(want) +
                        " bytes): it is " + (file_size < want ? "truncated" : "corrupt") +
                        "; re-run anneal prep (it rewrites only missing or damaged shards)");
  }
  return out;
}

std::string EncodeShard(const std::vector<uint32_t>& tokens, uint32_t token_bytes) {
  std::string out(kShardHeaderBytes + tokens.size() * token_bytes, '\0');
  int32_t h[3] = {token_bytes == 2 ? kShardMagicU16 : kShardMagicU32,
                  token_bytes == 2 ? kShardVersionU16 : kShardVersionU32, static_cast<int32_t>(tokens.size())};
  std::memcpy(out.data(), h, sizeof(h));
  char* body = out.data() + kShardHeaderBytes;
  if (token_bytes == 2) {
    auto* p = reinterpret_cast<uint16_t*>(body);
    for (size_t i = 0; i < tokens.size(); ++i) p[i] = static_cast<uint16_t>(tokens[i]);
  } else {
    std::memcpy(body, tokens.data(), tokens.size() * 4);
  }
  return out;
}

Result<uint64_t> WriteShard(Env& env, const std::string& path, const std::vector<uint32_t>& tokens,
                            uint32_t token_bytes) {
  if (tokens.size() > static_cast<size_t>(INT32_MAX)) {
    return InvalidInput("shard " + path + " would hold " + std::to_string(tokens.size()) +
                        " tokens, over the format's 2^31-1; use smaller --shard-mb");
  }
  std::string image = EncodeShard(tokens, token_bytes);
  uint64_t sum = Xxh64(image);
  ANNEAL_RETURN_IF_ERROR(env.WriteFileAtomic(path, image));
  return sum;
}

Result<std::unique_ptr<ShardReader>> ShardReader::Open(Env& env, const std::string& path) {
  ANNEAL_ASSIGN_OR_RETURN(auto map, env.Map(path, Env::MapMode::kLazy));
  std::string_view all(map->data(), map->size());
  ANNEAL_ASSIGN_OR_RETURN(ShardHeader h, ParseShardHeader(path, all.substr(0, kShardHeaderBytes), map->size()));
  auto r = std::unique_ptr<ShardReader>(new ShardReader());
  r->path_ = path;
  r->header_ = h;
  r->map_ = std::move(map);
  return r;
}

void ShardReader::Read(uint64_t start, size_t n, uint32_t* dst) const {
  const char* p = map_->data() + kShardHeaderBytes;
  if (header_.token_bytes == 2) {
    const auto* s = reinterpret_cast<const uint16_t*>(p) + start;
    for (size_t i = 0; i < n; ++i) dst[i] = s[i];
  } else {
    std::memcpy(dst, reinterpret_cast<const uint32_t*>(p) + start, n * 4);
  }
}

uint64_t ShardReader::Checksum() const { return Xxh64(std::string_view(map_->data(), map_->size())); }

uint32_t ShardReader::MaxToken() const {
  uint32_t m = 0;
  for (uint64_t i = 0; i < header_.tokens; ++i) m = std::max(m, Token(i));
  return m;
}

}  // namespace anneal
