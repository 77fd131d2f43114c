// Checksums: XXH64 (libxxhash) for shard and checkpoint files, and as a seeded 64-bit hash.
// Hex form is 16 lowercase digits, the form written in dataset.json and manifests.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace anneal {

uint64_t Xxh64(std::string_view data, uint64_t seed = 0);
std::string HexU64(uint64_t v);

// Incremental XXH64 over several appends; same result as Xxh64 of the concatenation.
class Xxh64Stream {
 public:
  explicit Xxh64Stream(uint64_t seed = 0);
  ~Xxh64Stream();
  Xxh64Stream(const Xxh64Stream&) = delete;
  Xxh64Stream& operator=(const Xxh64Stream&) = delete;
  void Update(std::string_view data);
  uint64_t Digest() const;

 private:
  void* state_;  // XXH64_state_t*
};

}  // namespace anneal
