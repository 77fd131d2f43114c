// Text generation with a KV cache: each new token runs the model's own layers on one position
// (DecoderModel::DecodeStep), reading the keys and values of earlier positions from the cache
// (L, maxT, C) instead of recomputing them.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/status.h"
#include "model/decoder.h"
#include "tensor/device_array.h"

namespace anneal {

struct SampleOptions {
  int max_tokens = 64;
  float temperature = 1.0f;  // 0 = greedy
  int top_k = 0;             // 0 = all
  uint64_t seed = 0;
};

class KvGenerator {
 public:
  // capacity: the positions the cache holds (prompt + new tokens; 0 = the model's max_seq_len).
  explicit KvGenerator(DecoderModel& model, int capacity = 0);
  // Feeds the prompt, then samples up to max_tokens more (stopping at max_seq_len or at stop_token
  // when >= 0). on_token sees each new id as it is made. Errors: empty or too long prompt (exit 2).
  Result<std::vector<uint32_t>> Generate(const std::vector<uint32_t>& prompt, const SampleOptions& o, int64_t stop_token,
                                         const std::function<void(uint32_t)>& on_token);
  // Logits (Vp) after feeding `token` at the next position (exposed for tests: equals a full
  // forward's last row).
  const float* Step(uint32_t token);
  void Reset() { pos_ = 0; }

 private:
  DecoderModel& m_;
  Backend& be_;
  int pos_ = 0;
  KvCache cache_;                   // (L, capacity, Ckv) keys and values, in the model's backend memory
  std::vector<float> host_logits_;  // the logits on the host, where the backend's memory is not
  Status status_;
};

}  // namespace anneal
