#include "tensor/dtype.h"

namespace anneal {

const char* DTypeName(DType t) { return t == DType::kF32 ? "f32" : t == DType::kBF16 ? "bf16" : t == DType::kI32 ? "i32" : "f64"; }

Result<DType> ParseDType(const std::string& s) {
  if (s == "f32" || s == "float32") return DType::kF32;
  if (s == "bf16" || s == "bfloat16") return DType::kBF16;
  return InvalidInput("unknown dtype '" + s + "': use f32 or bf16");
}

void FloatsToBf16(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = FloatToBf16(in[i]);
}
void Bf16ToFloats(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = Bf16ToFloat(in[i]);
}
void RoundFloatsToBf16(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = RoundToBf16(x[i]);
}

}  // namespace anneal
