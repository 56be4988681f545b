// Block-scaled 4- and 8-bit floats: the element and scale codecs of MXFP4, MXFP8 (OCP Microscaling
// Formats v1.0) and NVFP4 (NVIDIA's FP4 with an E4M3 scale per 16 elements and an FP32 scale per
// tensor), and the arithmetic of one scale block.
//
//   E2M1 element  S.EE.M, bias 1: 0, 0.5, 1, 1.5, 2, 3, 4, 6 (no inf, no NaN)
//   E8M0 scale    a power of two 2^(code - 127), code 0..254; 255 is NaN
//
// f32_to_e2m1 is bit-exact with CUDA's __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest)
// (cuda_fp4.hpp): round to nearest, ties to even, magnitudes above 6 saturate to ±6, a NaN becomes
// +6 (code 0x7), a magnitude at or below 0.25 becomes a zero of its own sign.
// f32_to_e8m0_up is bit-exact with __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf)
// (cuda_fp8.hpp): the smallest power of two >= |x|, at least 2^-127 (code 0, also for zero), at
// most 2^127 (code 254, also for inf); NaN is code 255. tests/unit/microscale_test.cpp checks both
// against the toolkit's host functions.
//
// Integer-only and plain C++17, like fp8_codec.h, so the kernels compile the same source.
#pragma once

#include <cmath>
#include <cstdint>

#include "kvtune/codecs/fp8_codec.h"
#include "kvtune/hd.h"
#include "kvtune/numeric/bits.h"

