// round_half_even (kvtune/numeric/rounding.h) on vector lanes: adding and subtracting 1.5 * 2^23,
// the same operations, so the same bits for |v| <= 2^22 (and +0 for a rounded -0, which
// vrndscaleps would keep as -0). Shared by the int and tokenint explicit vector paths.
#pragma once

#include "x86_intrinsics.h"

namespace kvtune::builtin {

#if KVTUNE_X86_INTRINSICS
__attribute__((target("avx2"))) inline __m256 rne(__m256 v) {
  const __m256 magic = _mm256_set1_ps(12582912.0f);
  return _mm256_sub_ps(_mm256_add_ps(v, magic), magic);
}

KVTUNE_AVX512 inline __m512 rne16(__m512 v) {
  const __m512 magic = _mm512_set1_ps(12582912.0f);
  return _mm512_sub_ps(_mm512_add_ps(v, magic), magic);
}
#endif

}  // namespace kvtune::builtin
