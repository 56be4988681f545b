#include "ggml_avx2.h"

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12 reports the AVX-512 intrinsics' own _mm512_undefined_* pass-through operands as maybe
// uninitialized (a known false positive inside avx512fintrin.h).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kvtune/codecs/ggml_blocks.h"
#include "kvtune/numeric/cpu_features.h"
#include "lane_reductions.h"
#include "prefetch.h"

#define KVTUNE_AVX2 __attribute__((target("avx2,f16c")))

namespace kvtune::builtin::ggml_avx2 {
namespace {

// The maxima of eight vectors, one lane each: lane b of the result is max over m[b]'s lanes. Three
// rounds of pairwise maxima; the order does not matter to a maximum.
template <class Op>
KVTUNE_AVX2 inline __m256 reduce8(const __m256 (&m)[8], Op op) {
  __m256 pair[4];
  for (int i = 0; i < 4; ++i) pair[i] = op(_mm256_unpacklo_ps(m[2 * i], m[2 * i + 1]), _mm256_unpackhi_ps(m[2 * i], m[2 * i + 1]));
  const __m256 q0 = op(_mm256_shuffle_ps(pair[0], pair[1], 0x44), _mm256_shuffle_ps(pair[0], pair[1], 0xee));
  const __m256 q1 = op(_mm256_shuffle_ps(pair[2], pair[3], 0x44), _mm256_shuffle_ps(pair[2], pair[3], 0xee));
  return op(_mm256_permute2f128_ps(q0, q1, 0x20), _mm256_permute2f128_ps(q0, q1, 0x31));
}

KVTUNE_AVX2 inline __m256 vmax(__m256 a, __m256 b) { return _mm256_max_ps(a, b); }
KVTUNE_AVX2 inline __m256 vmin(__m256 a, __m256 b) { return _mm256_min_ps(a, b); }
KVTUNE_AVX2 inline __m256 vabs(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

// round_to_f16 of eight floats: F16C's round-to-nearest-even conversion, which f32_to_f16_bits
// reproduces bit for bit (numeric/half.h).
KVTUNE_AVX2 inline __m256 f16_round(__m256 v) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// 1 / d where d != 0, else 0 (the codecs' `d != 0 ? 1 / d : 0`).
KVTUNE_AVX2 inline __m256 safe_reciprocal(__m256 d) {
  const __m256 zero = _mm256_setzero_ps();
  return _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(1.0f), d), _mm256_cmp_ps(d, zero, _CMP_NEQ_OQ));
}

// Float of int of a rounded value, as the scalar path's static_cast<float>(static_cast<int>(r)):
// exact for the codes, and -0 becomes +0.
KVTUNE_AVX2 inline __m256 through_int(__m256 r) { return _mm256_cvtepi32_ps(_mm256_cvttps_epi32(r)); }

// q8_0's levels, int(round_half_away(v)) as a float, for |v| <= 127 (1 + 2^-21) as q8_0's x / d is:
// trunc(v + copysign(0.5 - 2^-25, v)). Below 2^23, adding the float just under one half carries
// to the next integer exactly when |v|'s fraction is at least one half (a fraction of 0.5 - 2^-k
// adds to 1 - 2^-k - 2^-25, which rounds up only where the spacing exceeds 2^-k, and a float
// with that fraction has a finer spacing), and the truncating conversion keeps the sign; a NaN
// stays NaN and converts as before.
constexpr float kBelowHalf = 0x1.fffffep-2f;

KVTUNE_AVX2 inline __m256 q8_0_levels(__m256 v) {
  const __m256 nudge = _mm256_or_ps(_mm256_and_ps(v, _mm256_set1_ps(-0.0f)), _mm256_set1_ps(kBelowHalf));
  return through_int(_mm256_add_ps(v, nudge));
}


// Eight blocks' maxima of |x|, minima and maxima, or first elements of largest magnitude.
struct Extremes {
  __m256 amax, lo, hi, first_max;
};

KVTUNE_AVX2 inline void block_absmax8(const float* x, Extremes& e) {
  __m256 m[8];
  for (int b = 0; b < 8; ++b) {
    const float* p = x + b * 32;
    m[b] = vmax(vmax(vabs(_mm256_loadu_ps(p)), vabs(_mm256_loadu_ps(p + 8))),
                vmax(vabs(_mm256_loadu_ps(p + 16)), vabs(_mm256_loadu_ps(p + 24))));
  }
  e.amax = reduce8(m, vmax);
}

KVTUNE_AVX2 inline void block_min_max8(const float* x, Extremes& e) {
  __m256 lo[8], hi[8];
  for (int b = 0; b < 8; ++b) {
    const float* p = x + b * 32;
    const __m256 v0 = _mm256_loadu_ps(p), v1 = _mm256_loadu_ps(p + 8), v2 = _mm256_loadu_ps(p + 16),
                 v3 = _mm256_loadu_ps(p + 24);
    lo[b] = vmin(vmin(v0, v1), vmin(v2, v3));
    hi[b] = vmax(vmax(v0, v1), vmax(v2, v3));
  }
  e.lo = reduce8(lo, vmin);
  e.hi = reduce8(hi, vmax);
}

// Each block's first element of largest magnitude, as ggml::signed_absmax. From the minimum and
// maximum: when max > -min every element of largest magnitude is the maximum, when -min > max the
// minimum. Only a block holding both +a and -a (a tie: which comes first decides), a zero block or
// one with a NaN is left undecided, and those few take the scalar search itself.
KVTUNE_AVX2 inline void block_signed_max8(const float* x, Extremes& e) {
  block_min_max8(x, e);
  const __m256 minus_lo = _mm256_xor_ps(e.lo, _mm256_set1_ps(-0.0f));
  const __m256 hi_wins = _mm256_cmp_ps(e.hi, minus_lo, _CMP_GT_OQ), lo_wins = _mm256_cmp_ps(minus_lo, e.hi, _CMP_GT_OQ);
  e.first_max = _mm256_blendv_ps(e.lo, e.hi, hi_wins);
  const int decided = _mm256_movemask_ps(_mm256_or_ps(hi_wins, lo_wins));
  if (decided == 0xff) return;
  alignas(32) float first[8];
  _mm256_store_ps(first, e.first_max);
  for (int b = 0; b < 8; ++b) {
    float amax = 0.0f;
    if ((decided >> b & 1) == 0) first[b] = ggml::signed_absmax(x + b * 32, amax);
  }
  e.first_max = _mm256_load_ps(first);
}

// Applies `element(v, b)` to the four vectors of each of eight blocks.
template <class Element>
KVTUNE_AVX2 inline void each_vector(const float* x, float* y, Element element) {
  for (int b = 0; b < 8; ++b) {
    for (int k = 0; k < 4; ++k) _mm256_storeu_ps(y + b * 32 + 8 * k, element(_mm256_loadu_ps(x + b * 32 + 8 * k), b));
  }
}

// The element phase on AVX-512 where the CPU has it: each block's 32 elements as two vectors of 16,
// the same operations in the same order as the AVX2 lambdas below (so the same bits; the
// GgmlAvx2 tests compare with the scalar codecs on whichever path this machine takes), over N = 8
// blocks (the scales from the AVX2 reductions) or 16 (from the AVX-512 ones below).
template <int N, class Element>
KVTUNE_AVX512 inline void each_vector16(const float* x, float* y, Element element) {
  for (int b = 0; b < N; ++b) {
    for (int k = 0; k < 2; ++k) _mm512_storeu_ps(y + b * 32 + 16 * k, element(_mm512_loadu_ps(x + b * 32 + 16 * k), b));
  }
}

KVTUNE_AVX512 void q8_0_elements16(const float* x, float* y, const float* ds, const float* ids, bool x86) {
  each_vector16<8>(x, y, [&](__m512 v, int b) KVTUNE_AVX512 {
    const __m512 scaled = _mm512_mul_ps(v, _mm512_set1_ps(ids[b]));
    __m512 q;
    if (x86) {
      q = _mm512_cvtepi32_ps(_mm512_cvtps_epi32(scaled));
    } else {  // round_half_away, then through an int: as the AVX2 path's, below
      const __m512 nudge = _mm512_or_ps(_mm512_and_ps(scaled, _mm512_set1_ps(-0.0f)), _mm512_set1_ps(kBelowHalf));
      q = _mm512_cvtepi32_ps(_mm512_cvttps_epi32(_mm512_add_ps(scaled, nudge)));
    }
    return _mm512_mul_ps(q, _mm512_set1_ps(ds[b]));
  });
}

template <int N>
KVTUNE_AVX512 void signed_max_elements16(const float* x, float* y, const float* ds, const float* ids, float half) {
  const __m512i top = _mm512_set1_epi32(2 * int(half) - 1), offset = _mm512_set1_epi32(int(half));
  const __m512 bias = _mm512_set1_ps(half + 0.5f);
  each_vector16<N>(x, y, [&](__m512 v, int b) KVTUNE_AVX512 {
    const __m512i q =
        _mm512_min_epi32(_mm512_cvttps_epi32(_mm512_add_ps(_mm512_mul_ps(v, _mm512_set1_ps(ids[b])), bias)), top);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(q, offset)), _mm512_set1_ps(ds[b]));
  });
}

