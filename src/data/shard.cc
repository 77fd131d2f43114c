#include <condition_variable>
#include <future>
#include <list>
#include <map>
#include <mutex>
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

// The block cache of a remote shard.
struct RemoteCache {
  RangeFetch fetch;
  uint64_t size = 0;
  size_t block = 0, max_blocks = 0;
  std::mutex mu;
  std::map<uint64_t, std::shared_future<std::shared_ptr<std::string>>> blocks;  // cached or in flight
  std::list<uint64_t> lru;  // most recently used first
  Status first_error;

  // At most `cap` fetches at once across every remote shard (the cap on open objects).
  static std::mutex& LimitMu() {
    static std::mutex m;
    return m;
  }
  static std::condition_variable& LimitCv() {
    static std::condition_variable cv;
    return cv;
  }
  static int& InFlight() {
    static int n = 0;
    return n;
  }
  int cap = 8;

  std::shared_future<std::shared_ptr<std::string>> Block(uint64_t b) {
    std::lock_guard<std::mutex> l(mu);
    auto it = blocks.find(b);
    if (it != blocks.end()) {
      lru.remove(b);
      lru.push_front(b);
      return it->second;
    }
    const uint64_t off = b * block, n = std::min<uint64_t>(block, size - off);
    auto f = std::async(std::launch::async, [this, off, n]() {
      {
        std::unique_lock<std::mutex> lk(LimitMu());
        LimitCv().wait(lk, [&] { return InFlight() < cap; });
        ++InFlight();
      }
      auto out = std::make_shared<std::string>();
      Status s = fetch(off, n, out.get());
      {
        std::lock_guard<std::mutex> lk(LimitMu());
        --InFlight();
      }
      LimitCv().notify_all();
      if (!s.ok() || out->size() != n) {
        std::lock_guard<std::mutex> el(mu);
        if (first_error.ok()) first_error = s.ok() ? PeerError("short read of a shard block") : s;
        out->assign(n, '\0');
      }
      return out;
    }).share();
    blocks[b] = f;
    lru.push_front(b);
    while (lru.size() > max_blocks) {
      blocks.erase(lru.back());  // holders of its future keep the data alive
      lru.pop_back();
    }
    return f;
  }

  void ReadBytes(uint64_t off, uint64_t n, char* dst) {
    while (n > 0) {
      const uint64_t b = off / block, in = off - b * block, take = std::min<uint64_t>(n, block - in);
      auto f = Block(b);
      if ((b + 1) * block < size) (void)Block(b + 1);  // read ahead
      const std::shared_ptr<std::string>& data = f.get();
      std::memcpy(dst, data->data() + in, take);
      dst += take;
      off += take;
      n -= take;
    }
  }

  ~RemoteCache() {
    for (auto& [b, f] : blocks) f.wait();
  }
};

ShardReader::~ShardReader() = default;

Status ShardReader::status() const {
  if (!remote_) return Status::Ok();
  std::lock_guard<std::mutex> l(remote_->mu);
  return remote_->first_error;
}

Result<std::unique_ptr<ShardReader>> ShardReader::OpenRemote(const std::string& name, uint64_t size, RangeFetch fetch,
                                                             size_t block_bytes, size_t max_blocks, int max_fetches) {
  std::string header;
  ANNEAL_RETURN_IF_ERROR(fetch(0, std::min<uint64_t>(size, kShardHeaderBytes), &header));
  ANNEAL_ASSIGN_OR_RETURN(ShardHeader h, ParseShardHeader(name, header, size));
  auto r = std::unique_ptr<ShardReader>(new ShardReader());
  r->path_ = name;
  r->header_ = h;
  r->remote_ = std::make_unique<RemoteCache>();
  r->remote_->fetch = std::move(fetch);
  r->remote_->size = size;
  r->remote_->block = std::max<size_t>(block_bytes, 4096);
  r->remote_->max_blocks = std::max<size_t>(max_blocks, 2);
  r->remote_->cap = std::max(1, max_fetches);
  return r;
}

void ShardReader::Read(uint64_t start, size_t n, uint32_t* dst) const {
  if (remote_) {
    const uint64_t tb = header_.token_bytes;
    std::string bytes(n * tb, '\0');
    remote_->ReadBytes(kShardHeaderBytes + start * tb, n * tb, bytes.data());
    if (tb == 2) {
      const auto* s = reinterpret_cast<const uint16_t*>(bytes.data());
      for (size_t i = 0; i < n; ++i) dst[i] = s[i];
    } else {
      std::memcpy(dst, bytes.data(), n * 4);
    }
    return;
  }
  const char* p = map_->data() + kShardHeaderBytes;
  if (header_.token_bytes == 2) {
    const auto* s = reinterpret_cast<const uint16_t*>(p) + start;
    for (size_t i = 0; i < n; ++i) dst[i] = s[i];
  } else {
    std::memcpy(dst, reinterpret_cast<const uint32_t*>(p) + start, n * 4);
  }
}

uint64_t ShardReader::Checksum() const {
  if (remote_) {  // every byte, through the cache
    std::string all(remote_->size, '\0');
    remote_->ReadBytes(0, remote_->size, all.data());
    return Xxh64(all);
  }
  return Xxh64(std::string_view(map_->data(), map_->size()));
}

uint32_t ShardReader::MaxToken() const {
  uint32_t m = 0;
  for (uint64_t i = 0; i < header_.tokens; ++i) m = std::max(m, Token(i));
  return m;
}

}  // namespace anneal
