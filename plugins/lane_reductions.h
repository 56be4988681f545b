// Reductions across the lanes of sixteen AVX-512 vectors at once, shared by the codecs' explicit
// vector paths (microscale block maxima, int per-token groups).
#pragma once

#include "x86_intrinsics.h"

namespace kvtune::builtin {

#if KVTUNE_X86_INTRINSICS
// Lane k = the unsigned maximum of m[k]'s sixteen lanes: four rounds that each halve the vectors,
// pairing 32-bit lanes, then 64-bit lanes, then 128-bit lanes twice (a maximum is exact in any
// order; the last round leaves block k in lane k).
KVTUNE_AVX512 inline __m512i lanes_max16(const __m512i (&m)[16]) {
  __m512i a[8], b[4], c[2];
  for (int i = 0; i < 8; ++i) {
    a[i] = _mm512_max_epu32(_mm512_unpacklo_epi32(m[2 * i], m[2 * i + 1]), _mm512_unpackhi_epi32(m[2 * i], m[2 * i + 1]));
  }
  for (int i = 0; i < 4; ++i) {
    b[i] = _mm512_max_epu32(_mm512_unpacklo_epi64(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_epi64(a[2 * i], a[2 * i + 1]));
  }
  for (int i = 0; i < 2; ++i) {
    c[i] = _mm512_max_epu32(_mm512_shuffle_i32x4(b[2 * i], b[2 * i + 1], 0x88),
                            _mm512_shuffle_i32x4(b[2 * i], b[2 * i + 1], 0xdd));
  }
  return _mm512_max_epu32(_mm512_shuffle_i32x4(c[0], c[1], 0x88), _mm512_shuffle_i32x4(c[0], c[1], 0xdd));
}
#endif

}  // namespace kvtune::builtin
