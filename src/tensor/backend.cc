#include "tensor/backend.h"

namespace anneal {

const char* OpName(Op op) {
  static const char* const kNames[] = {
      "embedding_forward",   "embedding_backward",    "vocab_embedding_forward", "vocab_embedding_backward",
      "add_positions",       "layernorm_forward",     "layernorm_backward",      "residual_layernorm_forward",
      "linear_forward",      "linear_backward",       "bias_add",                "attention_forward",
      "attention_backward",  "attention_decode",      "gelu_forward",            "gelu_backward",
      "residual_forward",    "accumulate",            "crossentropy",            "vocab_loss_stats",
      "vocab_loss_combine",  "sum_squares",           "scale",                   "adamw",
      "zero",                "copy",                  "rmsnorm_forward",         "rmsnorm_backward",
      "rotary",              "swiglu_forward",        "swiglu_backward"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<size_t>(Op::kCount), "name every Op");
  return kNames[static_cast<size_t>(op)];
}

std::vector<Op> AllOps() {
  std::vector<Op> v;
  for (int i = 0; i < static_cast<int>(Op::kCount); ++i) v.push_back(static_cast<Op>(i));
  return v;
}

}  // namespace anneal
