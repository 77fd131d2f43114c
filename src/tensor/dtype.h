// Element types of tensors and the one place bf16 is converted (round to nearest, ties to even).
//
// bf16 is the upper half of an IEEE fp32: 1 sign, 8 exponent, 7 mantissa bits. Converting fp32 to
// bf16 rounds to nearest with ties to even; a NaN stays a NaN (quiet) and infinities stay infinite.
// Every conversion in anneal (backends, checkpoints, the parity harness's emulation) calls these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/status.h"

namespace anneal {

// kI32 holds token ids and targets, kF64 the loss's per-row statistics; f32 and bf16 everything else.
enum class DType : uint8_t { kF32 = 0, kBF16 = 1, kI32 = 2, kF64 = 3 };

inline constexpr size_t SizeOf(DType t) { return t == DType::kBF16 ? 2 : t == DType::kF64 ? 8 : 4; }
const char* DTypeName(DType t);  // "f32", "bf16", "i32", "f64"
// "f32"/"float32" or "bf16"/"bfloat16"; exit 2 naming the valid ones otherwise.
Result<DType> ParseDType(const std::string& s);

// fp32 -> bf16 bits, round to nearest even.
inline uint16_t FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN: keep it quiet
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float Bf16ToFloat(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// The fp32 value nearest to f that bf16 can hold (what a bf16 round trip gives).
inline float RoundToBf16(float f) { return Bf16ToFloat(FloatToBf16(f)); }

// IEEE binary16 (Hugging Face's float16 files): fp32 -> f16 bits rounded to nearest even (past 65504:
// infinity; subnormals kept; NaN stays NaN), and back exactly.
uint16_t FloatToF16(float f);
float F16ToFloat(uint16_t h);

void FloatsToBf16(const float* in, uint16_t* out, size_t n);
void Bf16ToFloats(const uint16_t* in, float* out, size_t n);
// x[i] <- RoundToBf16(x[i]) in place.
void RoundFloatsToBf16(float* x, size_t n);

}  // namespace anneal
