#include "microscale_kernels.h"

#include <cstdint>

#include "kvtune/codecs/microscale.h"
#include "kvtune/numeric/bits.h"
#include "kvtune/numeric/multiversion.h"
#include "fp8/fp8_kernels.h"
#include "kvtune/numeric/cpu_features.h"
#include "grid_rounding.h"
#include "lane_reductions.h"
#include "prefetch.h"
#include "x86_intrinsics.h"

namespace kvtune::builtin::microscale_kernels {
namespace {

// One block of B floats (abs_max_bits, with the block length known at compile time).
template <int B>
inline float abs_max_of(const float* x) {
  return abs_max_bits(x, B);
}

// MX scales are powers of two, so their blocks multiply by the exact reciprocal (the same bits);
// nvfp4's E4M3 scales divide.
template <int B, bool TiesAway>
inline void e2m1_block(const float* x, float scale, float* y) {
  if (const float r = exact_reciprocal(scale); r != 0.0f) {
    for (int j = 0; j < B; ++j) y[j] = codec::e2m1_round<TiesAway>(x[j] * r) * scale;
    return;
  }
  for (int j = 0; j < B; ++j) {
    const float v = scale > 0.0f ? x[j] / scale : 0.0f;
    y[j] = codec::e2m1_round<TiesAway>(v) * scale;
  }
}

// One multiversioned function per block size (target_clones does not apply to templates), each
// with its block loop inlined.
#define KVTUNE_MICRO_LOOPS(B)                                                                                  \
  KVTUNE_MULTIVERSION void abs_max_blocks_##B(const float* x, int64_t blocks, float* amax) {                   \
    for (int64_t k = 0; k < blocks; ++k) amax[k] = abs_max_of<B>(x + k * B);                                   \
  }                                                                                                            \
  KVTUNE_MULTIVERSION void e2m1_blocks_##B(const float* x, const float* scale, int64_t blocks, bool ties_away, \
                                           float* y) {                                                         \
    for (int64_t k = 0; k < blocks; ++k) {                                                                     \
      if (ties_away) {                                                                                         \
        e2m1_block<B, true>(x + k * B, scale[k], y + k * B);                                                   \
      } else {                                                                                                 \
        e2m1_block<B, false>(x + k * B, scale[k], y + k * B);                                                  \
      }                                                                                                        \
    }                                                                                                          \
  }
KVTUNE_MICRO_LOOPS(16)
KVTUNE_MICRO_LOOPS(32)
#undef KVTUNE_MICRO_LOOPS

#if KVTUNE_X86_INTRINSICS

// codec::e2m1_round(x / s) * s, ties to even, for a normal power-of-two scale s <= 2^100 (so that
// the constants stay finite), without the two products: x / s is then exact (or below 2^-126, where
// both give zero), so the round trip is |x| rounded to the E2M1 grid (one mantissa bit, from 1 to 6)
// times s; a NaN gives +6s, as the codec's +6 times s.
KVTUNE_AVX512 inline __m512 e2m1_scaled_even16(__m512 x, float s) {
  return round_to_scaled_grid16<1>(x, _mm512_castps_si512(_mm512_set1_ps(s)), _mm512_set1_ps(6.0f * s));
}

// codec::e2m1_round on sixteen lanes, without its seven comparisons. Above 6 it saturates
// (infinities too); a NaN gives +6, as the codec's.
// Ties to even: e2m1_scaled_even16 through a scale of 1.
// Ties away (nvfp4's option): the grid's step is 1/2 below 2, 1 below 4 and 2 above, so |v| times
// 2, 1 or 1/2 (exact) is rounded half away from zero, from the exact fraction t - trunc(t), and
// scaled back.
template <bool TiesAway>
KVTUNE_AVX512 inline __m512 e2m1_round16(__m512 v) {
  if constexpr (!TiesAway) {
    return e2m1_scaled_even16(v, 1.0f);
  }
  const __m512 a = _mm512_abs_ps(v);
  const __mmask16 below2 = _mm512_cmp_ps_mask(a, _mm512_set1_ps(2.0f), _CMP_LT_OQ);
  const __mmask16 below4 = _mm512_cmp_ps_mask(a, _mm512_set1_ps(4.0f), _CMP_LT_OQ);
  const __m512 up = _mm512_mask_blend_ps(below2, _mm512_mask_blend_ps(below4, _mm512_set1_ps(0.5f), _mm512_set1_ps(1.0f)),
                                         _mm512_set1_ps(2.0f));
  const __m512 down = _mm512_mask_blend_ps(below2, _mm512_mask_blend_ps(below4, _mm512_set1_ps(2.0f), _mm512_set1_ps(1.0f)),
                                           _mm512_set1_ps(0.5f));
  const __m512 t = _mm512_mul_ps(a, up);
  // half away from zero, from the exact fraction t - trunc(t)
  const __m512 whole = _mm512_roundscale_ps(t, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __mmask16 half = _mm512_cmp_ps_mask(_mm512_sub_ps(t, whole), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512 level = _mm512_mask_add_ps(whole, half, whole, _mm512_set1_ps(1.0f));
  const __m512 mag = _mm512_min_ps(_mm512_mul_ps(level, down), _mm512_set1_ps(6.0f));
  const __m512 sign = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(int(0x80000000u))));
  const __m512 signed_mag = _mm512_or_ps(mag, sign);
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), signed_mag, _mm512_set1_ps(6.0f));
}

