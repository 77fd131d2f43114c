// Token shards: llm.c's files (docs/formats/shard.md).
//
//   header: 256 little-endian int32: [0] magic, [1] version, [2] token count, [3..255] zero
//   body:   token count tokens, uint16 (magic 20240520, version 1) or uint32 (20240801, version 7)
//
// A shard's size must be exactly 1024 + count * token width; anything else is truncated or corrupt.
// Every document in a shard is preceded by the end-of-text token (llm.c's convention).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/status.h"

namespace anneal {

inline constexpr int32_t kShardMagicU16 = 20240520;
inline constexpr int32_t kShardVersionU16 = 1;
inline constexpr int32_t kShardMagicU32 = 20240801;
inline constexpr int32_t kShardVersionU32 = 7;
inline constexpr size_t kShardHeaderInts = 256;
inline constexpr size_t kShardHeaderBytes = kShardHeaderInts * sizeof(int32_t);

struct ShardHeader {
  uint32_t token_bytes = 2;  // 2 (uint16) or 4 (uint32)
  uint64_t tokens = 0;
};

// Parses and checks a header against the file size. The error names path and the fix.
Result<ShardHeader> ParseShardHeader(const std::string& path, std::string_view header, uint64_t file_size);

// The token width a vocabulary needs: 2 bytes up to 65,536 ids, else 4.
inline uint32_t TokenBytesForVocab(uint32_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

// Serializes tokens into a complete shard image (header + body).
std::string EncodeShard(const std::vector<uint32_t>& tokens, uint32_t token_bytes);

// Writes a shard with write-then-rename: path never holds a partial shard. Returns the XXH64 of the
// whole file as written.
Result<uint64_t> WriteShard(Env& env, const std::string& path, const std::vector<uint32_t>& tokens,
                            uint32_t token_bytes);

// A read-only, memory-mapped shard.
// Byte ranges of a shard kept elsewhere (an object in a store: data/channel.h's fastfile mode).
using RangeFetch = std::function<Status(uint64_t offset, uint64_t n, std::string* out)>;
struct RemoteCache;

class ShardReader {
 public:
  // Maps path and checks its header and size. Does not read the body.
  static Result<std::unique_ptr<ShardReader>> Open(Env& env, const std::string& path);
  // A shard read on demand through fetch: blocks of block_bytes, at most max_blocks cached (least
  // recently used dropped), the block after the one being read fetched ahead in the background,
  // at most max_fetches fetches in flight across all remote shards. Reads the header now.
  static Result<std::unique_ptr<ShardReader>> OpenRemote(const std::string& name, uint64_t size, RangeFetch fetch,
                                                        size_t block_bytes, size_t max_blocks, int max_fetches);
  ~ShardReader();
  bool remote() const { return remote_ != nullptr; }
  // The first failed remote read (the read returned zeros); Ok for a mapped shard.
  Status status() const;
  const std::string& path() const { return path_; }
  uint64_t tokens() const { return header_.tokens; }
  uint32_t token_bytes() const { return header_.token_bytes; }
  // Token i (i < tokens()).
  uint32_t Token(uint64_t i) const {
    if (!map_) {
      uint32_t t = 0;
      Read(i, 1, &t);
      return t;
    }
    const char* p = map_->data() + kShardHeaderBytes;
    return header_.token_bytes == 2 ? reinterpret_cast<const uint16_t*>(p)[i]
                                    : reinterpret_cast<const uint32_t*>(p)[i];
  }
  // Copies tokens [start, start + n) into dst.
  void Read(uint64_t start, size_t n, uint32_t* dst) const;
  // XXH64 of the whole file (reads every byte).
  uint64_t Checksum() const;
  // Largest token id in the shard (reads every byte).
  uint32_t MaxToken() const;

 private:
  std::string path_;
  ShardHeader header_;
  std::unique_ptr<MappedFile> map_;
  std::unique_ptr<RemoteCache> remote_;
};

}  // namespace anneal
