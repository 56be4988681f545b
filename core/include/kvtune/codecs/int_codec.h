// Integer codec: symmetric absmax or asymmetric min/max, b = 2..8 bits, per group.
//
//   symmetric:  s = amax / (2^(b-1) - 1)          level = rne(clamp(x / s, -qmax, qmax))
//               code = level + 2^(b-1)            x' = (code - 2^(b-1)) * s
//   asymmetric: m = min, s = (max - m) / (2^b - 1) level = rne(clamp((x - m) / s, 0, 2^b - 1))
//               code = level                      x' = code * s + m
//
// s and m are first rounded to the scale dtype (m upward to the next dtype value, s one dtype step
// down when rounding would keep the group's extreme off the top code), and quantizing uses the
// stored values, so dequantize reproduces exactly what quantize meant. Clamping before rounding
// gives the same level as after (the bounds are integers) and keeps rne's |v| <= 2^22 domain.
// A zero scale (all-zero or constant block) divides by 1 instead: every level is then 0 and x' is
// 0 (symmetric) or m (asymmetric).
// Codes form a little-endian bit stream: element i occupies bits [i*b, (i+1)*b).
#pragma once

#include <cstdint>

#include "kvtune/codecs/scale_storage.h"
#include "kvtune/hd.h"
#include "kvtune/numeric/rounding.h"

namespace kvtune::codec {

KVTUNE_HD float int_sym_qmax(int bits) { return static_cast<float>((1 << (bits - 1)) - 1); }
KVTUNE_HD float int_asym_top(int bits) { return static_cast<float>((1 << bits) - 1); }
KVTUNE_HD int int_sym_offset(int bits) { return 1 << (bits - 1); }

// Rounding a scale to a coarse dtype (bf16 keeps 8 significant bits) can push the group's extreme
// below the top code; stepping the stored scale down one dtype step puts it back there (clipping it
// by less than one step). Then top * s is exact and re-quantizing the round trip recomputes the
// same scale: the codec is a projection.
KVTUNE_HD float reach_top_code(float s, float span, float top, ScaleType t) {
  // A float32 scale s = fl(span / top) gives span / s = top * (1 +- 2^-23): always the top code.
  if (t == ScaleType::f32) return s;
  if (s > 0.0f && round_half_even(span / s) < top) return next_scale_below(s, t);
  return s;
}

KVTUNE_HD float int_sym_scale(float amax, int bits, ScaleType t) {
  const float qmax = int_sym_qmax(bits);
  return reach_top_code(stored_scale(amax / qmax, t), amax, qmax, t);
}

// `m` is the stored minimum; the scale spans from it to `hi`.
KVTUNE_HD float int_asym_scale(float m, float hi, int bits, ScaleType t) {
  const float top = int_asym_top(bits);
  // A span beyond float range (values near ±3.4e38) saturates, so code * s + m stays finite.
  const float span = hi - m <= 3.402823466e38f ? hi - m : 3.402823466e38f;
  const float s = span / top;
  return reach_top_code(stored_scale(s > 0.0f ? s : 0.0f, t), hi - m, top, t);
}

KVTUNE_HD float int_divisor(float stored) { return stored > 0.0f ? stored : 1.0f; }

KVTUNE_HD float int_sym_level(float x, float divisor, float qmax) {
  return round_half_even(clamp_level(x / divisor, -qmax, qmax));
}

KVTUNE_HD float int_asym_level(float x, float m, float divisor, float top) {
  return round_half_even(clamp_level((x - m) / divisor, 0.0f, top));
}

// The integer a level stores. A NaN input's level stays NaN through the clamps, and converting NaN
// to an integer is undefined: it stores level 0, the code x86's conversion (INT_MIN, whose low bits
// are 0) and CUDA's (0) happened to give before.
KVTUNE_HD int stored_level(float level) { return level == level ? static_cast<int>(level) : 0; }

KVTUNE_HD float int_sym_value(uint32_t code, int bits, float s) {
  return static_cast<float>(static_cast<int>(code) - int_sym_offset(bits)) * s;
}

KVTUNE_HD float int_asym_value(uint32_t code, float s, float m) { return static_cast<float>(code) * s + m; }

KVTUNE_HD int64_t packed_code_bytes(int64_t elements, int bits) { return (elements * bits + 7) / 8; }

KVTUNE_HD uint32_t unpack_code(const uint8_t* codes, int64_t i, int bits) {
  const int64_t bit = i * bits;
  const int64_t byte = bit >> 3;
  const int shift = static_cast<int>(bit & 7);
  uint32_t window = codes[byte];
  if (shift + bits > 8) window |= static_cast<uint32_t>(codes[byte + 1]) << 8;
  return (window >> shift) & ((1u << bits) - 1u);
}

// Host-side writer; bytes must start zeroed.
KVTUNE_HD void pack_code(uint8_t* codes, int64_t i, int bits, uint32_t code) {
  const int64_t bit = i * bits;
  const int64_t byte = bit >> 3;
  const int shift = static_cast<int>(bit & 7);
  const uint32_t window = code << shift;
  codes[byte] = static_cast<uint8_t>(codes[byte] | (window & 0xffu));
  if (shift + bits > 8) codes[byte + 1] = static_cast<uint8_t>(codes[byte + 1] | (window >> 8));
}

}  // namespace kvtune::codec
