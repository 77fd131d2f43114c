#include "optim/adamw.h"

#include <cmath>

namespace anneal {

float LearningRate(const AdamWOptions& o, int step) {
  if (o.warmup_steps > 0 && step < o.warmup_steps) {
    return o.lr * static_cast<float>(step + 1) / static_cast<float>(o.warmup_steps);
  }
  if (o.decay_steps <= o.warmup_steps) return o.lr;
  if (step >= o.decay_steps) return o.min_lr;
  const double ratio = static_cast<double>(step - o.warmup_steps) / (o.decay_steps - o.warmup_steps);
  const double coeff = 0.5 * (1.0 + std::cos(M_PI * ratio));  // 1 -> 0
  return static_cast<float>(o.min_lr + coeff * (o.lr - o.min_lr));
}

AdamW::AdamW(const ParamLayout& layout, const KernelTable& k, AdamWOptions o)
    : layout_(layout), k_(k), o_(o), m_(layout.total_floats(), 0.0f), v_(layout.total_floats(), 0.0f) {}

StepStats AdamW::Step(float* params, float* grads, int step) {
  StepStats s;
  s.lr = LearningRate(o_, step);
  s.grad_norm = std::sqrt(k_.sum_squares(grads, layout_.total_floats()));
  if (!std::isfinite(s.grad_norm)) {
    s.skipped = true;
    return s;
  }
  if (o_.grad_clip > 0 && s.grad_norm > o_.grad_clip) {
    k_.scale(grads, static_cast<float>(o_.grad_clip / (s.grad_norm + 1e-6)), layout_.total_floats());
  }
  ++updates_;
  for (const ParamInfo& p : layout_.params()) {
    k_.adamw(params + p.offset, grads + p.offset, m_.data() + p.offset, v_.data() + p.offset, p.stored_size, s.lr,
             o_.beta1, o_.beta2, o_.eps, p.decay ? o_.weight_decay : 0.0f, updates_);
  }
  return s;
}

}  // namespace anneal
