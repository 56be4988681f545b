// llama.cpp's (ggml's) KV-cache block formats, byte for byte: 32 consecutive elements per block, an
// IEEE binary16 scale rounded to nearest even, and the reference quantizers ggml uses when it writes
// a quantized K/V cache (ggml/src/ggml-quants.c, quantize_row_*_ref; q8_0's x86 variant is
// ggml-cpu's AVX path). Each formula below is restated from those functions: the order of float
// operations matters for bit-exactness, and these headers compile with FMA contraction off.
//
//   type    bytes  layout                              value
//   q8_0    34     d, qs[32] (int8)                    qs * d
//   q4_0    18     d, qs[16] (nibbles)                 (q - 8) * d
//   q4_1    20     d, m, qs[16]                        q * d + m
//   q5_0    22     d, qh (u32), qs[16]                 (q - 16) * d
//   q5_1    24     d, m, qh (u32), qs[16]              q * d + m
//   iq4_nl  18     d, qs[16]                           iq4nl_value(q) * d
//
// Nibble packing: byte j holds element j in its low nibble and element j + 16 in its high nibble.
// q5 fifth bits: bit j of the little-endian qh holds element j's, bit j + 16 element (j + 16)'s.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kvtune/hd.h"
#include "kvtune/numeric/half.h"
#include "kvtune/numeric/rounding.h"

namespace kvtune::ggml {

inline constexpr int kBlock = 32;  // QK8_0 = QK4_0 = QK4_1 = QK5_0 = QK5_1 = QK4_NL (ggml-common.h)

// Bytes per block, sizeof(block_*) in ggml-common.h.
inline constexpr int kQ8_0Bytes = 2 + 32;
inline constexpr int kQ4_0Bytes = 2 + 16;
inline constexpr int kQ4_1Bytes = 4 + 16;
inline constexpr int kQ5_0Bytes = 2 + 4 + 16;
inline constexpr int kQ5_1Bytes = 4 + 4 + 16;
inline constexpr int kIq4nlBytes = 2 + 16;
inline constexpr int kMaxBlockBytes = kQ8_0Bytes;

// The iq4_nl codebook (ggml-common.h, kvalues_iq4nl). A function rather than a namespace-scope
// array so device code can read it too.
KVTUNE_HD float iq4nl_value(int i) {
  constexpr int8_t kValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  return static_cast<float>(kValues[i]);
}

KVTUNE_HD void put_half(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16_bits(v);
  memcpy(p, &h, 2);
}

KVTUNE_HD float get_half(const uint8_t* p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return f16_bits_to_f32(h);
}

// The signed value of largest magnitude; the first one wins on equal magnitudes.
KVTUNE_HD float signed_absmax(const float* x, float& amax) {
  amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < kBlock; ++j) {
    if (amax < fabsf(x[j])) {
      amax = fabsf(x[j]);
      max = x[j];
    }
  }
  return max;
}

KVTUNE_HD void block_min_max(const float* x, float& lo, float& hi) {
  lo = 3.402823466e38f;  // FLT_MAX, as ggml starts
  hi = -3.402823466e38f;
  for (int j = 0; j < kBlock; ++j) {
    if (x[j] < lo) lo = x[j];
    if (x[j] > hi) hi = x[j];
  }
}

// float -> int as x86's cvttss2si gives it, on the host and on the device alike: toward zero, and
// INT_MIN (x86's "integer indefinite") for NaN and anything beyond int's range. C++ leaves those
// undefined and PTX's cvt saturates instead; they arise in a block so small (below about 1e-37)
// that the reciprocal of its scale overflows. The vectorized conversions give INT_MIN too.
KVTUNE_HD int truncate_to_int(float v) {
  return v >= -2147483648.0f && v < 2147483648.0f ? static_cast<int>(v) : -2147483647 - 1;
}

