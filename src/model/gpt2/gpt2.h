// The GPT-2 family: LayerNorm, learned positions, a GELU MLP of 4C, tied embeddings, biases
// (Radford et al. 2019; llm.c's layout). Presets gpt2 (124M) ... gpt2-xl (1.5B).
#pragma once

#include "model/family.h"

namespace anneal {

const ModelFamily& Gpt2Family();

}  // namespace anneal
