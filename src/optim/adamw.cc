#include "optim/adamw.h"

#include <algorithm>
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

AdamW::AdamW(const ParamLayout& layout, Backend& backend, AdamWOptions o, size_t begin, size_t end)
    : layout_(layout),
      be_(backend),
      o_(o),
      begin_(std::min(begin, layout.total_floats())),
      end_(std::max(begin_, std::min(end, layout.total_floats()))) {
  status_ = m_.Assign(be_, end_ - begin_, "the Adam first moments");
  if (status_.ok()) status_ = v_.Assign(be_, end_ - begin_, "the Adam second moments");
}

StepStats AdamW::StepWithNorm(float* params, float* grads, int step, double grad_norm) {
  StepStats s;
  s.lr = LearningRate(o_, step);
  s.grad_norm = grad_norm;
  if (!std::isfinite(s.grad_norm)) {
    s.skipped = true;
    return s;
  }
  const size_t n = end_ - begin_;
  const Stream st = be_.DefaultStream();
  if (o_.grad_clip > 0 && s.grad_norm > o_.grad_clip) {
    be_.Scale(st, TV::F32(grads, {static_cast<int64_t>(n)}), static_cast<float>(o_.grad_clip / (s.grad_norm + 1e-6)));
  }
  ++updates_;
  for (const ParamInfo& p : layout_.params()) {  // each tensor's part inside the shard
    const size_t lo = std::max(begin_, p.offset), hi = std::min(end_, p.offset + p.stored_size);
    if (lo >= hi) continue;
    const size_t i = lo - begin_;
    const int64_t len = static_cast<int64_t>(hi - lo);
    be_.AdamW(st, TV::F32(params + i, {len}), TV::F32(grads + i, {len}), TV::F32(m_.data() + i, {len}),
              TV::F32(v_.data() + i, {len}), s.lr, o_.beta1, o_.beta2, o_.eps, p.decay ? o_.weight_decay : 0.0f,
              updates_);
  }
  return s;
}

}  // namespace anneal
