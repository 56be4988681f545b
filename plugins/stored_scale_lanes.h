// codec::stored_scale on vector lanes: the value a scale, minimum or offset takes once stored in
// its dtype (f16 saturated to its largest finite value, then F16C's round-to-nearest-even; bf16 by
// the integer formula of f32_to_bf16_bits), for finite lanes. Shared by the int per-token groups
// and the tokenint rows' explicit vector paths.
#pragma once

#include "kvtune/device_format.h"
#include "kvtune/numeric/half.h"
#include "x86_intrinsics.h"

namespace kvtune::builtin {

#if KVTUNE_X86_INTRINSICS
KVTUNE_AVX2_F16C inline __m256 stored8(__m256 v, ScaleType t) {
  if (t == ScaleType::f16) {
    const __m256 cap = _mm256_set1_ps(kF16MaxFinite);
    v = _mm256_min_ps(_mm256_max_ps(v, _mm256_sub_ps(_mm256_setzero_ps(), cap)), cap);
    return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  if (t == ScaleType::bf16) {
    const __m256i x = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb);
    return _mm256_castsi256_ps(_mm256_and_si256(r, _mm256_set1_epi32(int(0xffff0000u))));
  }
  return v;
}

KVTUNE_AVX512_F16C inline __m512 stored16(__m512 v, ScaleType t) {
  if (t == ScaleType::f32) return v;
  const __m256 lo = stored8(_mm512_castps512_ps256(v), t), hi = stored8(_mm512_extractf32x8_ps(v, 1), t);
  return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}
#endif

}  // namespace kvtune::builtin
