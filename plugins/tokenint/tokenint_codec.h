// The `tokenint` codec: one integer scale (and zero point) per token and head, with the rounding
// and zero-point conventions of serving runtimes' cache-write kernels (docs/schemes.md, `tokenint`).
// Per token row x of D channels, lo = min x, hi = max x, N = 2^b - 1, Q = 2^(b-1), R the rounding:
//
//   zero=none   s = max(max(-lo, hi) / (Q - 1), min_scale)  q = R(x / s) in [-Q, Q-1]   x' = q s
//   zero=min    s = max((hi - lo) / N, min_scale), m = lo    q = R((x - m) / s) in [0, N] x' = q s + m
//   zero=float  s as min, z = -lo / s (a float)              q = R(x / s + z) in [0, N]   x' = (q - z) s
//   zero=int    s as min, z = R(-lo / s) in [0, N]           q = R(x / s + z) in [0, N]   x' = (q - z) s
//   zero=mid    s as min, m = (lo + hi) / 2                  q = R((x - m) / s) in [-Q, Q-1] x' = q s + m
//
// All float32, one operation at a time (the build has no FMA contraction: kvtune_exact_fp). The
// codes come from s, 1/s, z and m as computed; x' from the stored ones (rounded to the scale dtype,
// or with zero_in_scale the scale with its 4 low mantissa bits cleared). Clamping comes before
// rounding: the bounds are integers and every R here is monotone, so that is R-then-clamp, and it
// keeps round_half_even's |v| <= 2^22 domain.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kvtune/codecs/int_codec.h"
#include "kvtune/codecs/scale_storage.h"
#include "kvtune/numeric/bits.h"
#include "kvtune/numeric/rounding.h"
#include "kvtune/numeric/vector_types.h"

