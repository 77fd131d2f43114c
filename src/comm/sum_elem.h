// The element types the communicators sum, each summed in fp32 in rank order and stored once: fp32
// itself, and bf16 (the bits of the upper half of an fp32; widened exactly, the sum rounded to nearest
// even once) — so a bf16 reduction moves half the bytes of an fp32 one and rounds only its result.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace anneal {

struct F32Sum {
  using T = float;
  static float Load(float v) { return v; }
  static float Store(float v) { return v; }
};

struct Bf16Sum {
  using T = uint16_t;
  static float Load(uint16_t v) { return Bf16ToFloat(v); }
  static uint16_t Store(float v) { return FloatToBf16(v); }
};

}  // namespace anneal
