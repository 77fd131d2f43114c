// Small models of each family for unit tests: GPT-2 by ModelConfig::Make, and a Llama with grouped
// key/value heads, an MLP width that is not 4C and an untied head unless asked.
#pragma once

#include <cstdlib>
#include <string>

#include "model/config.h"

namespace anneal {

inline ModelConfig SmallLlama(int V, int maxT, int L, int H, int KV, int C, int F, bool tied = false) {
  ModelConfig c;
  c.family = "llama";
  c.vocab_size = V;
  c.max_seq_len = maxT;
  c.n_layer = L;
  c.n_head = H;
  c.n_kv_head = KV;
  c.n_embd = C;
  c.intermediate_size = F;
  c.tie_embeddings = tied;
  if (!c.Finish().ok()) std::abort();
  return c;
}

// The same small shape in either family: "gpt2", "llama" (half as many key/value heads as query
// heads) or "llama-mqa" (one key/value head: replicated on every tensor-parallel rank).
inline ModelConfig SmallModel(const std::string& family, int V, int maxT, int L, int H, int C) {
  if (family == "gpt2") return ModelConfig::Make(V, maxT, L, H, C).value();
  return SmallLlama(V, maxT, L, H, family == "llama-mqa" ? 1 : H / 2, C, 3 * C / 2);
}

}  // namespace anneal
