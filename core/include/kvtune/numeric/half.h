// IEEE binary16 (f16) and bfloat16 conversions, round to nearest even, bit-exact with the
// hardware conversions (x86 F16C vcvtps2ph with RNE, CUDA __float2half_rn, __float2bfloat16_rn).
// Integer-only so the result never depends on the compiler's floating-point flags.
#pragma once

#include <cstdint>

#include "kvtune/hd.h"
#include "kvtune/numeric/bits.h"

namespace kvtune {

// float32 -> binary16, round half to even; overflow goes to ±inf, NaN stays NaN (quiet).
KVTUNE_HD uint16_t f32_to_f16_bits(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
  }
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (ax < 0x38800000u) {  // below 2^-14: f16 subnormal or zero
    if (ax <= 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25: ties to even zero
    const uint32_t exponent = ax >> 23;
    const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exponent;  // value in units of 2^-24 is mant >> shift
    uint32_t r = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  const uint32_t rebased = ax - 0x38000000u;  // exponent bias 127 -> 15
  uint32_t h = rebased >> 13;
  const uint32_t rem = rebased & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

KVTUNE_HD float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exponent == 0) {
    // Subnormal: mant * 2^-24 is exact in float32.
    const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return bits_float(float_bits(v) | sign);
  }
  if (exponent == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
  return bits_float(sign | ((exponent + 112u) << 23) | (mant << 13));
}

// float32 -> bfloat16, round half to even; NaN stays NaN (quiet bit set).
KVTUNE_HD uint16_t f32_to_bf16_bits(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

KVTUNE_HD float bf16_bits_to_f32(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

KVTUNE_HD float round_to_f16(float f) { return f16_bits_to_f32(f32_to_f16_bits(f)); }
KVTUNE_HD float round_to_bf16(float f) { return bf16_bits_to_f32(f32_to_bf16_bits(f)); }

inline constexpr float kF16MaxFinite = 65504.0f;

}  // namespace kvtune