template <int N>
KVTUNE_AVX512 void min_max_elements16(const float* x, float* y, const float* ds, const float* ids, const float* ms,
                                      const float* lows, float levels, bool clamp_top) {
  const __m512i top = _mm512_set1_epi32(int(levels)), mask = _mm512_set1_epi32(clamp_top ? 0x0f : 0x1f);
  const __m512 half = _mm512_set1_ps(0.5f);
  each_vector16<N>(x, y, [&](__m512 v, int b) KVTUNE_AVX512 {
    const __m512 t =
        _mm512_add_ps(_mm512_mul_ps(_mm512_sub_ps(v, _mm512_set1_ps(lows[b])), _mm512_set1_ps(ids[b])), half);
    __m512i q = _mm512_cvttps_epi32(t);
    q = _mm512_and_si512(clamp_top ? _mm512_min_epi32(q, top) : q, mask);
    return _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(q), _mm512_set1_ps(ds[b])), _mm512_set1_ps(ms[b]));
  });
}

// ---- sixteen blocks at a time on AVX-512 (q4_0, q5_0, q4_1, q5_1; iq4_nl below): the scale phase
// of the eight-block functions below on sixteen lanes (the same operations in the same order), each
// block's two vectors folded first and one reduction across lanes for the sixteen. Read in one
// 2 KiB burst, they gained only with the next batch read ahead (roundtrip, below).

