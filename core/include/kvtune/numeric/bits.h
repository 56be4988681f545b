// Bit casts usable in host and device code (memcpy is the portable, optimizer-friendly idiom).
#pragma once

#include <cstdint>
#include <cstring>

#include "kvtune/hd.h"

namespace kvtune {

KVTUNE_HD uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

KVTUNE_HD float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

// 1 / scale when scale is a power of two whose reciprocal is a float32 (then exact), else 0.
// x * (1 / scale) and x / scale are then both the correctly rounded value of the same real number,
// so they agree for every x (NaN stays NaN): a codec may multiply instead of dividing, the vector
// division being the slowest instruction in its loops.
KVTUNE_HD float exact_reciprocal(float scale) {
  const uint32_t s = float_bits(scale);
  const uint32_t exponent = s >> 23;  // also 0 unless the sign is +
  return (s & 0x7fffffu) == 0 && exponent >= 1u && exponent <= 254u ? bits_float((254u - exponent) << 23) : 0.0f;
}

}  // namespace kvtune
