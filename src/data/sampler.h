// The global sample order a training run sees, independent of how many ranks read it.
//
// Samples are numbered 0..n-1 (data/loader.h says what a sample is). The stream position p (p = 0,
// 1, 2, ... over the whole run) maps to sample Permutation(n, key(seed, epoch))(p mod n) with epoch
// = p / n: a fresh shuffle every epoch, computed in O(1) per position with no table, so the order is
// a pure function of (n, seed, p). Ranks partition positions (loader.h), which gives elastic
// determinism: any number of ranks, with the matching number of micro-steps, reads the same samples.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace anneal {

// A keyed pseudo-random bijection of [0, n): a 4-round Feistel network over the smallest even-bit
// power-of-two domain >= n, cycle-walking until the value falls below n (expected < 4 steps).
class Permutation {
 public:
  Permutation(uint64_t n, uint64_t key);
  uint64_t operator()(uint64_t i) const;
  uint64_t size() const { return n_; }

 private:
  uint64_t Encrypt(uint64_t x) const;
  uint64_t n_, key_;
  unsigned half_bits_;
  uint64_t half_mask_;
};

class SampleStream {
 public:
  SampleStream(uint64_t num_samples, uint64_t seed, bool shuffle);
  // The sample at stream position p.
  uint64_t At(uint64_t p) const;
  uint64_t num_samples() const { return n_; }

 private:
  uint64_t n_, seed_;
  bool shuffle_;
};

// Where a reader is in the stream: the number of samples consumed by all ranks together. Saved in
// checkpoints; a run resumed at any data-parallel size continues with exactly the next sample.
struct LoaderPosition {
  uint64_t seed = 0;
  uint64_t samples = 0;
  std::string ToJson() const;
  static Result<LoaderPosition> FromJson(const std::string& text);
};

}  // namespace anneal