// Each block's minimum and maximum (lane b: block b); min and max are exact in any order, and the
// sign of a zero extreme reaches no output bit (min_max_eight, signed_max_eight).
KVTUNE_AVX512 inline void block_min_max16(const float* x, __m512& lo, __m512& hi) {
  __m512i l[16], h[16];
  for (int b = 0; b < 16; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + b * 32), v1 = _mm512_loadu_ps(x + b * 32 + 16);
    l[b] = _mm512_castps_si512(_mm512_min_ps(v0, v1));
    h[b] = _mm512_castps_si512(_mm512_max_ps(v0, v1));
  }
  lo = lanes_min16_ps(l);
  hi = lanes_max16_ps(h);
}

// Each block's first element of largest magnitude from its extremes, as block_signed_max8: the
// maximum when max > -min, the minimum when -min > max, else ggml::signed_absmax itself (a tie of
// +a and -a, a zero block, a NaN extreme).
KVTUNE_AVX512 inline __m512 first_of_largest16(const float* x, __m512 lo, __m512 hi) {
  const __m512 minus_lo = _mm512_xor_ps(lo, _mm512_set1_ps(-0.0f));
  const __mmask16 hi_wins = _mm512_cmp_ps_mask(hi, minus_lo, _CMP_GT_OQ), lo_wins = _mm512_cmp_ps_mask(minus_lo, hi, _CMP_GT_OQ);
  const __m512 first_max = _mm512_mask_blend_ps(hi_wins, lo, hi);
  const unsigned decided = _cvtmask16_u32(_kor_mask16(hi_wins, lo_wins));
  if (decided == 0xffff) return first_max;
  alignas(64) float first[16];
  _mm512_store_ps(first, first_max);
  for (int b = 0; b < 16; ++b) {
    float amax = 0.0f;
    if ((decided >> b & 1) == 0) first[b] = ggml::signed_absmax(x + b * 32, amax);
  }
  return _mm512_load_ps(first);
}

KVTUNE_AVX512 inline __m512 f16_round16(__m512 v) {
  return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

KVTUNE_AVX512 inline __m512 safe_reciprocal16(__m512 d) {
  return _mm512_maskz_div_ps(_mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_NEQ_OQ), _mm512_set1_ps(1.0f), d);
}

