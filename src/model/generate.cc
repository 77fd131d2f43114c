#include "model/generate.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "tensor/host_copy.h"

namespace anneal {

KvGenerator::KvGenerator(DecoderModel& model, int capacity) : m_(model), be_(model.backend()) {
  status_ = cache_.Allocate(be_, m_.config(), m_.compute_dtype(), capacity);
}

const float* KvGenerator::Step(uint32_t token) {
  const DevPtr logits = m_.DecodeStep(static_cast<int32_t>(token), pos_, cache_);
  ++pos_;
  if (!logits) return nullptr;
  if (be_.HostAccessible() && logits.t == DType::kF32) return logits.f32();
  host_logits_ = CopyToHostF32(be_, logits, m_.config().padded_vocab);  // widened from bf16
  return host_logits_.data();
}

Result<std::vector<uint32_t>> KvGenerator::Generate(const std::vector<uint32_t>& prompt, const SampleOptions& o,
                                                    int64_t stop_token, const std::function<void(uint32_t)>& on_token) {
  const ModelConfig& c = m_.config();
  if (!status_.ok()) return status_;
  if (!m_.status().ok()) return m_.status();
  if (prompt.empty()) return InvalidInput("the prompt is empty: give at least one token of text");
  if (static_cast<int>(prompt.size()) > cache_.rows) {
    return InvalidInput("the prompt has " + std::to_string(prompt.size()) + " tokens, more than " +
                        (cache_.rows < c.max_seq_len ? "the generator's capacity " : "the model's max_seq_len ") +
                        std::to_string(cache_.rows) + ": shorten it");
  }
  for (uint32_t id : prompt) {
    if (id >= static_cast<uint32_t>(c.vocab_size)) return InvalidInput("prompt token " + std::to_string(id) + " is outside the vocabulary");
  }
  Reset();
  const float* logits = nullptr;
  for (uint32_t id : prompt) logits = Step(id);
  if (!logits) return m_.status();  // an activation of the decode did not fit
  std::mt19937_64 rng(o.seed);
  std::vector<uint32_t> out;
  std::vector<std::pair<float, uint32_t>> cand(c.vocab_size);
  while (static_cast<int>(out.size()) < o.max_tokens && pos_ < cache_.rows) {
    for (int j = 0; j < c.vocab_size; ++j) cand[j] = {logits[j], static_cast<uint32_t>(j)};  // padding never sampled
    uint32_t next;
    if (o.temperature <= 0) {
      next = std::max_element(cand.begin(), cand.end())->second;
    } else {
      size_t n = cand.size();
      if (o.top_k > 0 && static_cast<size_t>(o.top_k) < n) {
        std::partial_sort(cand.begin(), cand.begin() + o.top_k, cand.end(), [](auto& a, auto& b) { return a.first > b.first; });
        n = static_cast<size_t>(o.top_k);
      }
      float mx = -INFINITY;
      for (size_t j = 0; j < n; ++j) mx = std::max(mx, cand[j].first);
      std::vector<double> w(n);
      double sum = 0;
      for (size_t j = 0; j < n; ++j) sum += (w[j] = std::exp((cand[j].first - mx) / o.temperature));
      double r = std::uniform_real_distribution<double>(0.0, sum)(rng);
      size_t j = 0;
      while (j + 1 < n && (r -= w[j]) > 0) ++j;
      next = cand[j].second;
    }
    out.push_back(next);
    if (on_token) on_token(next);
    if (stop_token >= 0 && next == static_cast<uint32_t>(stop_token)) break;
    if (pos_ >= c.max_seq_len) break;
    logits = Step(next);
    if (!logits) return m_.status();
  }
  return out;
}

}  // namespace anneal