KVTUNE_HD void pack_nibbles(const int* q, uint8_t* qs) {
  for (int j = 0; j < kBlock / 2; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
}

KVTUNE_HD int low_nibble(const uint8_t* qs, int j) { return j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4); }

KVTUNE_HD uint32_t fifth_bits(const int* q) {
  uint32_t qh = 0;
  for (int j = 0; j < kBlock; ++j) qh |= static_cast<uint32_t>((q[j] & 0x10) >> 4) << j;
  return qh;
}

// ---- q8_0 ------------------------------------------------------------------------------------

// max |x| in eight independent lanes (the order does not change a maximum), so it vectorizes.
KVTUNE_HD float block_absmax(const float* x) {
  float lane[8];
  for (int k = 0; k < 8; ++k) lane[k] = fabsf(x[k]);
  for (int j = 8; j < kBlock; j += 8) {
    for (int k = 0; k < 8; ++k) lane[k] = fabsf(x[j + k]) > lane[k] ? fabsf(x[j + k]) : lane[k];
  }
  float amax = lane[0];
  for (int k = 1; k < 8; ++k) amax = lane[k] > amax ? lane[k] : amax;
  return amax;
}

// Reference: d = amax / 127, q = roundf(x * (1/d)) (half away from zero).
KVTUNE_HD void quantize_q8_0(const float* x, uint8_t* block) {
  const float amax = block_absmax(x);
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_half(block, d);
  for (int j = 0; j < kBlock; ++j) {
    block[2 + j] = static_cast<uint8_t>(truncate_to_int(round_half_away(x[j] * id)));
  }
}

// What ggml-cpu's x86 (AVX) path writes: id = 127 / amax, q = round half to even of x * id.
KVTUNE_HD void quantize_q8_0_x86(const float* x, uint8_t* block) {
  const float amax = block_absmax(x);
  put_half(block, amax / 127.0f);
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  for (int j = 0; j < kBlock; ++j) {
    block[2 + j] = static_cast<uint8_t>(truncate_to_int(round_half_even(x[j] * id)));
  }
}

KVTUNE_HD void dequantize_q8_0(const uint8_t* block, float* y) {
  const float d = get_half(block);
  for (int j = 0; j < kBlock; ++j) y[j] = static_cast<float>(static_cast<int8_t>(block[2 + j])) * d;
}

// ---- q4_0 / q5_0: d = (signed absmax) / -2^(b-1), q = min(2^b - 1, trunc(x/d + 2^(b-1) + 0.5)) ----

// The codes of a q4_0 / q5_0 block (`half` = 2^(b-1)); returns d.
KVTUNE_HD float signed_max_codes(const float* x, float half, int* q) {
  float amax;
  const float d = signed_absmax(x, amax) / -half;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const int top = 2 * static_cast<int>(half) - 1;
  for (int j = 0; j < kBlock; ++j) {
    const int v = truncate_to_int(x[j] * id + (half + 0.5f));
    q[j] = v < top ? v : top;
  }
  return d;
}

KVTUNE_HD void quantize_q4_0(const float* x, uint8_t* block) {
  int q[kBlock];
  put_half(block, signed_max_codes(x, 8.0f, q));
  pack_nibbles(q, block + 2);
}

KVTUNE_HD void dequantize_q4_0(const uint8_t* block, float* y) {
  const float d = get_half(block);
  for (int j = 0; j < kBlock; ++j) y[j] = static_cast<float>(low_nibble(block + 2, j) - 8) * d;
}

KVTUNE_HD void quantize_q5_0(const float* x, uint8_t* block) {
  int q[kBlock];
  put_half(block, signed_max_codes(x, 16.0f, q));
  const uint32_t qh = fifth_bits(q);
  memcpy(block + 2, &qh, 4);
  pack_nibbles(q, block + 6);
}

