// AdamW with decoupled weight decay (torch.optim.AdamW semantics) on 2-D tensors only, global-norm
// clipping, and a learning-rate schedule: linear warmup, then cosine decay to min_lr.
// Moments m and v are fp32 and laid out like the parameters (ParamLayout order). An optimizer may own
// only a shard [begin, end) of the flat parameter vector (ZeRO): its moments cover that range only,
// and Step's pointers point at element `begin` of the parameters and gradients.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "model/config.h"
#include "tensor/backend.h"
#include "tensor/device_array.h"

namespace anneal {

struct AdamWOptions {
  float lr = 6e-4f;
  float min_lr = 6e-5f;
  int warmup_steps = 0;
  int decay_steps = 0;  // cosine from warmup_steps to decay_steps; 0 = constant after warmup
  float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
  float weight_decay = 0.1f;
  float grad_clip = 1.0f;  // 0 = no clipping
};

// Learning rate at step (0-based).
float LearningRate(const AdamWOptions& o, int step);

struct StepStats {
  double grad_norm = 0;  // before clipping
  float lr = 0;
  bool skipped = false;  // non-finite gradients: no update
};

class AdamW {
 public:
  // The shard [begin, end) of the flat vector (default: all of it).
  AdamW(const ParamLayout& layout, Backend& backend, AdamWOptions o, size_t begin = 0, size_t end = SIZE_MAX);
  // One update of params from grads at 0-based step `step` (bias correction uses t = updates done
  // + 1). Skips the update (and says so) when the gradient norm is not finite.
  StepStats Step(DevPtr params, DevPtr grads, int step) {
    return StepWithNorm(params, grads, step, std::sqrt(SumSquares(grads)));
  }
  StepStats Step(float* params, float* grads, int step) {
    return Step(DevPtr{params, DType::kF32}, DevPtr{grads, DType::kF32}, step);
  }
  // The same with the global gradient norm given (a sharded optimizer adds its shards' SumSquares
  // across ranks first); grads are clipped by it in place. params and grads: the working copy and
  // its gradients in the compute dtype, at element begin(). With master weights the update runs on
  // them and the working copy is written from them (rounded to its dtype).
  StepStats StepWithNorm(DevPtr params, DevPtr grads, int step, double grad_norm);
  StepStats StepWithNorm(float* params, float* grads, int step, double grad_norm) {
    return StepWithNorm(DevPtr{params, DType::kF32}, DevPtr{grads, DType::kF32}, step, grad_norm);
  }
  // Sum of squares of the shard's gradients (grads points at element begin()).
  double SumSquares(DevPtr grads) const {
    return be_.SumSquares(be_.DefaultStream(),
                          TensorView(grads.p, grads.t, {static_cast<int64_t>(end_ - begin_)}, be_.device()));
  }
  double SumSquares(const float* grads) const { return SumSquares(DevPtr{const_cast<float*>(grads), DType::kF32}); }

  // The precision policy's master weights. For a working copy in fp32 there are none: the update
  // runs on the working parameters themselves (no copy, no extra memory). For a lower-precision
  // working copy (bf16) this optimizer owns fp32 masters for its shard, made here from `working`
  // (the parameters at element begin()). Errors name the allocation.
  Status UseMasterWeights(DevPtr working);
  // The fp32 master weights of the shard, or null when the working copy is fp32 (then it is the
  // master): what checkpoints store and load, so a checkpoint moves between precisions and devices.
  DevPtr master() const { return master_.ptr(); }
  // The canonical fp32 parameters given the working copy: the masters where they exist, else the
  // working copy itself (what checkpoints and the state hash read).
  DevPtr MasterOr(DevPtr working) const { return master_.empty() ? working : master_.ptr(); }
  // The next update first waits, on the compute stream, for `e`: a checkpoint snapshot still copying
  // the parameters and moments that update overwrites (ckpt/snapshot_staging.h).
  void WaitBeforeNextUpdate(const Event& e) { fence_ = e; }
  // Writes the working copy (at element begin()) from the masters after they were loaded.
  void WriteWorking(DevPtr working);
  size_t begin() const { return begin_; }
  size_t end() const { return end_; }
  // The moments of the shard, in the backend's memory (tensor/host_copy.h reads them on the host).
  DeviceArray& m() { return m_; }
  DeviceArray& v() { return v_; }
  const DeviceArray& m() const { return m_; }
  const DeviceArray& v() const { return v_; }
  // Ok, or the allocation of the moments that failed.
  const Status& status() const { return status_; }
  int updates() const { return updates_; }
  void set_updates(int t) { updates_ = t; }
  const AdamWOptions& options() const { return o_; }

 private:
  const ParamLayout& layout_;
  Backend& be_;
  AdamWOptions o_;
  size_t begin_, end_;
  DeviceArray m_, v_;
  DeviceArray master_;  // fp32 master weights of the shard when the working copy is not fp32
  std::vector<Backend::AdamWRange> ranges_;  // each tensor's part of the shard, with its weight decay
  Status status_;
  int updates_ = 0;
  Event fence_;  // WaitBeforeNextUpdate's
};

}  // namespace anneal
