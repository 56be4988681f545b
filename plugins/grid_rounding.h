// Rounding to a float grid through a power-of-two scale without multiplying by it, shared by the
// fp8 blocks (mxfp8) and the E2M1 blocks (mxfp4, nvfp4).
#pragma once

#include <cstdint>

#include "x86_intrinsics.h"

namespace kvtune::builtin {

#if KVTUNE_X86_INTRINSICS
// |x| rounded half to even to the floats with M mantissa bits between `lo` and `top` (the grid of
// a format with M mantissa bits times a power-of-two scale s: `lo` holds the bits of its smallest
// normal value times s, `top` its largest finite value times s), with x's sign. The step is 2^-M
// times the power of two of |x|'s binade, that binade clamped to lo's and top's (below lo the
// subnormal step, above top the same step as top's); adding and subtracting 1.5 * 2^(23 - M) times
// it rounds to it under the default rounding mode, and the min with top saturates (infinities too;
// top lies on the grid and the sum is monotone). A NaN lane gives +top (min returns its second
// operand), without the sign. Every constant must stay normal and finite: the callers bound s.
// TiesAway: half away from zero instead, floor(|x| / step + 1/2) steps: one FMA rounding down adds
// |x| to the magic number plus half a step, which is 1.5 * 2^24 + 1 = 25 * 1006633 half steps (both
// factors exact floats, so the sum is rounded once, within the magic number's binade, whose unit is
// the step), and the magic number is subtracted as before. (It replaced a test for an exact tie the
// even rounding took down and a step up: four instructions fewer.)
template <int M, bool TiesAway = false>
KVTUNE_AVX512 inline __m512 round_to_scaled_grid16(__m512 x, __m512i lo, __m512 top) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i ax = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __m512i binade = _mm512_and_si512(_mm512_min_epu32(_mm512_max_epu32(ax, lo), _mm512_castps_si512(top)),
                                          _mm512_set1_epi32(0x7f800000));
  const __m512 magic = _mm512_castsi512_ps(_mm512_add_epi32(binade, _mm512_set1_epi32(((23 - M) << 23) + 0x400000)));
  __m512 rounded;
  if constexpr (TiesAway) {
    // 1006633 half steps: 1006633.0f's bits (0x4975c290) plus the half step's exponent, binade - (M + 1).
    constexpr int kHalfSteps = int(0x4975c290u) - 0x3f800000 - ((M + 1) << 23);
    const __m512 halves = _mm512_castsi512_ps(_mm512_add_epi32(binade, _mm512_set1_epi32(kHalfSteps)));
    const __m512 up = _mm512_fmadd_round_ps(_mm512_set1_ps(25.0f), halves, _mm512_castsi512_ps(ax),
                                            _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    rounded = _mm512_sub_ps(up, magic);
  } else {
    rounded = _mm512_sub_ps(_mm512_add_ps(_mm512_castsi512_ps(ax), magic), magic);
  }
  const __m512 mag = _mm512_min_ps(rounded, top);
  return _mm512_castsi512_ps(_mm512_mask_ternarylogic_epi32(_mm512_castps_si512(mag), _mm512_cmp_ps_mask(x, x, _CMP_ORD_Q),
                                                            u, _mm512_set1_epi32(int(0x80000000u)),
                                                            0xf8));  // mag | (u & sign)
}
#endif

}  // namespace kvtune::builtin