// e2m1_block's arithmetic sixteen lanes at a time (B = 16 or 32); ties to even through a power-of-two
// scale up to 2^100 (exact_reciprocal's powers of two are normal) by e2m1_scaled_even16.
template <int B, bool TiesAway>
KVTUNE_AVX512 void e2m1_blocks_avx512(const float* x, const float* scale, int64_t blocks, float* y, int64_t ahead) {
  for (int64_t k = 0; k < blocks; ++k) {
    if (k < ahead) prefetch_floats(x + (blocks + k) * B, B);  // both lines of a 32-float block
    const float s = scale[k], r = exact_reciprocal(s);
    const __m512 sv = _mm512_set1_ps(s), rv = _mm512_set1_ps(r);
    if (!TiesAway && r != 0.0f && s <= 0x1p100f) {
      for (int j = 0; j < B; j += 16) _mm512_storeu_ps(y + k * B + j, e2m1_scaled_even16(_mm512_loadu_ps(x + k * B + j), s));
      continue;
    }
    for (int j = 0; j < B; j += 16) {
      const __m512 xv = _mm512_loadu_ps(x + k * B + j);
      const __m512 v = r != 0.0f ? _mm512_mul_ps(xv, rv)
                                 : (s > 0.0f ? _mm512_div_ps(xv, sv) : _mm512_setzero_ps());
      _mm512_storeu_ps(y + k * B + j, _mm512_mul_ps(e2m1_round16<TiesAway>(v), sv));
    }
  }
}

// abs_max_blocks_B sixteen blocks at a time: each block's |x| bits folded to one vector, then one
// reduction for the sixteen. NaN's bits lie above infinity's, so a block holding a NaN shows a
// maximum above 0x7f800000 and is scanned again by abs_max_bits, which skips NaN.
template <int B>
KVTUNE_AVX512 void abs_max_blocks_avx512(const float* x, int64_t blocks, float* amax) {
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
  int64_t k0 = 0;
  for (; k0 + 16 <= blocks; k0 += 16) {
    __m512i m[16];
    for (int k = 0; k < 16; ++k) {
      const float* block = x + (k0 + k) * B;
      m[k] = _mm512_and_si512(_mm512_loadu_si512(block), magnitude);
      for (int j = 16; j < B; j += 16) m[k] = _mm512_max_epu32(m[k], _mm512_and_si512(_mm512_loadu_si512(block + j), magnitude));
    }
    const __m512i top = lanes_max16(m);
    _mm512_storeu_si512(amax + k0, top);
    if (_mm512_cmpgt_epu32_mask(top, _mm512_set1_epi32(0x7f800000)) != 0) {
      for (int k = 0; k < 16; ++k) amax[k0 + k] = abs_max_of<B>(x + (k0 + k) * B);
    }
  }
  for (; k0 < blocks; ++k0) amax[k0] = abs_max_of<B>(x + k0 * B);
}
#endif

KVTUNE_MULTIVERSION void mx_scales(float* amax, int64_t blocks, float element_max) {
  for (int64_t k = 0; k < blocks; ++k) amax[k] = codec::e8m0_up_value(amax[k] / element_max);
}

// The E4M3 block codes' values through the fp8 family's branch-free codec (a scale of 1 leaves
// x / 1 = x), then times the tensor scale.
void nvfp4_scales(float* amax, int64_t blocks, float global) {
  for (int64_t k = 0; k < blocks; ++k) amax[k] = amax[k] / codec::kE2M1MaxFinite / global;
  fp8_kernels::roundtrip(amax, 1.0f, amax, blocks, codec::Fp8Format::e4m3);
  for (int64_t k = 0; k < blocks; ++k) amax[k] = amax[k] * global;
}

}  // namespace

void scales_from_amax(float* amax, int64_t blocks, float element_max, float nvfp4_global) {
  if (nvfp4_global > 0.0f) return nvfp4_scales(amax, blocks, nvfp4_global);
  mx_scales(amax, blocks, element_max);
}

void block_abs_max(const float* x, int64_t blocks, int64_t block, float* amax) {
#if KVTUNE_X86_INTRINSICS
  if (cpu_has_avx512()) {
    return block == 16 ? abs_max_blocks_avx512<16>(x, blocks, amax) : abs_max_blocks_avx512<32>(x, blocks, amax);
  }
#endif
  if (block == 16) return abs_max_blocks_16(x, blocks, amax);
  abs_max_blocks_32(x, blocks, amax);
}

void e2m1_roundtrip(const float* x, const float* scale, int64_t blocks, int64_t block, bool ties_away, float* y,
                    int64_t ahead) {
#if KVTUNE_X86_INTRINSICS
  if (cpu_has_avx512()) {
    if (block == 16) {
      return ties_away ? e2m1_blocks_avx512<16, true>(x, scale, blocks, y, ahead)
                       : e2m1_blocks_avx512<16, false>(x, scale, blocks, y, ahead);
    }
    return ties_away ? e2m1_blocks_avx512<32, true>(x, scale, blocks, y, ahead)
                     : e2m1_blocks_avx512<32, false>(x, scale, blocks, y, ahead);
  }
#endif
  (void)ahead;
  if (block == 16) return e2m1_blocks_16(x, scale, blocks, ties_away, y);
  e2m1_blocks_32(x, scale, blocks, ties_away, y);
}

}  // namespace kvtune::builtin::microscale_kernels