KVTUNE_HD void dequantize_q5_0(const uint8_t* block, float* y) {
  const float d = get_half(block);
  uint32_t qh;
  memcpy(&qh, block + 2, 4);
  for (int j = 0; j < kBlock; ++j) {
    const int q = low_nibble(block + 6, j) | static_cast<int>(((qh >> j) & 1u) << 4);
    y[j] = static_cast<float>(q - 16) * d;
  }
}

// ---- q4_1 / q5_1: d = (max - min) / (2^b - 1), m = min, q = trunc((x - min)/d + 0.5) -----------

// The codes of a q4_1 / q5_1 block; writes d and m. q4_1 clamps codes to 15; q5_1 has no clamp
// in ggml (its uint8_t conversion keeps whatever bits the value has), hence `clamp_top`.
KVTUNE_HD void min_max_codes(const float* x, float levels, bool clamp_top, int* q, float& d, float& m) {
  float hi;
  block_min_max(x, m, hi);
  d = (hi - m) / levels;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const int top = static_cast<int>(levels);
  for (int j = 0; j < kBlock; ++j) {
    const int v = truncate_to_int((x[j] - m) * id + 0.5f);
    q[j] = clamp_top ? (v < top ? v : top) : static_cast<uint8_t>(v);
  }
}

KVTUNE_HD void quantize_q4_1(const float* x, uint8_t* block) {
  int q[kBlock];
  float d, m;
  min_max_codes(x, 15.0f, true, q, d, m);
  put_half(block, d);
  put_half(block + 2, m);
  pack_nibbles(q, block + 4);
}

KVTUNE_HD void dequantize_q4_1(const uint8_t* block, float* y) {
  const float d = get_half(block), m = get_half(block + 2);
  for (int j = 0; j < kBlock; ++j) y[j] = static_cast<float>(low_nibble(block + 4, j)) * d + m;
}

KVTUNE_HD void quantize_q5_1(const float* x, uint8_t* block) {
  int q[kBlock];
  float d, m;
  min_max_codes(x, 31.0f, false, q, d, m);
  put_half(block, d);
  put_half(block + 2, m);
  const uint32_t qh = fifth_bits(q);
  memcpy(block + 4, &qh, 4);
  pack_nibbles(q, block + 8);
}

KVTUNE_HD void dequantize_q5_1(const uint8_t* block, float* y) {
  const float d = get_half(block), m = get_half(block + 2);
  uint32_t qh;
  memcpy(&qh, block + 4, 4);
  for (int j = 0; j < kBlock; ++j) {
    const int q = low_nibble(block + 8, j) | static_cast<int>(((qh >> j) & 1u) << 4);
    y[j] = static_cast<float>(q) * d + m;
  }
}

// ---- fused round trips: dequantize(quantize(x)) without packing, for fake quantization ------
// Each computes exactly the codes and f16 scales of the packed path and decodes them the same
// way, so the results are bit-identical; only the byte packing is skipped, which lets the
// per-element loops vectorize.

KVTUNE_HD void roundtrip_q8_0(const float* x, float* y, bool x86) {
  const float amax = block_absmax(x);
  const float d = round_to_f16(amax / 127.0f);
  if (x86) {
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    for (int j = 0; j < kBlock; ++j) y[j] = static_cast<float>(truncate_to_int(round_half_even(x[j] * id))) * d;
  } else {
    // Through int like the int8 code, so a rounded -0 decodes as +0 (code 0), as in ggml.
    const float d_exact = amax / 127.0f;
    const float id = d_exact != 0.0f ? 1.0f / d_exact : 0.0f;
    for (int j = 0; j < kBlock; ++j) y[j] = static_cast<float>(truncate_to_int(round_half_away(x[j] * id))) * d;
  }
}

KVTUNE_HD void roundtrip_signed_max(const float* x, float* y, float half) {
  int q[kBlock];
  const float d = round_to_f16(signed_max_codes(x, half, q));
  const int offset = static_cast<int>(half);
  for (int j = 0; j < kBlock; ++j) y[j] = static_cast<float>(q[j] - offset) * d;
}

