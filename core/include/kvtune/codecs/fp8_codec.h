// FP8 codec: float32 <-> OCP FP8 E4M3 and E5M2, and the scaled quantize/dequantize a KV cache uses.
//
//   quantize:    code = fp8(x / scale)      round to nearest even, saturating to ±max finite
//   dequantize:  x'   = f32(code) * scale
//
// The conversion is bit-exact with CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3 or
// __NV_E5M2) (cuda_fp8.hpp): finite values beyond the largest finite value, and ±inf, saturate to
// ±448 (E4M3) / ±57344 (E5M2); NaN becomes the canonical NaN code 0x7f (the host path in
// cuda_fp8.hpp replaces every NaN by 0x7fffffff before converting, so the sign is dropped); a
// value at or below half the smallest subnormal becomes a zero of its own sign. The division
// x / scale is one float32 operation, as in a kernel that calls the conversion on x / scale.
//
// Integer-only, like numeric/half.h, so the result never depends on floating-point flags, and
// plain C++17 so nvcc compiles the same source for the kernels.
#pragma once

#include <cstdint>

#include "kvtune/hd.h"
#include "kvtune/numeric/bits.h"

namespace kvtune::codec {

enum class Fp8Format : uint8_t { e4m3, e5m2 };

// Largest finite magnitudes (OCP 8-bit Floating Point Specification v1.0, table 1; FP8_MAXNORM in
// cuda_fp8.hpp): E4M3 S.1111.110 = 1.75 * 2^8, E5M2 S.11110.11 = 1.75 * 2^15.
inline constexpr float kFp8E4M3MaxFinite = 448.0f;
inline constexpr float kFp8E5M2MaxFinite = 57344.0f;

// The code that every NaN converts to (cuda_fp8.hpp: canonical NaN in, 0x7f out, both formats).
inline constexpr uint8_t kFp8NaNCode = 0x7f;

namespace fp8_detail {

// v / 2^shift rounded to nearest, ties to even, for 1 <= shift <= 24 and v < 2^25. Adding
// 2^(shift-1) - 1 plus the kept part's lowest bit carries into the kept part exactly when the
// dropped part exceeds one half, or equals it and the kept part is odd. Branch-free, because on
// real data the tie decision is a coin flip a branch predictor cannot learn.
KVTUNE_HD uint32_t round_shift_half_even(uint32_t v, uint32_t shift) {
  return (v + ((1u << (shift - 1u)) - 1u) + ((v >> shift) & 1u)) >> shift;
}

// One FP8 format: kMantissaBits stored mantissa bits, exponent bias kBias, the largest finite code
// and whether the all-ones exponent means inf/NaN (E5M2, IEEE-like) or is a normal binade whose
// all-ones mantissa alone is NaN (E4M3). OCP FP8 spec v1.0, section 5.
template <uint32_t kMantissaBits, uint32_t kBias, uint32_t kMaxFiniteCode, bool kIeeeSpecials>
struct Format {
  static constexpr uint32_t mantissa_mask = (1u << kMantissaBits) - 1u;
  static constexpr uint32_t exponent_field_max = 0x7fu >> kMantissaBits;
  // float32 bit patterns of the thresholds, from the format's parameters:
  // the largest finite value, the smallest normal 2^(1 - bias), and half the smallest subnormal
  // 2^(1 - bias - mantissa_bits - 1).
  static constexpr uint32_t max_finite_bits = (((kMaxFiniteCode >> kMantissaBits) + 127u - kBias) << 23) |
                                              ((kMaxFiniteCode & mantissa_mask) << (23u - kMantissaBits));
  static constexpr uint32_t min_normal_bits = (128u - kBias) << 23;
  static constexpr uint32_t half_min_subnormal_bits = (127u - kBias - kMantissaBits) << 23;