namespace kvtune::codec {

inline constexpr float kE2M1MaxFinite = 6.0f;
inline constexpr uint8_t kE8M0NaNCode = 0xff;

// The magnitude of an E2M1 code's low three bits, in halves: 0, 1, 2, 3, 4, 6, 8, 12.
KVTUNE_HD float e2m1_to_f32(uint8_t code) {
  const uint32_t m = code & 0x7u;
  const uint32_t halves = m < 4u ? m : (m < 6u ? 2u * m - 4u : 4u * m - 16u);
  const float v = static_cast<float>(halves) * 0.5f;  // exact: at most 12 halves
  return (code & 0x8u) != 0 ? -v : v;
}

// Round to nearest even onto 0, 0.5, 1, 1.5, 2, 3, 4, 6. The midpoints between neighbours are
// 0.25, 0.75, 1.25, 1.75, 2.5, 3.5 and 5; at each the even code (0, 2, 2, 4, 4, 6, 6) wins, so a
// tie goes down where the lower code is even (<=) and up where the upper one is (<).
KVTUNE_HD uint8_t f32_to_e2m1(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return 0x7u;  // NaN: +6, as the CUDA host path returns
  const uint8_t sign = static_cast<uint8_t>((x >> 28) & 0x8u);
  const float a = bits_float(ax);
  uint8_t m;
  if (a <= 0.25f) {
    m = 0;
  } else if (a < 0.75f) {
    m = 1;
  } else if (a <= 1.25f) {
    m = 2;
  } else if (a < 1.75f) {
    m = 3;
  } else if (a <= 2.5f) {
    m = 4;
  } else if (a < 3.5f) {
    m = 5;
  } else if (a <= 5.0f) {
    m = 6;
  } else {
    m = 7;  // saturates, inf too
  }
  return static_cast<uint8_t>(sign | m);
}

// Round to nearest with ties away from zero onto the same values: every midpoint takes the larger
// magnitude (each bound compared with >=), as SGLang's fp4_mx_block16 quantizer picks its codes
// (kvfp4_tensor.py, cited in configs/runtimes/sglang.toml). Saturation, NaN and the zero's sign as
// f32_to_e2m1; the two differ only at |x| = 0.25, 1.25, 2.5 and 5.
KVTUNE_HD uint8_t f32_to_e2m1_ties_away(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return 0x7u;
  const uint8_t sign = static_cast<uint8_t>((x >> 28) & 0x8u);
  const float a = bits_float(ax);
  const uint8_t m = static_cast<uint8_t>((a >= 0.25f) + (a >= 0.75f) + (a >= 1.25f) + (a >= 1.75f) + (a >= 2.5f) +
                                         (a >= 3.5f) + (a >= 5.0f));
  return static_cast<uint8_t>(sign | m);
}

// e2m1_to_f32(f32_to_e2m1(v)) (or of f32_to_e2m1_ties_away) without branches, so that a loop of it
// vectorizes: the magnitude grows by each step between neighbouring values (0.5 up to 2, then 1,
// then 2) whose midpoint |v| reaches (a tie: `>` where the lower code is even, `>=` where the upper
// one is; all `>=` rounding away), each sum exact; the sign is v's, and a NaN gives +6 as
// f32_to_e2m1 does.
template <bool TiesAway>
KVTUNE_HD float e2m1_round(float v) {
  const float a = fabsf(v);
  const float mag = ((TiesAway ? a >= 0.25f : a > 0.25f) ? 0.5f : 0.0f) + (a >= 0.75f ? 0.5f : 0.0f) +
                    ((TiesAway ? a >= 1.25f : a > 1.25f) ? 0.5f : 0.0f) + (a >= 1.75f ? 0.5f : 0.0f) +
                    ((TiesAway ? a >= 2.5f : a > 2.5f) ? 1.0f : 0.0f) + (a >= 3.5f ? 1.0f : 0.0f) +
                    ((TiesAway ? a >= 5.0f : a > 5.0f) ? 2.0f : 0.0f);
  return v != v ? 6.0f : copysignf(mag, v);
}

KVTUNE_HD float e8m0_to_f32(uint8_t code) {
  if (code == kE8M0NaNCode) return bits_float(0x7fffffffu);
  if (code == 0) return bits_float(0x00400000u);  // 2^-127, a float32 subnormal
  return bits_float(static_cast<uint32_t>(code) << 23);
}

KVTUNE_HD uint8_t f32_to_e8m0_up(float f) {
  const uint32_t ax = float_bits(f) & 0x7fffffffu;
  if (ax > 0x7f800000u) return kE8M0NaNCode;
  if (ax >= 0x7f000000u) return 254;  // >= 2^127 (inf included): saturates
  const uint32_t exponent = ax >> 23, mantissa = ax & 0x7fffffu;
  if (exponent == 0) return mantissa > 0x400000u ? 1 : 0;  // subnormal: above 2^-127 rounds to 2^-126
  return static_cast<uint8_t>(exponent + (mantissa != 0 ? 1u : 0u));
}

// e8m0_to_f32(f32_to_e8m0_up(v)) for a v that is not NaN, without branches, so that a loop of it
// vectorizes: the smallest power of two >= v, at least 2^-127 (a float32 subnormal), at most 2^127.
KVTUNE_HD float e8m0_up_value(float v) {
  const uint32_t ax = float_bits(v) & 0x7fffffffu;
  const uint32_t exponent = ax >> 23, mantissa = ax & 0x7fffffu;
  // Normal: the exponent, plus one unless v is a power of two; capped at 2^127 (inf included).
  const uint32_t normal_code = exponent + (mantissa != 0u ? 1u : 0u);
  const uint32_t code = exponent == 0u ? (mantissa > 0x400000u ? 1u : 0u) : (ax >= 0x7f000000u ? 254u : normal_code);
  return bits_float(code == 0u ? 0x00400000u : code << 23);
}

// ---- one scale block -------------------------------------------------------------------------

// The element format of a block-scaled kind.
enum class MicroElement : uint8_t { e2m1, e4m3 };

KVTUNE_HD float micro_element_max(MicroElement e) { return e == MicroElement::e2m1 ? kE2M1MaxFinite : kFp8E4M3MaxFinite; }

// `ties_away` applies to E2M1 only (DeviceFormat::ties_away; E4M3 always rounds ties to even).
KVTUNE_HD uint8_t micro_element_code(float x, MicroElement e, bool ties_away = false) {
  if (e == MicroElement::e4m3) return f32_to_fp8_e4m3(x);
  return ties_away ? f32_to_e2m1_ties_away(x) : f32_to_e2m1(x);
}

KVTUNE_HD float micro_element_value(uint8_t code, MicroElement e) {
  return e == MicroElement::e2m1 ? e2m1_to_f32(code) : fp8_e4m3_to_f32(code);
}

// MX scale of a block whose largest magnitude is amax: the smallest power of two that maps amax
// into the element range, amax / max_element rounded up to a power of two (the rounding up keeps
// every element within range; the OCP spec's floor(log2(amax)) - emax would let the largest
// elements saturate).
KVTUNE_HD uint8_t mx_scale_code(float amax, MicroElement e) { return f32_to_e8m0_up(amax / micro_element_max(e)); }

// NVFP4's two levels: a float32 scale g per tensor, g = amax / (448 * 6) (1 for an all-zero tensor),
// and an E4M3 scale per 16 elements fitted relative to it, e4m3(amax_block / 6 / g). An element is
// e2m1(x / S) with S = f32(block code) * g, and decodes as f32(e2m1) * S. A runtime may fit g
// against another bound (amax / 448: current ModelOpt checkpoints): `bound` > 0 replaces 448 * 6.
KVTUNE_HD float nvfp4_global_scale(float amax, float bound = 0.0f) {
  const float g = amax / (bound > 0.0f ? bound : kFp8E4M3MaxFinite * kE2M1MaxFinite);
  return g > 0.0f ? g : 1.0f;
}

KVTUNE_HD uint8_t nvfp4_block_code(float amax_block, float global) {
  return f32_to_fp8_e4m3(amax_block / kE2M1MaxFinite / global);
}

KVTUNE_HD float nvfp4_block_scale(uint8_t block_code, float global) { return fp8_e4m3_to_f32(block_code) * global; }

// An element of a block with scale S; a zero scale (a block code that rounded to 0) stores zeros.
KVTUNE_HD uint8_t micro_quantize(float x, float scale, MicroElement e, bool ties_away = false) {
  return micro_element_code(scale > 0.0f ? x / scale : 0.0f, e, ties_away);
}

KVTUNE_HD float micro_dequantize(uint8_t code, float scale, MicroElement e) { return micro_element_value(code, e) * scale; }

}  // namespace kvtune::codec
