#include "model/generate.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace anneal {

namespace {
TV M(const float* p, int64_t r, int64_t c) { return TV::F32(p, {r, c}); }
TV M(const float* p, int64_t n) { return TV::F32(p, {n}); }
}  // namespace

KvGenerator::KvGenerator(GptModel& model) : m_(model), be_(model.backend()), st_(model.stream()) {
  const GptConfig& c = m_.config();
  const size_t C = c.n_embd;
  auto alloc = [&](DeviceArray& a, size_t n, const char* what, DType t = DType::kF32) {
    Status s = a.Assign(be_, n, what, t);
    if (!s.ok() && status_.ok()) status_ = s;
  };
  alloc(kcache_, static_cast<size_t>(c.n_layer) * c.max_seq_len * C, "the key cache (L, maxT, C)");
  alloc(vcache_, kcache_.size(), "the value cache (L, maxT, C)");
  for (auto* v : {&x_, &ln_, &q_, &att_, &tmp_}) alloc(*v, C, "decode activations (C)");
  alloc(fc_, 4 * C, "decode activations (4C)");
  alloc(fcg_, 4 * C, "decode activations (4C)");
  alloc(logits_, c.padded_vocab, "decode logits (Vp)");
  alloc(scores_, c.max_seq_len, "decode attention scores");
  alloc(stats_, 2, "decode LayerNorm statistics");
  alloc(token_, 1, "decode token", DType::kI32);
}

const float* KvGenerator::Step(uint32_t token) {
  const GptConfig& c = m_.config();
  const int C = c.n_embd, H = c.n_head, t = pos_, maxT = c.max_seq_len;
  const TV wte = M(m_.Param("wte.weight"), c.padded_vocab, C);
  const TV x = M(x_.data(), 1, C), ln = M(ln_.data(), 1, C), tmp = M(tmp_.data(), 1, C);
  const TV mean = M(stats_.data(), 1), rstd = M(stats_.data() + 1, 1);
  auto P = [&](const std::string& name, int64_t r, int64_t cols = 0) {
    return cols ? M(m_.Param(name), r, cols) : M(m_.Param(name), r);
  };
  // x (1,C) = wte[token] + wpe[t]
  const int32_t id = static_cast<int32_t>(token);
  be_.CopyFromHost(token_.View(), &id, st_);
  be_.EmbeddingForward(st_, TV::F32(x_.data(), {1, 1, C}), TV::I32(token_.i32(), {1, 1}), wte,
                       M(m_.Param("wpe.weight"), maxT, C).Rows(t, 1));
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    const TV kc = M(kcache_.data() + static_cast<size_t>(l) * maxT * C, maxT, C);
    const TV vc = M(vcache_.data() + static_cast<size_t>(l) * maxT * C, maxT, C);
    be_.LayerNormForward(st_, ln, mean, rstd, x, P(p + "ln_1.weight", C), P(p + "ln_1.bias", C));
    be_.LinearForward(st_, M(q_.data(), 1, C), ln, P(p + "attn.q.weight", C, C), P(p + "attn.q.bias", C));
    // This position's key and value go into the cache (row t).
    be_.LinearForward(st_, kc.Rows(t, 1), ln, P(p + "attn.k.weight", C, C), P(p + "attn.k.bias", C));
    be_.LinearForward(st_, vc.Rows(t, 1), ln, P(p + "attn.v.weight", C, C), P(p + "attn.v.bias", C));
    // att (C): the query against the cached positions 0..t, head by head
    be_.AttentionDecode(st_, M(att_.data(), C), M(q_.data(), C), kc.Rows(0, t + 1), vc.Rows(0, t + 1),
                        M(scores_.data(), maxT), H);
    be_.LinearForward(st_, tmp, M(att_.data(), 1, C), P(p + "attn.proj.weight", C, C), P(p + "attn.proj.bias", C));
    be_.Accumulate(st_, x, tmp);
    be_.LayerNormForward(st_, ln, mean, rstd, x, P(p + "ln_2.weight", C), P(p + "ln_2.bias", C));
    be_.LinearForward(st_, M(fc_.data(), 1, 4 * C), ln, P(p + "mlp.fc.weight", 4 * C, C), P(p + "mlp.fc.bias", 4 * C),
                      M(fcg_.data(), 1, 4 * C));
    be_.LinearForward(st_, tmp, M(fcg_.data(), 1, 4 * C), P(p + "mlp.proj.weight", C, 4 * C),
                      P(p + "mlp.proj.bias", C));
    be_.Accumulate(st_, x, tmp);
  }
  be_.LayerNormForward(st_, ln, mean, rstd, x, P("ln_f.weight", C), P("ln_f.bias", C));
  be_.LinearForward(st_, M(logits_.data(), 1, c.padded_vocab), ln, wte, TV());
  ++pos_;
  if (be_.HostAccessible()) return logits_.data();
  host_logits_.resize(logits_.size());
  be_.CopyToHost(host_logits_.data(), logits_.View(), st_);
  be_.Synchronize(st_);
  return host_logits_.data();
}

Result<std::vector<uint32_t>> KvGenerator::Generate(const std::vector<uint32_t>& prompt, const SampleOptions& o,
                                                    int64_t stop_token, const std::function<void(uint32_t)>& on_token) {
  const GptConfig& c = m_.config();
  if (!status_.ok()) return status_;
  if (!m_.status().ok()) return m_.status();
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
