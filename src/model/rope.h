// Rotary position embedding tables (Su et al. 2021) as transformers' Llama computes them: the
// inverse frequencies inv_freq[i] = 1 / theta^(2i / hs) in fp32, optionally reshaped by Llama 3's
// frequency scaling (long wavelengths divided by `factor`, short ones kept, a smooth ramp between),
// then the angle p * inv_freq[i] rounded to fp32 and its cos and sin. Computed once per model on the
// host, in the same fp32 operations transformers does, so a model trained here and one loaded there
// rotate by the same angles.
#pragma once

#include <vector>

#include "model/config.h"

namespace anneal {

// The (maxT, hs/2) cos and sin tables of c (row p: position p).
void RopeTables(const ModelConfig& c, std::vector<float>* cos, std::vector<float>* sin);
// The inverse frequencies (hs/2), scaled when c.rope_scaling is on.
std::vector<float> RopeInverseFrequencies(const ModelConfig& c);

}  // namespace anneal