KVTUNE_AVX512 void signed_max_sixteen(const float* x, float* y, float half) {
  __m512 lo, hi;
  block_min_max16(x, lo, hi);
  const __m512 d_exact = _mm512_div_ps(first_of_largest16(x, lo, hi), _mm512_set1_ps(-half));
  alignas(64) float ds[16], ids[16];
  _mm512_store_ps(ds, f16_round16(d_exact));
  _mm512_store_ps(ids, safe_reciprocal16(d_exact));
  signed_max_elements16<16>(x, y, ds, ids, half);
}

KVTUNE_AVX512 void min_max_sixteen(const float* x, float* y, float levels, bool clamp_top) {
  __m512 lo, hi;
  block_min_max16(x, lo, hi);
  const __m512 d_exact = _mm512_div_ps(_mm512_sub_ps(hi, lo), _mm512_set1_ps(levels));
  alignas(64) float ds[16], ids[16], ms[16], lows[16];
  _mm512_store_ps(ds, f16_round16(d_exact));
  _mm512_store_ps(ids, safe_reciprocal16(d_exact));
  _mm512_store_ps(ms, f16_round16(lo));
  _mm512_store_ps(lows, lo);
  min_max_elements16<16>(x, y, ds, ids, ms, lows, levels, clamp_top);
}

KVTUNE_AVX2 void q8_0_eight(const float* x, float* y, bool x86) {
  Extremes e;
  block_absmax8(x, e);
  const __m256 d_exact = _mm256_div_ps(e.amax, _mm256_set1_ps(127.0f));
  const __m256 d = f16_round(d_exact);
  const __m256 id = x86 ? _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(127.0f), e.amax),
                                        _mm256_cmp_ps(e.amax, _mm256_setzero_ps(), _CMP_NEQ_OQ))
                        : safe_reciprocal(d_exact);
  alignas(32) float ds[8], ids[8];
  _mm256_store_ps(ds, d);
  _mm256_store_ps(ids, id);
  if (cpu_has_avx512()) return q8_0_elements16(x, y, ds, ids, x86);
  each_vector(x, y, [&](__m256 v, int b) KVTUNE_AVX2 {
    const __m256 scaled = _mm256_mul_ps(v, _mm256_set1_ps(ids[b]));
    // The x86 variant rounds half to even: the conversion's own rounding (MXCSR's default).
    const __m256 q = x86 ? _mm256_cvtepi32_ps(_mm256_cvtps_epi32(scaled)) : q8_0_levels(scaled);
    return _mm256_mul_ps(q, _mm256_set1_ps(ds[b]));
  });
}

// q4_0 (half 8) and q5_0 (half 16): d = signed max / -half, q = min(2 half - 1, trunc(x / d + half + 0.5)).
KVTUNE_AVX2 void signed_max_eight(const float* x, float* y, float half) {
  Extremes e;
  block_signed_max8(x, e);
  const __m256 d_exact = _mm256_div_ps(e.first_max, _mm256_set1_ps(-half));
  alignas(32) float ds[8], ids[8];
  _mm256_store_ps(ds, f16_round(d_exact));
  _mm256_store_ps(ids, safe_reciprocal(d_exact));
  if (cpu_has_avx512()) return signed_max_elements16<8>(x, y, ds, ids, half);
  const __m256i top = _mm256_set1_epi32(2 * int(half) - 1), offset = _mm256_set1_epi32(int(half));
  const __m256 bias = _mm256_set1_ps(half + 0.5f);
  each_vector(x, y, [&](__m256 v, int b) KVTUNE_AVX2 {
    const __m256i q = _mm256_min_epi32(_mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(v, _mm256_set1_ps(ids[b])), bias)), top);
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q, offset)), _mm256_set1_ps(ds[b]));
  });
}

