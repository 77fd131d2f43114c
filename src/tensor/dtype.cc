#include "tensor/dtype.h"

#include <cmath>
#include <cstring>

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
uint16_t FloatToF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u);  // NaN, infinity
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds past 65504: infinity
  if (abs < 0x38800000u) {                          // below 2^-14: a subnormal half (h * 2^-24), or zero
    if (abs < 0x33000000u) return sign;             // at most a quarter of the smallest subnormal: zero
    const uint32_t e = abs >> 23, mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t drop = 126 - e;                  // m * 2^(e-150) = (m >> drop) * 2^-24
    uint32_t h = mant >> drop;
    const uint32_t rest = mant & ((1u << drop) - 1), half = 1u << (drop - 1);
    if (rest > half || (rest == half && (h & 1u))) ++h;
    return sign | static_cast<uint16_t>(h);
  }
  uint32_t h = (abs - 0x38000000u) >> 13;  // the exponent rebiased (127 -> 15), 10 mantissa bits kept
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is right too
  return sign | static_cast<uint16_t>(h);
}

float F16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  float f;
  if (exp == 0) {
    f = std::ldexp(static_cast<float>(mant), -24);  // zero or a subnormal, exactly
    if (sign) f = -f;
    return f;
  }
  const uint32_t x = exp == 31 ? sign | 0x7f800000u | (mant << 13) : sign | ((exp + 112) << 23) | (mant << 13);
  std::memcpy(&f, &x, 4);
  return f;
}

void Bf16ToFloats(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = Bf16ToFloat(in[i]);
}
void RoundFloatsToBf16(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = RoundToBf16(x[i]);
}

}  // namespace anneal
