#include "kernels/ops.h"

namespace anneal {

// Every function pointer of KernelTable, by name. Adding an op to the table without listing it
// here fails to compile, and the parity harness fails for any listed op without a test case.
static_assert(sizeof(KernelTable) == sizeof(std::string) + 15 * sizeof(void*),
              "KernelTable changed: list the new op in OpsOf() and give it a parity test case");

std::vector<std::pair<std::string, const void*>> OpsOf(const KernelTable& t) {
  auto p = [](auto f) { return reinterpret_cast<const void*>(f); };
  return {{"encoder_forward", p(t.encoder_forward)},
          {"encoder_backward", p(t.encoder_backward)},
          {"layernorm_forward", p(t.layernorm_forward)},
          {"layernorm_backward", p(t.layernorm_backward)},
          {"matmul_forward", p(t.matmul_forward)},
          {"matmul_backward", p(t.matmul_backward)},
          {"attention_forward", p(t.attention_forward)},
          {"attention_backward", p(t.attention_backward)},
          {"gelu_forward", p(t.gelu_forward)},
          {"gelu_backward", p(t.gelu_backward)},
          {"residual_forward", p(t.residual_forward)},
          {"crossentropy_forward_backward", p(t.crossentropy_forward_backward)},
          {"sum_squares", p(t.sum_squares)},
          {"scale", p(t.scale)},
          {"adamw", p(t.adamw)}};
}

}  // namespace anneal
