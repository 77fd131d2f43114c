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

Status AdamW::UseMasterWeights(DevPtr working) {
  master_.Reset();
  if (working.t == DType::kF32) return Status::Ok();
  ANNEAL_RETURN_IF_ERROR(master_.Assign(be_, end_ - begin_, "the fp32 master weights"));
  const int64_t n = static_cast<int64_t>(end_ - begin_);
  be_.Copy(be_.DefaultStream(), master_.View(), TensorView(working.p, working.t, {n}, be_.device()));
  return Status::Ok();
}

void AdamW::WriteWorking(DevPtr working) {
  if (master_.empty()) return;
  const int64_t n = static_cast<int64_t>(end_ - begin_);
  be_.Copy(be_.DefaultStream(), TensorView(working.p, working.t, {n}, be_.device()), master_.View());
}

StepStats AdamW::StepWithNorm(DevPtr params, DevPtr grads, int step, double grad_norm) {
  StepStats s;
  s.lr = LearningRate(o_, step);
  s.grad_norm = grad_norm;
  if (!std::isfinite(s.grad_norm)) {
    s.skipped = true;
    return s;
  }
  const size_t n = end_ - begin_;
  const Stream st = be_.DefaultStream();
  if (fence_.handle) {
    be_.WaitEvent(st, fence_);
    fence_ = Event{};
  }
  auto view = [&](DevPtr p, size_t len) {
    return TensorView(p.p, p.t, {static_cast<int64_t>(len)}, be_.device());
  };
  if (o_.grad_clip > 0 && s.grad_norm > o_.grad_clip) {
    be_.Scale(st, view(grads, n), static_cast<float>(o_.grad_clip / (s.grad_norm + 1e-6)));
  }
  ++updates_;
  const DevPtr target = master_.empty() ? params : master_.ptr();  // what the update changes
  if (ranges_.empty()) {
    for (const ParamInfo& p : layout_.params()) {  // each tensor's part inside the shard
      const size_t lo = std::max(begin_, p.offset), hi = std::min(end_, p.offset + p.stored_size);
      if (lo < hi) ranges_.push_back({lo - begin_, hi - lo, p.decay ? o_.weight_decay : 0.0f});
    }
  }
  // Every tensor in one call; with bf16 working weights, those written from the masters too.
  be_.AdamWEach(st, view(target, n), view(grads, n), view(m_.ptr(), n), view(v_.ptr(), n),
                master_.empty() ? TensorView() : view(params, n), ranges_, s.lr, o_.beta1, o_.beta2, o_.eps, updates_);
  return s;
}

}  // namespace anneal
