#include "model/generate.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace anneal {

KvGenerator::KvGenerator(GptModel& model) : m_(model), k_(model.kernels()) {
  const GptConfig& c = m_.config();
  const size_t C = c.n_embd;
  kcache_.assign(static_cast<size_t>(c.n_layer) * c.max_seq_len * C, 0.0f);
  vcache_.assign(kcache_.size(), 0.0f);
  for (auto* v : {&x_, &ln_, &q_, &att_, &tmp_}) v->assign(C, 0.0f);
  fc_.assign(4 * C, 0.0f);
  fcg_.assign(4 * C, 0.0f);
  logits_.assign(c.padded_vocab, 0.0f);
  scores_.assign(c.max_seq_len, 0.0f);
}

const float* KvGenerator::Step(uint32_t token) {
  const GptConfig& c = m_.config();
  const int C = c.n_embd, H = c.n_head, hs = C / H, t = pos_;
  const float* wte = m_.Param("wte.weight");
  const float* wpe = m_.Param("wpe.weight");
  // x (C) = wte[token] + wpe[t]
  for (int i = 0; i < C; ++i) x_[i] = wte[static_cast<size_t>(token) * C + i] + wpe[static_cast<size_t>(t) * C + i];
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    float* kc = kcache_.data() + static_cast<size_t>(l) * c.max_seq_len * C;
    float* vc = vcache_.data() + static_cast<size_t>(l) * c.max_seq_len * C;
    k_.layernorm_forward(ln_.data(), &mean_, &rstd_, x_.data(), m_.Param(p + "ln_1.weight"), m_.Param(p + "ln_1.bias"), 1, C);
    k_.matmul_forward(q_.data(), ln_.data(), m_.Param(p + "attn.q.weight"), m_.Param(p + "attn.q.bias"), 1, C, C);
    // This position's key and value go into the cache (row t).
    k_.matmul_forward(kc + static_cast<size_t>(t) * C, ln_.data(), m_.Param(p + "attn.k.weight"), m_.Param(p + "attn.k.bias"), 1, C, C);
    k_.matmul_forward(vc + static_cast<size_t>(t) * C, ln_.data(), m_.Param(p + "attn.v.weight"), m_.Param(p + "attn.v.bias"), 1, C, C);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
    for (int h = 0; h < H; ++h) {
      // scores over cached positions 0..t, softmax, weighted sum of cached values
      float mx = -INFINITY;
      for (int u = 0; u <= t; ++u) {
        float s = 0;
        for (int i = 0; i < hs; ++i) s += q_[h * hs + i] * kc[static_cast<size_t>(u) * C + h * hs + i];
        scores_[u] = s * scale;
        mx = std::max(mx, scores_[u]);
      }
      float sum = 0;
      for (int u = 0; u <= t; ++u) sum += (scores_[u] = std::exp(scores_[u] - mx));
      for (int i = 0; i < hs; ++i) {
        float acc = 0;
        for (int u = 0; u <= t; ++u) acc += scores_[u] * vc[static_cast<size_t>(u) * C + h * hs + i];
        att_[h * hs + i] = acc / sum;
      }
    }
    k_.matmul_forward(tmp_.data(), att_.data(), m_.Param(p + "attn.proj.weight"), m_.Param(p + "attn.proj.bias"), 1, C, C);
    for (int i = 0; i < C; ++i) x_[i] += tmp_[i];
    k_.layernorm_forward(ln_.data(), &mean_, &rstd_, x_.data(), m_.Param(p + "ln_2.weight"), m_.Param(p + "ln_2.bias"), 1, C);
    k_.matmul_forward(fc_.data(), ln_.data(), m_.Param(p + "mlp.fc.weight"), m_.Param(p + "mlp.fc.bias"), 1, C, 4 * C);
    k_.gelu_forward(fcg_.data(), fc_.data(), fc_.size());
    k_.matmul_forward(tmp_.data(), fcg_.data(), m_.Param(p + "mlp.proj.weight"), m_.Param(p + "mlp.proj.bias"), 1, 4 * C, C);
    for (int i = 0; i < C; ++i) x_[i] += tmp_[i];
  }
  k_.layernorm_forward(ln_.data(), &mean_, &rstd_, x_.data(), m_.Param("ln_f.weight"), m_.Param("ln_f.bias"), 1, C);
  k_.matmul_forward(logits_.data(), ln_.data(), wte, nullptr, 1, C, c.padded_vocab);
  ++pos_;
  return logits_.data();
}

Result<std::vector<uint32_t>> KvGenerator::Generate(const std::vector<uint32_t>& prompt, const SampleOptions& o,
                                                    int64_t stop_token, const std::function<void(uint32_t)>& on_token) {
  const GptConfig& c = m_.config();
  if (prompt.empty()) return InvalidInput("the prompt is empty: give at least one token of text");
  if (static_cast<int>(prompt.size()) > c.max_seq_len) {
    return InvalidInput("the prompt has " + std::to_string(prompt.size()) + " tokens, more than the model's max_seq_len " +
                        std::to_string(c.max_seq_len) + ": shorten it");
  }
  for (uint32_t id : prompt) {
    if (id >= static_cast<uint32_t>(c.vocab_size)) return InvalidInput("prompt token " + std::to_string(id) + " is outside the vocabulary");
  }
  Reset();
  const float* logits = nullptr;
  for (uint32_t id : prompt) logits = Step(id);
  std::mt19937_64 rng(o.seed);
  std::vector<uint32_t> out;
  std::vector<std::pair<float, uint32_t>> cand(c.vocab_size);
  while (static_cast<int>(out.size()) < o.max_tokens && pos_ < c.max_seq_len) {
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
  }
  return out;
}

}  // namespace anneal
