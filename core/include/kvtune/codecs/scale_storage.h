// Per-group scale and minimum storage in the scale dtype a scheme names (f32, f16 or bf16),
// little-endian. Shared by the CPU codecs and the CUDA kernels.
#pragma once

#include <cstdint>
#include <cstring>

#include "kvtune/device_format.h"
#include "kvtune/hd.h"
#include "kvtune/numeric/bits.h"
#include "kvtune/numeric/half.h"

namespace kvtune::codec {

KVTUNE_HD int scale_bytes(ScaleType t) { return t == ScaleType::f32 ? 4 : 2; }

// The value a scale (or minimum) takes once stored: rounded to the dtype, saturated to the
// largest finite f16 so a huge block clips instead of dividing by infinity.
KVTUNE_HD float stored_scale(float s, ScaleType t) {
  switch (t) {
    case ScaleType::f16:
      s = s > kF16MaxFinite ? kF16MaxFinite : (s < -kF16MaxFinite ? -kF16MaxFinite : s);
      return round_to_f16(s);
    case ScaleType::bf16:
      return round_to_bf16(s);
    case ScaleType::f32:
      break;
  }
  return s;
}

// The stored minimum of an asymmetric group: the nearest dtype value at or above `lo`, so the
// group's smallest element lands exactly on code 0 and re-quantizing the round trip reproduces it.
KVTUNE_HD float stored_minimum(float lo, ScaleType t) {
  const float r = stored_scale(lo, t);
  if (t == ScaleType::f32 || r >= lo || r == kF16MaxFinite || r == -kF16MaxFinite) return r;
  uint16_t h = t == ScaleType::f16 ? f32_to_f16_bits(r) : f32_to_bf16_bits(r);
  h = (h & 0x8000u) ? (h == 0x8000u ? uint16_t(1) : uint16_t(h - 1)) : uint16_t(h + 1);  // one step up
  return t == ScaleType::f16 ? f16_bits_to_f32(h) : bf16_bits_to_f32(h);
}

// The next smaller positive value of the dtype below a stored scale `s` > 0.
KVTUNE_HD float next_scale_below(float s, ScaleType t) {
  if (t == ScaleType::f32) return bits_float(float_bits(s) - 1u);
  if (t == ScaleType::f16) return f16_bits_to_f32(static_cast<uint16_t>(f32_to_f16_bits(s) - 1u));
  return bf16_bits_to_f32(static_cast<uint16_t>(f32_to_bf16_bits(s) - 1u));
}

// `s` must already be a stored_scale value, so writing it is exact.
KVTUNE_HD void write_scale(uint8_t* base, int64_t index, float s, ScaleType t) {
  if (t == ScaleType::f32) {
    memcpy(base + 4 * index, &s, 4);
    return;
  }
  const uint16_t h = t == ScaleType::f16 ? f32_to_f16_bits(s) : f32_to_bf16_bits(s);
  memcpy(base + 2 * index, &h, 2);
}

KVTUNE_HD float read_scale(const uint8_t* base, int64_t index, ScaleType t) {
  if (t == ScaleType::f32) {
    float s;
    memcpy(&s, base + 4 * index, 4);
    return s;
  }
  uint16_t h;
  memcpy(&h, base + 2 * index, 2);
  return t == ScaleType::f16 ? f16_bits_to_f32(h) : bf16_bits_to_f32(h);
}

}  // namespace kvtune::codec
