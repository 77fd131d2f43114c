// ParamStore: a model shard's working parameters and their gradients — one flat buffer each in
// ParamLayout order, in the precision policy's compute dtype, in the backend's memory. The fp32
// master weights and Adam moments are the optimizer's (optim/adamw.h): with an fp32 working copy the
// working parameters are the master (no copy, no extra memory); with bf16 AdamW keeps fp32 masters
// of its (ZeRO) shard and writes this store's parameters as their rounding. Checkpoints store the
// canonical fp32 tensors (the masters where they exist), so a checkpoint moves between precisions
// and devices. Not thread-safe.
#pragma once

#include <string>

#include "core/check.h"
#include "core/status.h"
#include "model/config.h"
#include "tensor/backend.h"
#include "tensor/device_array.h"

namespace anneal {

class ParamStore {
 public:
  ParamStore(const ParamLayout& layout, Backend& backend, DType compute)
      : layout_(layout), be_(backend), dtype_(compute) {}
  // Zeroed parameters and gradients; errors name the allocation.
  Status Allocate() {
    ANNEAL_RETURN_IF_ERROR(AllocateParams());
    return AllocateGrads();
  }
  Status AllocateParams() { return params_.Assign(be_, layout_.total_floats(), "the parameters", dtype_); }
  Status AllocateGrads() { return grads_.Assign(be_, layout_.total_floats(), "the gradients", dtype_); }
  // No gradient buffer (ZeRO-2 hands gradients out range by range instead).
  void DropGrads() { grads_.Reset(); }
  // No parameter buffer (ZeRO-3 gathers parameters range by range instead).
  void DropParams() { params_.Reset(); }
  void ZeroGrads(const Stream& s) {
    if (!grads_.empty()) be_.Zero(s, grads_.View());
  }

  DType dtype() const { return dtype_; }
  size_t size() const { return layout_.total_floats(); }
  DevPtr params() const { return params_.ptr(); }
  DevPtr grads() const { return grads_.ptr(); }  // null without a gradient buffer
  bool has_grads() const { return !grads_.empty(); }
  // One tensor's parameters or gradients; aborts on an unknown name (an invariant).
  DevPtr Param(const std::string& name) const { return params_.ptr() + Offset(name); }
  DevPtr Grad(const std::string& name) const { return grads_.ptr() + Offset(name); }
  size_t Offset(const std::string& name) const {
    const ParamInfo* p = layout_.Find(name);
    ANNEAL_CHECK(p != nullptr, "a parameter name the model's layout does not have");
    return p->offset;
  }

 private:
  const ParamLayout& layout_;
  Backend& be_;
  DType dtype_;
  DeviceArray params_, grads_;
};

}  // namespace anneal