// q4_1 (levels 15, clamped) and q5_1 (levels 31, five bits kept): d = (max - min) / levels,
// q = trunc((x - min) / d + 0.5), y = q d + min with d and min through f16. Where the minimum or
// maximum is a zero, the reduction may keep another signed zero than the scalar loop (which keeps
// the first); no output bit depends on it: x - min and hi - min are the same nonzero values, and
// an all-zero block gives y = 0 * d + min with d = -0 only when min = +0, so y = +0 either way.
KVTUNE_AVX2 void min_max_eight(const float* x, float* y, float levels, bool clamp_top) {
  Extremes e;
  block_min_max8(x, e);
  const __m256 d_exact = _mm256_div_ps(_mm256_sub_ps(e.hi, e.lo), _mm256_set1_ps(levels));
  alignas(32) float ds[8], ids[8], ms[8], lows[8];
  _mm256_store_ps(ds, f16_round(d_exact));
  _mm256_store_ps(ids, safe_reciprocal(d_exact));
  _mm256_store_ps(ms, f16_round(e.lo));
  _mm256_store_ps(lows, e.lo);
  if (cpu_has_avx512()) return min_max_elements16<8>(x, y, ds, ids, ms, lows, levels, clamp_top);
  const __m256i top = _mm256_set1_epi32(int(levels)), mask = _mm256_set1_epi32(clamp_top ? 0x0f : 0x1f);
  const __m256 half = _mm256_set1_ps(0.5f);
  each_vector(x, y, [&](__m256 v, int b) KVTUNE_AVX2 {
    const __m256 t = _mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(v, _mm256_set1_ps(lows[b])), _mm256_set1_ps(ids[b])), half);
    __m256i q = _mm256_cvttps_epi32(t);
    q = _mm256_and_si256(clamp_top ? _mm256_min_epi32(q, top) : q, mask);
    return _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(ds[b])), _mm256_set1_ps(ms[b]));
  });
}

// The iq4_nl codebook entry of each lane's index 0..15: two eight-entry permutes, chosen by bit 3.
KVTUNE_AVX2 inline __m256 iq4nl_entry(__m256i index) {
  using ggml::iq4nl_value;
  const __m256 low = _mm256_setr_ps(iq4nl_value(0), iq4nl_value(1), iq4nl_value(2), iq4nl_value(3), iq4nl_value(4),
                                    iq4nl_value(5), iq4nl_value(6), iq4nl_value(7));
  const __m256 high = _mm256_setr_ps(iq4nl_value(8), iq4nl_value(9), iq4nl_value(10), iq4nl_value(11),
                                     iq4nl_value(12), iq4nl_value(13), iq4nl_value(14), iq4nl_value(15));
  return _mm256_blendv_ps(_mm256_permutevar8x32_ps(low, index), _mm256_permutevar8x32_ps(high, index),
                          _mm256_castsi256_ps(_mm256_slli_epi32(index, 28)));
}

// ggml::iq4nl_nearest on eight lanes: hi = 1 + the count of entries 1..14 not above v (with
// `!(v < e)`, so a NaN counts every one), then the nearer of entries hi - 1 and hi.
KVTUNE_AVX2 inline __m256i iq4nl_nearest8(__m256 v) {
  __m256i hi = _mm256_set1_epi32(1);
  for (int e = 1; e < 15; ++e) {
    const __m256 up = _mm256_cmp_ps(v, _mm256_set1_ps(ggml::iq4nl_value(e)), _CMP_NLT_UQ);
    hi = _mm256_sub_epi32(hi, _mm256_castps_si256(up));  // a true compare is -1
  }
  const __m256 below = iq4nl_entry(_mm256_sub_epi32(hi, _mm256_set1_epi32(1))), above = iq4nl_entry(hi);
  const __m256 lower = _mm256_cmp_ps(_mm256_sub_ps(v, below), _mm256_sub_ps(above, v), _CMP_LT_OQ);
  return _mm256_add_epi32(hi, _mm256_castps_si256(lower));
}

// Transposes the 8 x 8 tile of rows r[0..7] in place.
KVTUNE_AVX2 inline void transpose8(__m256 (&r)[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

// iq4_nl's codebook entries on AVX-512 with VBMI, sixteen lanes at a time, without ggml's search:
// its answer, the entry nearer to v = id · x by `v - below < above - v` on rounded differences, is
// entry i where i is the count of thresholds t[0..14] not above v, t[c] the float from which entry
// c + 1 is the nearer of c and c + 1 (each difference is monotonic in v, so the test flips once).
// Thresholds lie more than 4 apart, so a bucket [4b, 4b + 4) holds at most one: the count at the
// bucket's start (one byte of a 64-byte table, indexed by b = floor(v) >> 2's low six bits) plus
// the one compare with the next threshold. A block's own |v| <= 127 (1 + 2^-22), so b is one of
// -32 .. 31.
#define KVTUNE_AVX512_VBMI __attribute__((target("avx512f,avx512dq,avx512bw,avx512vbmi,avx2,f16c")))

KVTUNE_AVX512_VBMI inline __m512 both(__m256 low, __m256 high) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(low), high, 1);
}