KVTUNE_HD void roundtrip_min_max(const float* x, float* y, float levels, bool clamp_top) {
  int q[kBlock];
  float d, m;
  min_max_codes(x, levels, clamp_top, q, d, m);
  d = round_to_f16(d);
  m = round_to_f16(m);
  // q5_1 keeps only five bits of a code (qs nibble + qh bit), q4_1 four.
  const int mask = clamp_top ? 0x0f : 0x1f;
  for (int j = 0; j < kBlock; ++j) y[j] = static_cast<float>(q[j] & mask) * d + m;
}

KVTUNE_HD void roundtrip_q4_0(const float* x, float* y) { roundtrip_signed_max(x, y, 8.0f); }
KVTUNE_HD void roundtrip_q5_0(const float* x, float* y) { roundtrip_signed_max(x, y, 16.0f); }
KVTUNE_HD void roundtrip_q4_1(const float* x, float* y) { roundtrip_min_max(x, y, 15.0f, true); }
KVTUNE_HD void roundtrip_q5_1(const float* x, float* y) { roundtrip_min_max(x, y, 31.0f, false); }

// ---- iq4_nl ----------------------------------------------------------------------------------

// Index of the codebook value nearest to v, as ggml's best_index_int8 (a tie goes to the upper entry).
// ggml binary-searches for hi, the first entry above v; because the codebook is sorted, the entries
// not above v are a prefix 1..hi-1 of 1..14, so a branch-free count finds hi and sums of the
// (integer, hence exact) steps between entries give entries hi-1 and hi without a table lookup:
// the loop vectorizes. `!(v < e)` rather than `e <= v` keeps ggml's answer for NaN (15). The ends
// need no test: below entry 0 the nearer of entries 0 and 1 is 0, above entry 15 it is 15.
KVTUNE_HD int iq4nl_nearest(float v) {
  int hi = 1;
  float below = iq4nl_value(0), above = iq4nl_value(1);
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC unroll 16  // unrolled, the caller's loop over a block vectorizes
#endif
  for (int e = 1; e < 15; ++e) {
    const int up = !(v < iq4nl_value(e));
    hi += up;
    below += float(up) * (iq4nl_value(e) - iq4nl_value(e - 1));
    above += float(up) * (iq4nl_value(e + 1) - iq4nl_value(e));
  }
  return hi - int(v - below < above - v);
}

// What ggml writes into a cache (quantize_row_iq4_nl_ref, ntry = -1): d0 = signed absmax / -127,
// codes = nearest codebook entry of x / d0, then one weighted least-squares refit of the scale
// d = sum(w q x) / sum(w q q) with w = x^2, and no further search.
KVTUNE_HD void quantize_iq4_nl(const float* x, uint8_t* block) {
  float amax;
  const float max = signed_absmax(x, amax);
  int q[kBlock] = {};
  float d = 0.0f;
  if (amax >= 1e-15f) {  // GROUP_MAX_EPS in ggml-quants.c
    const float id = 1.0f / (max / iq4nl_value(0));
    for (int j = 0; j < kBlock; ++j) q[j] = iq4nl_nearest(id * x[j]);  // apart: this loop vectorizes
    float sumqx = 0.0f, sumq2 = 0.0f;
    for (int j = 0; j < kBlock; ++j) {
      const float v = iq4nl_value(q[j]);
      const float w = x[j] * x[j];
      sumqx += w * v * x[j];
      sumq2 += w * v * v;
    }
    d = sumqx / sumq2;
  }
  put_half(block, d);
  pack_nibbles(q, block + 2);
}

KVTUNE_HD void dequantize_iq4_nl(const uint8_t* block, float* y) {
  const float d = get_half(block);
  for (int j = 0; j < kBlock; ++j) y[j] = d * iq4nl_value(low_nibble(block + 2, j));
}

}  // namespace kvtune::ggml