namespace kvtune::builtin::tokenint {

enum class Zero { none, min, real, integer, mid };  // spelled none|min|float|int|mid
enum class Round { even, away, trunc, up };

struct Config {
  int bits = 8;
  Zero zero = Zero::none;
  Round round = Round::even;
  ScaleType scale = ScaleType::f32;  // the dtype the scale and the zero/minimum/midpoint are stored in
  float min_scale = 0.0f;
  bool reciprocal = false;     // codes from x * fl(1/s) instead of x / s (vLLM's Triton kernels)
  bool zero_in_scale = false;  // zero=int, b <= 4, f32: z in the scale's 4 low mantissa bits (vLLM int4)
};

constexpr bool signed_codes(Zero z) { return z == Zero::none || z == Zero::mid; }

// R(v): ties to even, ties away from zero, toward zero, or trunc(v + 0.5) (LMDeploy's
// `(v + 0.5).to(uint8)`, which rounds half up for the v >= 0 of unsigned codes). |v| <= 2^22.
inline float round_code(float v, Round r) {
  switch (r) {
    case Round::even:
      return round_half_even(v);
    case Round::away:
      return round_half_away(v);
    case Round::trunc:
      return std::trunc(v);
    case Round::up:
      return std::trunc(v + 0.5f);
  }
  return v;
}

// The code range [lo, hi] of q (signed codes are stored as q + Q).
inline float code_min(const Config& c) { return signed_codes(c.zero) ? -static_cast<float>(1 << (c.bits - 1)) : 0.0f; }
inline float code_max(const Config& c) {
  return signed_codes(c.zero) ? static_cast<float>((1 << (c.bits - 1)) - 1) : static_cast<float>((1 << c.bits) - 1);
}
inline uint32_t code_offset(const Config& c) { return signed_codes(c.zero) ? 1u << (c.bits - 1) : 0u; }

// Bytes of one token row's record: [scale][zero, minimum or midpoint][codes].
inline int64_t scale_field_bytes(const Config& c) { return codec::scale_bytes(c.scale); }
inline int64_t offset_field_bytes(const Config& c) {
  switch (c.zero) {
    case Zero::none:
      return 0;
    case Zero::integer:
      return c.zero_in_scale ? 0 : 1;
    case Zero::min:
    case Zero::real:
    case Zero::mid:
      break;
  }
  return codec::scale_bytes(c.scale);
}
inline int64_t code_field_bytes(const Config& c, int64_t head_dim) { return codec::packed_code_bytes(head_dim, c.bits); }
inline int64_t record_bytes(const Config& c, int64_t head_dim) {
  return scale_field_bytes(c) + offset_field_bytes(c) + code_field_bytes(c, head_dim);
}

// One token row's parameters: as computed (the codes use them) and as decoded.
struct RowParams {
  float s = 0.0f;       // the scale as computed
  float r = 0.0f;       // fl(1 / s) when the codes multiply by it, else 0 (divide by s)
  float offset = 0.0f;  // m (min, mid), z (float, int) as computed; 0 for none
  float s_dec = 0.0f;   // the scale dequantize reads back
  float offset_dec = 0.0f;
  uint32_t scale_word = 0;  // zero_in_scale: the stored float32 bits, (bits(s) & ~0xF) | z
  float fixed_code = -1.0f; // >= 0: a constant row, every element gets this q (see fit_row)
};

// v clamped to [lo, hi], a NaN (from a NaN element: never validated input) to lo, the lowest code, on
// every path. The comparisons are the clamp's own, so the loops vectorize as before; converting the
// NaN to an integer instead was undefined (x86 gave -2^31, and the round trip wrote -2^31 · s).
[[gnu::always_inline]] inline float clamp_code(float v, float lo, float hi) {
  v = v >= lo ? v : lo;
  return v <= hi ? v : hi;
}

// A span beyond float range (values near +-3.4e38) saturates, as the int codec does.
inline float span_of(float lo, float hi) { return hi - lo <= 3.402823466e38f ? hi - lo : 3.402823466e38f; }

// lo = min x, hi = max x of a row of d >= 1 as the sequential std::min / std::max from x[0] gives
// them (a NaN at x[0] stays, a NaN later is passed over): sixteen lanes that each start from x[0],
// so they vectorize. Only a zero extreme can differ in its sign from the sequential one (which of
// +0 and -0 comes first), and a zero scale or offset keeps that sign, so those rows take the
// sequential loop.
[[gnu::always_inline]] inline void row_extremes(const float* x, int64_t d, float& lo, float& hi) {
  using Lanes = simd::v16f;
  Lanes l = Lanes{} + x[0], h = l;
  int64_t i = 0;
  for (; i + 16 <= d; i += 16) {
    const Lanes v = *reinterpret_cast<const Lanes*>(x + i);
    l = v < l ? v : l;
    h = h < v ? v : h;
  }
  lo = l[0], hi = h[0];
  for (int k = 1; k < 16; ++k) lo = std::min(lo, l[k]), hi = std::max(hi, h[k]);
  for (; i < d; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
  if (lo != 0.0f && hi != 0.0f) return;
  lo = hi = x[0];
  for (int64_t j = 1; j < d; ++j) lo = std::min(lo, x[j]), hi = std::max(hi, x[j]);
}

[[gnu::always_inline]] inline RowParams fit_row(const float* x, int64_t d, const Config& c) {
  float lo = 0.0f, hi = 0.0f;
  row_extremes(x, d, lo, hi);
  const float n = static_cast<float>((1 << c.bits) - 1);
  const float qm1 = static_cast<float>((1 << (c.bits - 1)) - 1);
  RowParams p;
  p.s = c.zero == Zero::none ? std::max(-lo, hi) / qm1 : span_of(lo, hi) / n;
  p.s = std::max(p.s, c.min_scale);
  // A constant row with min_scale 0 has s = 0 (so does a row whose range underflows). zero=none
  // (then an all-zero row), min and mid keep s = 0 and give every element the zero code q = 0, which
  // decodes to 0 or to the stored m. zero=float and zero=int have no zero point -lo / s at s = 0:
  // they take s = |v| / N for the row's value v (of the larger magnitude) and give every element
  // the code that decodes to v, whatever the rounding: float z = -v / s, q = 0; int z = N, q = 0
  // (v < 0) or z = 0, q = N (v > 0); so x' = +-N s. An all-zero row (s still 0) is q = z = 0.
  const bool constant = p.s == 0.0f;
  float v = 0.0f;
  if (constant) {
    p.fixed_code = 0.0f;
    if (c.zero == Zero::real || c.zero == Zero::integer) {
      v = -lo >= hi ? lo : hi;
      p.s = std::fabs(v) / n;
      if (c.zero == Zero::integer && v > 0.0f && p.s > 0.0f) p.fixed_code = n;
    }
  }
  switch (c.zero) {
    case Zero::none:
      break;
    case Zero::min:
      p.offset = lo;
      break;
    case Zero::mid:
      p.offset = 0.5f * lo + 0.5f * hi;  // (lo + hi) / 2, halved first so it cannot overflow
      break;
    case Zero::real:
      p.offset = p.s > 0.0f ? -(constant ? v : lo) / p.s : 0.0f;
      break;
    case Zero::integer:  // by division even with `reciprocal`, as vLLM does
      if (constant) {
        p.offset = v < 0.0f && p.s > 0.0f ? n : 0.0f;
      } else {
        p.offset = round_code(clamp_code(-lo / p.s, 0.0f, n), c.round);  // a NaN lo (x[0]) gives 0
      }
      break;
  }
  if (c.reciprocal && p.s > 0.0f) {
    const float r = 1.0f / p.s;
    p.r = std::isfinite(r) ? r : 0.0f;  // a subnormal s (min_scale 0 only): divide instead
  }
  if (c.zero_in_scale) {
    // z is an integer in [0, 15]; a NaN row (never validated input) gives NaN, converted as 0.
    p.scale_word = (float_bits(p.s) & ~0xFu) | static_cast<uint32_t>(p.offset >= 0.0f ? p.offset : 0.0f);
    p.s_dec = bits_float(p.scale_word & ~0xFu);
  } else {
    p.s_dec = codec::stored_scale(p.s, c.scale);
  }
  p.offset_dec = c.zero == Zero::integer ? p.offset : codec::stored_scale(p.offset, c.scale);
  return p;
}

// q for one element (an integer-valued float in [code_min, code_max]; a -0 from rounding a small
// negative value is +0, as the stored code decodes).
inline float level(float x, const Config& c, const RowParams& p) {
  if (p.fixed_code >= 0.0f) return p.fixed_code;  // a constant row (fit_row)
  float v = 0.0f;
  switch (c.zero) {
    case Zero::none:
      v = p.r != 0.0f ? x * p.r : x / p.s;
      break;
    case Zero::min:
    case Zero::mid:
      v = p.r != 0.0f ? (x - p.offset) * p.r : (x - p.offset) / p.s;
      break;
    case Zero::real:
    case Zero::integer:
      v = (p.r != 0.0f ? x * p.r : x / p.s) + p.offset;
      break;
  }
  return static_cast<float>(static_cast<int32_t>(round_code(clamp_code(v, code_min(c), code_max(c)), c.round)));
}

// x' from q and the decoded parameters.
inline float value(float q, const Config& c, float s, float offset) {
  switch (c.zero) {
    case Zero::none:
      return q * s;
    case Zero::min:
    case Zero::mid:
      return q * s + offset;
    case Zero::real:
    case Zero::integer:
      return (q - offset) * s;
  }
  return 0.0f;
}

// Writes one token row's record (`rec` zeroed, record_bytes long).
inline void encode_row(const float* x, int64_t d, const Config& c, uint8_t* rec) {
  const RowParams p = fit_row(x, d, c);
  if (c.zero_in_scale) {
    std::memcpy(rec, &p.scale_word, 4);
  } else {
    codec::write_scale(rec, 0, p.s_dec, c.scale);
  }
  uint8_t* off = rec + scale_field_bytes(c);
  if (c.zero == Zero::integer && !c.zero_in_scale) {
    off[0] = static_cast<uint8_t>(p.offset);
  } else if (c.zero == Zero::min || c.zero == Zero::real || c.zero == Zero::mid) {
    codec::write_scale(off, 0, p.offset_dec, c.scale);
  }
  uint8_t* codes = off + offset_field_bytes(c);
  const uint32_t bias = code_offset(c);
  for (int64_t i = 0; i < d; ++i) {
    codec::pack_code(codes, i, c.bits, static_cast<uint32_t>(static_cast<int32_t>(level(x[i], c, p)) + int32_t(bias)));
  }
}

inline void decode_row(const uint8_t* rec, int64_t d, const Config& c, float* y) {
  float s = 0.0f, offset = 0.0f;
  if (c.zero_in_scale) {
    uint32_t word;
    std::memcpy(&word, rec, 4);
    s = bits_float(word & ~0xFu);
    offset = static_cast<float>(word & 0xFu);
  } else {
    s = codec::read_scale(rec, 0, c.scale);
  }
  const uint8_t* off = rec + scale_field_bytes(c);
  if (c.zero == Zero::integer && !c.zero_in_scale) {
    offset = static_cast<float>(off[0]);
  } else if (c.zero == Zero::min || c.zero == Zero::real || c.zero == Zero::mid) {
    offset = codec::read_scale(off, 0, c.scale);
  }
  const uint8_t* codes = off + offset_field_bytes(c);
  const int32_t bias = static_cast<int32_t>(code_offset(c));
  for (int64_t i = 0; i < d; ++i) {
    const float q = static_cast<float>(static_cast<int32_t>(codec::unpack_code(codes, i, c.bits)) - bias);
    y[i] = value(q, c, s, offset);
  }
}

// Toward zero through an int32 conversion, exact for |w| < 2^31: the float-to-int and int-to-float
// conversions vectorize (cvttps2dq, cvtdq2ps) where std::trunc became a call to truncf per element.
// A zero comes out +0; level_of's + 0 makes every zero +0 anyway. Never a NaN (clamp_code).
[[gnu::always_inline]] inline float trunc_small(float w) { return static_cast<float>(static_cast<int32_t>(w)); }

// Half away from zero for |v| <= 2^22: trunc(v + copysign(h, v)) with h = 0.5 - 2^-25, the float
// below one half. A tie k + 1/2 sums to k + 1 - 2^-25, which rounds (to nearest, at worst to even
// between 1 - 2^-24 and 1) up to k + 1; anything below k + 1/2 sums to at most k + 1 - ulp, a float,
// so it stays below k + 1. The plain v + 0.5 would take pred(0.5) = 0.49999997 up to 1.
inline constexpr float kBelowHalf = 0x1.fffffep-2f;
[[gnu::always_inline]] inline float round_away_small(float v) { return trunc_small(v + std::copysign(kBelowHalf, v)); }

// round_code for a compile-time R (the same integers, by operations that vectorize).
template <Round R>
[[gnu::always_inline]] inline float round_code_of(float v) {
  if constexpr (R == Round::even) return round_half_even(v);
  if constexpr (R == Round::away) return round_away_small(v);
  if constexpr (R == Round::trunc) return trunc_small(v);
  return trunc_small(v + 0.5f);
}

// round_code_of for v >= 0 or -0 (unsigned codes, clamped at 0): half away needs no copysign
// there; always +0 for a zero (as level()'s int conversion makes it).
template <Round R>
[[gnu::always_inline]] inline float round_nonnegative_code_of(float v) {
  if constexpr (R == Round::away) return trunc_small(v + kBelowHalf);
  return round_code_of<R>(v);  // even: (-0 + 1.5 * 2^23) - 1.5 * 2^23 = +0
}

// level() and value() with the conventions fixed at compile time (Multiply: p.r != 0), so a row's
// element loop has no branch and vectorizes: the same operations in the same order, kept apart from
// the per-element switches above, which stay the reference that quantize and dequantize run
// (tests/unit/tokenint_test.cpp compares the two on every convention). Always inlined, as fit_row
// is, so that the loops take the vector width of the caller's target (tokenint_kernels.cpp).
template <Zero Z, Round R, bool Multiply>
[[gnu::always_inline]] inline float level_of(float x, const RowParams& p, float qmin, float qmax) {
  const auto scaled = [&p](float t) { return Multiply ? t * p.r : t / p.s; };
  float v = 0.0f;
  if constexpr (Z == Zero::none) {
    v = scaled(x);
  } else if constexpr (Z == Zero::min || Z == Zero::mid) {
    v = scaled(x - p.offset);
  } else {
    v = scaled(x) + p.offset;
  }
  if constexpr (!signed_codes(Z)) return round_nonnegative_code_of<R>(clamp_code(v, 0.0f, qmax));
  // + 0 for level()'s int conversion: the rounded value is an integer of at most 255, so both only
  // turn -0 into +0, and GCC vectorizes the clamp only without a conversion after it.
  return round_code_of<R>(clamp_code(v, qmin, qmax)) + 0.0f;
}

template <Zero Z>
[[gnu::always_inline]] inline float value_of(float q, float s, float offset) {
  if constexpr (Z == Zero::none) return q * s;
  if constexpr (Z == Zero::min || Z == Zero::mid) return q * s + offset;
  return (q - offset) * s;
}

// `p` by value: a store to y could otherwise alias its fields, and they would be reloaded per element.
template <Zero Z, Round R, bool Multiply>
[[gnu::always_inline]] inline void roundtrip_elements(const float* x, int64_t d, const RowParams p, float qmin,
                                                      float qmax, float* y) {
  for (int64_t i = 0; i < d; ++i) {
    y[i] = value_of<Z>(level_of<Z, R, Multiply>(x[i], p, qmin, qmax), p.s_dec, p.offset_dec);
  }
}

template <Zero Z, Round R>
[[gnu::always_inline]] inline void roundtrip_elements(const float* x, int64_t d, const RowParams& p, float qmin,
                                                      float qmax, float* y) {
  p.r != 0.0f ? roundtrip_elements<Z, R, true>(x, d, p, qmin, qmax, y)
              : roundtrip_elements<Z, R, false>(x, d, p, qmin, qmax, y);
}

template <Zero Z>
[[gnu::always_inline]] inline void roundtrip_elements(const float* x, int64_t d, const Config& c, const RowParams& p,
                                                      float* y) {
  const float qmin = code_min(c), qmax = code_max(c);
  switch (c.round) {
    case Round::even:
      return roundtrip_elements<Z, Round::even>(x, d, p, qmin, qmax, y);
    case Round::away:
      return roundtrip_elements<Z, Round::away>(x, d, p, qmin, qmax, y);
    case Round::trunc:
      return roundtrip_elements<Z, Round::trunc>(x, d, p, qmin, qmax, y);
    case Round::up:
      return roundtrip_elements<Z, Round::up>(x, d, p, qmin, qmax, y);
  }
}

// The fused round trip of one row from its parameters (fit_row): decode_row(encode_row(x)) without
// the bytes, bit for bit. A constant row (fit_row's fixed code) decodes to one value.
[[gnu::always_inline]] inline void roundtrip_fitted_row(const float* x, int64_t d, const Config& c, const RowParams& p,
                                                        float* y) {
  if (p.fixed_code >= 0.0f) {
    std::fill(y, y + d, value(p.fixed_code, c, p.s_dec, p.offset_dec));
    return;
  }
  switch (c.zero) {
    case Zero::none:
      return roundtrip_elements<Zero::none>(x, d, c, p, y);
    case Zero::min:
      return roundtrip_elements<Zero::min>(x, d, c, p, y);
    case Zero::real:
      return roundtrip_elements<Zero::real>(x, d, c, p, y);
    case Zero::integer:
      return roundtrip_elements<Zero::integer>(x, d, c, p, y);
    case Zero::mid:
      return roundtrip_elements<Zero::mid>(x, d, c, p, y);
  }
}

}  // namespace kvtune::builtin::tokenint