struct Iq4nlThresholds {
  // t[15] = +inf: above the last threshold the count is 15, and no finite v passes its compare
  alignas(64) float t[16] = {};
  alignas(64) uint8_t bucket_counts[64] = {};
  alignas(64) float codebook[16] = {};
  Iq4nlThresholds() {
    for (int i = 0; i < 16; ++i) codebook[i] = ggml::iq4nl_value(i);
    auto key = [](float f) {  // the floats' order as int32 order (-0 and +0 alike)
      int32_t i;
      std::memcpy(&i, &f, 4);
      return i >= 0 ? i : INT32_MIN - i;
    };
    auto from_key = [](int32_t k) {
      const int32_t i = k >= 0 ? k : INT32_MIN - k;
      float f;
      std::memcpy(&f, &i, 4);
      return f;
    };
    for (int c = 0; c < 15; ++c) {  // bisection over the floats from entry c to entry c + 1
      const float below = ggml::iq4nl_value(c), above = ggml::iq4nl_value(c + 1);
      int64_t nearer = key(below), farther = key(above);  // the test holds at `below`, fails at `above`
      while (farther - nearer > 1) {
        const int64_t mid = (nearer + farther) / 2;
        const float v = from_key(int32_t(mid));
        (v - below < above - v ? nearer : farther) = mid;
      }
      t[c] = from_key(int32_t(farther));
    }
    t[15] = INFINITY;
    for (int i = 0; i < 64; ++i) {  // byte i: the bucket b with b's low six bits i
      const float start = 4.0f * float(i < 32 ? i : i - 64);
      for (int c = 0; c < 15; ++c) bucket_counts[i] += t[c] <= start;
    }
  }
};

// A NaN lane (an infinite or NaN x) gets some entry, positive (floor gives INT_MIN, bucket 0, and
// the compare is true for NaN): the block's sums are then NaN or infinite whichever positive entry
// it is, as with ggml's 113, so no output bit depends on it.
struct Iq4nlTables {
  __m512i bucket_counts;
  __m512 values, thresholds;
};

KVTUNE_AVX512_VBMI inline Iq4nlTables iq4nl_tables() {
  static const Iq4nlThresholds tables;  // built once
  return {_mm512_load_si512(tables.bucket_counts), _mm512_load_ps(tables.codebook), _mm512_load_ps(tables.t)};
}

KVTUNE_AVX512_VBMI inline __m512 iq4nl_entry16(const Iq4nlTables& t, __m512 v) {
  const __m512i bucket = _mm512_srai_epi32(_mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC), 2);
  // the count in each lane's low byte (the permutes below read only an index's low four bits)
  const __m512i count = _mm512_permutexvar_epi8(bucket, t.bucket_counts);
  const __mmask16 up = _mm512_cmp_ps_mask(v, _mm512_permutexvar_ps(count, t.thresholds), _CMP_NLT_UQ);
  return _mm512_permutexvar_ps(_mm512_mask_add_epi32(count, up, count, _mm512_set1_epi32(1)), t.values);
}

KVTUNE_AVX512_VBMI void iq4_nl_entries16(const __m256 (&xt)[4][8], __m256 id, __m256 tiny, __m256 (&entries)[4][8]) {
  const Iq4nlTables tables = iq4nl_tables();
  const __m512 ids = both(id, id);
  const __mmask16 small = _mm512_movepi32_mask(_mm512_castps_si512(both(tiny, tiny)));
  for (int j = 0; j < 32; j += 2) {
    const __m512 v = _mm512_mul_ps(ids, both(xt[j / 8][j % 8], xt[j / 8][j % 8 + 1]));
    // blocks below GROUP_MAX_EPS keep code 0, entry -127 (their d = 0 times it is -0)
    const __m512 entry = _mm512_mask_blend_ps(small, iq4nl_entry16(tables, v), _mm512_set1_ps(-127.0f));
    entries[j / 8][j % 8] = _mm512_castps512_ps256(entry);
    entries[j / 8][j % 8 + 1] = _mm512_extractf32x8_ps(entry, 1);
  }
}

