#include "data/sampler.h"

#include <xxhash.h>

#include <nlohmann/json.hpp>

namespace anneal {

namespace {
uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t v[2] = {a, b};
  return XXH3_64bits(v, sizeof(v));
}
}  // namespace

Permutation::Permutation(uint64_t n, uint64_t key) : n_(n), key_(key) {
  unsigned bits = 2;
  while (bits < 64 && (uint64_t{1} << bits) < n) bits += 2;
  half_bits_ = bits / 2;
  half_mask_ = (uint64_t{1} << half_bits_) - 1;
}

uint64_t Permutation::Encrypt(uint64_t x) const {
  uint64_t l = x >> half_bits_, r = x & half_mask_;
  for (uint64_t round = 0; round < 4; ++round) {
    uint64_t f = Mix(key_ + round, r) & half_mask_;
    uint64_t nl = r;
    r = l ^ f;
    l = nl;
  }
  return (l << half_bits_) | r;
}

uint64_t Permutation::operator()(uint64_t i) const {
  uint64_t x = Encrypt(i);
  while (x >= n_) x = Encrypt(x);  // cycle walking stays inside [0, n): a bijection
  return x;
}

SampleStream::SampleStream(uint64_t num_samples, uint64_t seed, bool shuffle)
    : n_(num_samples), seed_(seed), shuffle_(shuffle) {}

uint64_t SampleStream::At(uint64_t p) const {
  uint64_t epoch = p / n_, i = p % n_;
  if (!shuffle_) return i;
  return Permutation(n_, Mix(seed_, epoch))(i);
}

std::string LoaderPosition::ToJson() const {
  return nlohmann::json{{"seed", seed}, {"samples", samples}}.dump();
}

Result<LoaderPosition> LoaderPosition::FromJson(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("seed") || !j.contains("samples") || !j["seed"].is_number_unsigned() ||
      !j["samples"].is_number_unsigned()) {
    return InvalidInput("loader position " + text + " is not {\"seed\": N, \"samples\": N}");
  }
  return LoaderPosition{j["seed"].get<uint64_t>(), j["samples"].get<uint64_t>()};
}

}  // namespace anneal
