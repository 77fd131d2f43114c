// The Llama family (Llama 2 and 3, and the decoders that share their shape): RMSNorm, rotary position
// embeddings (with Llama 3's frequency scaling as an option), a SwiGLU MLP of intermediate_size,
// grouped-query attention (n_kv_head dividing n_head), no biases, an untied LM head unless
// tie_embeddings. Presets llama-tiny (tests, the demo), llama-3.2-1b, llama-3.2-3b, llama-3-8b.
#pragma once

#include "model/family.h"

namespace anneal {

const ModelFamily& LlamaFamily();

}  // namespace anneal