// iq4_nl (ggml::quantize_iq4_nl, then dequantize): one block per lane. Element j of the eight
// blocks is one vector (the blocks transposed eight elements at a time), so the refit's sums run
// in element order in every lane, as the scalar loop's.
KVTUNE_AVX2 void iq4_nl_eight(const float* x, float* y) {
  Extremes e;
  block_signed_max8(x, e);
  const __m256 amax = vabs(e.first_max);
  // Blocks below ggml's GROUP_MAX_EPS store d = 0 and every code 0 (entry -127).
  const __m256 tiny = _mm256_cmp_ps(amax, _mm256_set1_ps(1e-15f), _CMP_NGE_UQ);
  const __m256 id = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_div_ps(e.first_max, _mm256_set1_ps(-127.0f)));
  __m256 xt[4][8];
  for (int tile = 0; tile < 4; ++tile) {
    for (int b = 0; b < 8; ++b) xt[tile][b] = _mm256_loadu_ps(x + b * 32 + tile * 8);
    transpose8(xt[tile]);
  }
  __m256 v[4][8];
  if (cpu_has_avx512_vbmi()) {
    iq4_nl_entries16(xt, id, tiny, v);
  } else {
    for (int j = 0; j < 32; ++j) {
      v[j / 8][j % 8] = _mm256_blendv_ps(iq4nl_entry(iq4nl_nearest8(_mm256_mul_ps(id, xt[j / 8][j % 8]))),
                                         _mm256_set1_ps(-127.0f), tiny);
    }
  }
  __m256 sumqx = _mm256_setzero_ps(), sumq2 = _mm256_setzero_ps();
  for (int j = 0; j < 32; ++j) {
    const __m256 xj = xt[j / 8][j % 8];
    const __m256 entry = v[j / 8][j % 8];
    const __m256 wv = _mm256_mul_ps(_mm256_mul_ps(xj, xj), entry);
    sumqx = _mm256_add_ps(sumqx, _mm256_mul_ps(wv, xj));
    sumq2 = _mm256_add_ps(sumq2, _mm256_mul_ps(wv, entry));
  }
  const __m256 d = f16_round(_mm256_andnot_ps(tiny, _mm256_div_ps(sumqx, sumq2)));
  for (int tile = 0; tile < 4; ++tile) {
    for (int k = 0; k < 8; ++k) v[tile][k] = _mm256_mul_ps(d, v[tile][k]);
    transpose8(v[tile]);
    for (int b = 0; b < 8; ++b) _mm256_storeu_ps(y + b * 32 + tile * 8, v[tile][b]);
  }
}

