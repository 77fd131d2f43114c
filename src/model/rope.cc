#include "model/rope.h"

#include <cmath>

namespace anneal {

std::vector<float> RopeInverseFrequencies(const ModelConfig& c) {
  const int hs = c.head_size(), half = hs / 2;
  std::vector<float> inv(half);
  for (int i = 0; i < half; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(hs);
    inv[i] = 1.0f / std::pow(c.rope_theta, e);
  }
  const RopeScaling& r = c.rope_scaling;
  if (!r.on()) return inv;
  // transformers' _compute_llama3_parameters, operation by operation in fp32.
  const float pi2 = static_cast<float>(2 * M_PI);
  const float orig = static_cast<float>(r.original_max_seq_len);
  const float low_wavelen = orig / r.low_freq_factor, high_wavelen = orig / r.high_freq_factor;
  for (int i = 0; i < half; ++i) {
    const float wavelen = pi2 / inv[i];
    float f = wavelen > low_wavelen ? inv[i] / r.factor : inv[i];
    const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    if (medium) {
      const float smooth = (orig / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
      f = (1.0f - smooth) * f / r.factor + smooth * f;
    }
    inv[i] = f;
  }
  return inv;
}

void RopeTables(const ModelConfig& c, std::vector<float>* cos, std::vector<float>* sin) {
  const std::vector<float> inv = RopeInverseFrequencies(c);
  const size_t half = inv.size();
  cos->resize(static_cast<size_t>(c.max_seq_len) * half);
  sin->resize(cos->size());
  for (int p = 0; p < c.max_seq_len; ++p) {
    for (size_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(p) * inv[i];
      (*cos)[p * half + i] = std::cos(angle);
      (*sin)[p * half + i] = std::sin(angle);
    }
  }
}

}  // namespace anneal