  KVTUNE_HD static uint8_t encode(float f) {
    const uint32_t x = float_bits(f);
    const uint32_t sign = (x >> 24) & 0x80u;
    const uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return kFp8NaNCode;
    if (ax >= max_finite_bits) return static_cast<uint8_t>(sign | kMaxFiniteCode);  // saturate, ±inf too
    if (ax >= min_normal_bits) {
      // Rebias the exponent (127 -> kBias) in place and round the mantissa to kMantissaBits;
      // a carry out of the mantissa correctly bumps the exponent.
      const uint32_t rebased = ax - ((127u - kBias) << 23);
      const uint32_t code = round_shift_half_even(rebased, 23u - kMantissaBits);
      return static_cast<uint8_t>(sign | code);  // code <= kMaxFiniteCode: ax is below max finite
    }
    if (ax <= half_min_subnormal_bits) return static_cast<uint8_t>(sign);  // ties to even: zero
    // Subnormal: the value in units of the smallest subnormal 2^(1 - bias - mantissa_bits) is
    // mant >> shift; rounding up from the largest subnormal gives the smallest normal code.
    const uint32_t exponent = ax >> 23;  // > 127 - bias - mantissa_bits, so shift <= 24
    const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    return static_cast<uint8_t>(sign | round_shift_half_even(mant, 151u - kBias - kMantissaBits - exponent));
  }

  KVTUNE_HD static float decode(uint8_t code) {
    const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
    const uint32_t exponent = (code & 0x7fu) >> kMantissaBits;
    const uint32_t mant = code & mantissa_mask;
    if (kIeeeSpecials ? exponent == exponent_field_max : (code & 0x7fu) == 0x7fu) {
      // E5M2 ±inf, else the canonical NaN cuda_fp8.hpp uses.
      return bits_float(kIeeeSpecials && mant == 0 ? sign | 0x7f800000u : 0x7fffffffu);
    }
    if (exponent == 0) {
      if (mant == 0) return bits_float(sign);
      // Subnormal mant * 2^(1 - bias - mantissa_bits): normalise around its leading bit p.
      uint32_t p = 0;
      while ((mant >> (p + 1u)) != 0) ++p;
      const uint32_t f32_exponent = p + 128u - kBias - kMantissaBits;
      return bits_float(sign | (f32_exponent << 23) | ((mant ^ (1u << p)) << (23u - p)));
    }
    return bits_float(sign | ((exponent + 127u - kBias) << 23) | (mant << (23u - kMantissaBits)));
  }
};

// E4M3: 4 exponent bits, bias 7, 3 mantissa bits, max finite code 0x7e (448), no infinities.
using E4M3 = Format<3u, 7u, 0x7eu, false>;
// E5M2: 5 exponent bits, bias 15, 2 mantissa bits, max finite code 0x7b (57344), IEEE inf/NaN.
using E5M2 = Format<2u, 15u, 0x7bu, true>;

}  // namespace fp8_detail

KVTUNE_HD uint8_t f32_to_fp8_e4m3(float f) { return fp8_detail::E4M3::encode(f); }
KVTUNE_HD uint8_t f32_to_fp8_e5m2(float f) { return fp8_detail::E5M2::encode(f); }
KVTUNE_HD float fp8_e4m3_to_f32(uint8_t code) { return fp8_detail::E4M3::decode(code); }
KVTUNE_HD float fp8_e5m2_to_f32(uint8_t code) { return fp8_detail::E5M2::decode(code); }

KVTUNE_HD uint8_t f32_to_fp8(float f, Fp8Format format) {
  return format == Fp8Format::e4m3 ? f32_to_fp8_e4m3(f) : f32_to_fp8_e5m2(f);
}

KVTUNE_HD float fp8_to_f32(uint8_t code, Fp8Format format) {
  return format == Fp8Format::e4m3 ? fp8_e4m3_to_f32(code) : fp8_e5m2_to_f32(code);
}

KVTUNE_HD float fp8_max_finite(Fp8Format format) {
  return format == Fp8Format::e4m3 ? kFp8E4M3MaxFinite : kFp8E5M2MaxFinite;
}

// The scale that maps a group's absolute maximum onto the largest finite value (what vLLM's
// calculated k_scale/v_scale and its per-token-head dynamic modes use). An all-zero group, or one
// so small that the division underflows to 0, gets 1: any scale reproduces it, and a scale is
// never 0, so quantizing never divides by zero.
KVTUNE_HD float fp8_fit_scale(float amax, Fp8Format format) {
  const float s = amax / fp8_max_finite(format);
  return s > 0.0f ? s : 1.0f;
}

KVTUNE_HD uint8_t fp8_quantize(float x, float scale, Fp8Format format) { return f32_to_fp8(x / scale, format); }

KVTUNE_HD float fp8_dequantize(uint8_t code, float scale, Fp8Format format) { return fp8_to_f32(code, format) * scale; }

}  // namespace kvtune::codec