// transpose8 on each 256-bit half of eight 512-bit rows.
KVTUNE_AVX512_VBMI inline void transpose8_halves(__m512* r) {
  __m512 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
    u[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  // permute2f128's 0x20 and 0x31 in each half: 128-bit lanes (a0 b0 | a2 b2) and (a1 b1 | a3 b3)
  const __m512i first = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
  const __m512i second = _mm512_setr_epi32(4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
  for (int i = 0; i < 4; ++i) {
    r[i + 4] = _mm512_permutex2var_ps(u[i], second, u[i + 4]);
    r[i] = _mm512_permutex2var_ps(u[i], first, u[i + 4]);
  }
}

// iq4_nl_eight on sixteen blocks with AVX-512 and VBMI: lanes 0..7 are blocks 0..7 and lanes
// 8..15 blocks 8..15, each half transposed as iq4_nl_eight's eight, so every lane still sums its
// own block in element order, and one chain of 32 additions serves sixteen blocks.
KVTUNE_AVX512_VBMI void iq4_nl_sixteen(const float* x, float* y) {
  __m512 xt[32];  // element j of the sixteen blocks
  for (int tile = 0; tile < 4; ++tile) {
    for (int b = 0; b < 8; ++b) {
      xt[tile * 8 + b] = both(_mm256_loadu_ps(x + b * 32 + tile * 8), _mm256_loadu_ps(x + (b + 8) * 32 + tile * 8));
    }
    transpose8_halves(xt + tile * 8);
  }
  // Each block's extremes, the new element first: max_ps returns its second operand when either is
  // NaN, so a NaN element is passed over as ggml::signed_absmax passes it over, and only a NaN
  // first element reaches the result (and leaves the block undecided below).
  __m512 lo = xt[0], hi = xt[0];
  for (int j = 1; j < 32; ++j) {
    lo = _mm512_min_ps(xt[j], lo);
    hi = _mm512_max_ps(xt[j], hi);
  }
  const __m512 first_max = first_of_largest16(x, lo, hi);
  const __m512 amax = _mm512_abs_ps(first_max);
  const __mmask16 tiny = _mm512_cmp_ps_mask(amax, _mm512_set1_ps(1e-15f), _CMP_NGE_UQ);
  const __m512 id = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_div_ps(first_max, _mm512_set1_ps(-127.0f)));
  const Iq4nlTables tables = iq4nl_tables();
  __m512 entries[32];
  __m512 sumqx = _mm512_setzero_ps(), sumq2 = _mm512_setzero_ps();
  for (int j = 0; j < 32; ++j) {
    const __m512 xj = xt[j];
    const __m512 entry = iq4nl_entry16(tables, _mm512_mul_ps(id, xj));
    const __m512 wv = _mm512_mul_ps(_mm512_mul_ps(xj, xj), entry);
    sumqx = _mm512_add_ps(sumqx, _mm512_mul_ps(wv, xj));
    sumq2 = _mm512_add_ps(sumq2, _mm512_mul_ps(wv, entry));
    entries[j] = entry;
  }
  const __m512 d = _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_div_ps(sumqx, sumq2), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  // A block below GROUP_MAX_EPS decodes to d = 0 times code 0's -127: -0 (its sums and entries are
  // never used).
  const __m512 minus_zero = _mm512_set1_ps(-0.0f);
  for (int tile = 0; tile < 4; ++tile) {
    for (int k = 0; k < 8; ++k) entries[tile * 8 + k] = _mm512_mask_mul_ps(minus_zero, _knot_mask16(tiny), d, entries[tile * 8 + k]);
    transpose8_halves(entries + tile * 8);
    for (int b = 0; b < 8; ++b) {
      _mm256_storeu_ps(y + b * 32 + tile * 8, _mm512_castps512_ps256(entries[tile * 8 + b]));
      _mm256_storeu_ps(y + (b + 8) * 32 + tile * 8, _mm512_extractf32x8_ps(entries[tile * 8 + b], 1));
    }
  }
}

}  // namespace

bool available() { return cpu_has_avx2_f16c(); }

int64_t roundtrip(Format format, const float* x, float* y, int64_t blocks) {
  const int64_t whole = blocks - blocks % 8;
  int64_t i = 0;
  // q8_0 gained nothing from sixteen at a time (its scale phase is one reduction): eight, below.
  const bool q8 = format == Format::q8_0 || format == Format::q8_0_x86;
  if (!q8 && (format == Format::iq4_nl ? cpu_has_avx512_vbmi() : cpu_has_avx512())) {
    for (; i + 16 <= whole; i += 16) {
      const float* in = x + i * 32;
      float* out = y + i * 32;
      prefetch_floats(in + 16 * 32, 16 * 32);  // the next batch's 2 KiB, read while this one computes
      switch (format) {
        case Format::q8_0:
        case Format::q8_0_x86: break;
        case Format::q4_0: signed_max_sixteen(in, out, 8.0f); break;
        case Format::q5_0: signed_max_sixteen(in, out, 16.0f); break;
        case Format::q4_1: min_max_sixteen(in, out, 15.0f, true); break;
        case Format::q5_1: min_max_sixteen(in, out, 31.0f, false); break;
        case Format::iq4_nl: iq4_nl_sixteen(in, out); break;
      }
    }
  }
  for (; i < whole; i += 8) {
    const float* in = x + i * 32;
    float* out = y + i * 32;
    switch (format) {
      case Format::q8_0: q8_0_eight(in, out, false); break;
      case Format::q8_0_x86: q8_0_eight(in, out, true); break;
      case Format::q4_0: signed_max_eight(in, out, 8.0f); break;
      case Format::q5_0: signed_max_eight(in, out, 16.0f); break;
      case Format::q4_1: min_max_eight(in, out, 15.0f, true); break;
      case Format::q5_1: min_max_eight(in, out, 31.0f, false); break;
      case Format::iq4_nl: iq4_nl_eight(in, out); break;
    }
  }
  return whole;
}

}  // namespace kvtune::builtin::ggml_avx2

#else

namespace kvtune::builtin::ggml_avx2 {
bool available() { return false; }
int64_t roundtrip(Format, const float*, float*, int64_t) { return 0; }
}  // namespace kvtune::builtin::ggml_avx2

#endif
