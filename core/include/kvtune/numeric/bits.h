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

// max(+0, max |x[i]|) over the non-NaN x[i], as the sequential `a > amax ? a : amax` scan from +0
// finds it, computed on the bits: for floats >= +0 that are not NaN, float order is the order of
// their bits as integers, and an integer maximum vectorizes without reassociation flags (GCC keeps
// a float one sequential). |x| clears the sign, so -0 counts as +0, and a NaN maps to 0, as the scan
// skips it: the same maximum of the same set. Host code, inlined into each caller's vector loops.
inline float abs_max_bits(const float* x, int64_t n) {
  uint32_t amax = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t a = float_bits(x[i]) & 0x7fffffffu;
    const uint32_t kept = a & (0u - static_cast<uint32_t>(a <= 0x7f800000u));
    amax = kept > amax ? kept : amax;
  }
  return bits_float(amax);
}

}  // namespace kvtune
