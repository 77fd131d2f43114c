#include "core/checksum.h"

#include <xxhash.h>

#include <cstdio>

namespace anneal {

uint64_t Xxh64(std::string_view data, uint64_t seed) { return XXH64(data.data(), data.size(), seed); }

std::string HexU64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

Xxh64Stream::Xxh64Stream(uint64_t seed) : state_(XXH64_createState()) {
  XXH64_reset(static_cast<XXH64_state_t*>(state_), seed);
}
Xxh64Stream::~Xxh64Stream() { XXH64_freeState(static_cast<XXH64_state_t*>(state_)); }
void Xxh64Stream::Update(std::string_view data) {
  XXH64_update(static_cast<XXH64_state_t*>(state_), data.data(), data.size());
}
uint64_t Xxh64Stream::Digest() const { return XXH64_digest(static_cast<const XXH64_state_t*>(state_)); }

}  // namespace anneal
