// Reductions across the lanes of sixteen AVX-512 vectors at once, shared by the codecs' explicit
// vector paths (microscale block maxima, int per-token groups).
#pragma once

#include "x86_intrinsics.h"

namespace kvtune::builtin {

#if KVTUNE_X86_INTRINSICS
// Lane k = op over m[k]'s sixteen lanes: four rounds that each halve the vectors, pairing 32-bit
// lanes, then 64-bit lanes, then 128-bit lanes twice (for an op exact in any order, as a maximum
// or minimum is; the last round leaves block k in lane k).
template <class Op>
KVTUNE_AVX512 inline __m512i lanes_reduce16(const __m512i (&m)[16], Op op) {
  __m512i a[8], b[4], c[2];
  for (int i = 0; i < 8; ++i) a[i] = op(_mm512_unpacklo_epi32(m[2 * i], m[2 * i + 1]), _mm512_unpackhi_epi32(m[2 * i], m[2 * i + 1]));
  for (int i = 0; i < 4; ++i) b[i] = op(_mm512_unpacklo_epi64(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_epi64(a[2 * i], a[2 * i + 1]));
  for (int i = 0; i < 2; ++i) {
    c[i] = op(_mm512_shuffle_i32x4(b[2 * i], b[2 * i + 1], 0x88), _mm512_shuffle_i32x4(b[2 * i], b[2 * i + 1], 0xdd));
  }
  return op(_mm512_shuffle_i32x4(c[0], c[1], 0x88), _mm512_shuffle_i32x4(c[0], c[1], 0xdd));
}

// The ops (function objects: a lambda's conversion to a function pointer would lack the target).
struct MaxU32 {
  KVTUNE_AVX512 __m512i operator()(__m512i a, __m512i b) const { return _mm512_max_epu32(a, b); }
};
struct MinPs {  // float minima of vectors held as integer vectors
  KVTUNE_AVX512 __m512i operator()(__m512i a, __m512i b) const {
    return _mm512_castps_si512(_mm512_min_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b)));
  }
};
struct MaxPs {
  KVTUNE_AVX512 __m512i operator()(__m512i a, __m512i b) const {
    return _mm512_castps_si512(_mm512_max_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b)));
  }
};

// The unsigned maximum (of |x| bits, for the block maxima).
KVTUNE_AVX512 inline __m512i lanes_max16(const __m512i (&m)[16]) { return lanes_reduce16(m, MaxU32{}); }

// Float minima and maxima of sixteen vectors of floats, held as integer vectors.
KVTUNE_AVX512 inline __m512 lanes_min16_ps(const __m512i (&m)[16]) { return _mm512_castsi512_ps(lanes_reduce16(m, MinPs{})); }
KVTUNE_AVX512 inline __m512 lanes_max16_ps(const __m512i (&m)[16]) { return _mm512_castsi512_ps(lanes_reduce16(m, MaxPs{})); }
#endif

}  // namespace kvtune::builtin
