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

// codec::e2m1_round on sixteen lanes, without its seven comparisons: the scaled grid through a scale
// of 1. Above 6 it saturates (infinities too); a NaN gives +6, as the codec's.
template <bool TiesAway>
KVTUNE_AVX512 inline __m512 e2m1_round16(__m512 v) {
  return round_to_scaled_grid16<1, TiesAway>(v, _mm512_castps_si512(_mm512_set1_ps(1.0f)), _mm512_set1_ps(6.0f));
}

// exact_reciprocal on sixteen lanes: 2^-e for a normal power of two 2^e, else 0.
KVTUNE_AVX512 inline __m512 exact_reciprocal16(__m512 s) {
  const __m512i bits = _mm512_castps_si512(s), exponent = _mm512_srli_epi32(bits, 23);  // 0 unless +
  const __mmask16 power = _mm512_testn_epi32_mask(bits, _mm512_set1_epi32(0x7fffff)) &
                          _mm512_cmp_epu32_mask(_mm512_sub_epi32(exponent, _mm512_set1_epi32(1)),
                                                _mm512_set1_epi32(253), _MM_CMPINT_LE);
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(power, _mm512_sub_epi32(_mm512_set1_epi32(254), exponent), 23));
}

// How a block reaches e2m1_block's bits from its scale s > 0:
// - grid: a power of two from 2^-124 to 2^100, without the two products: x / s is then exact (or
//   below 2^-126, where both give zero), so the round trip is |x| rounded to the E2M1 grid times s,
//   round_to_scaled_grid16's (its constants, down to the half step at s / 4, stay normal and
//   finite; a NaN gives +6s, as the codec's +6 times s);
// - exact: another power of two, x times its exact reciprocal, which is x / s;
// - divide: any other s. (x times fl(1 / s), dividing only the vectors with a lane within 16 units
//   in the last place of an E2M1 boundary, gave the same bits but ran 15 % slower than the division.)
enum class BlockPath { grid, exact, divide };
constexpr float kGridMinScale = 0x1p-124f, kGridMaxScale = 0x1p100f;  // the grid path's powers of two

BlockPath block_path(float s) {
  if (exact_reciprocal(s) == 0.0f) return BlockPath::divide;
  return s >= kGridMinScale && s <= kGridMaxScale ? BlockPath::grid : BlockPath::exact;
}

// One block of B floats through its scale s > 0 (broadcast in sv) and, for the exact path, its
// reciprocal rv, sixteen lanes at a time.
template <int B, bool TiesAway>
KVTUNE_AVX512 inline void e2m1_block16s(const float* x, __m512 sv, __m512 rv, BlockPath path, float* y) {
  for (int j = 0; j < B; j += 16) {
    const __m512 xv = _mm512_loadu_ps(x + j);
    if (path == BlockPath::grid) {
      const __m512 top = _mm512_mul_ps(sv, _mm512_set1_ps(6.0f));
      _mm512_storeu_ps(y + j, round_to_scaled_grid16<1, TiesAway>(xv, _mm512_castps_si512(sv), top));
      continue;
    }
    const __m512 v = path == BlockPath::divide ? _mm512_div_ps(xv, sv) : _mm512_mul_ps(xv, rv);
    _mm512_storeu_ps(y + j, _mm512_mul_ps(e2m1_round16<TiesAway>(v), sv));
  }
}

// One block alone, from its scalar scale (a zero scale, as e2m1_block's, sends every code to 0).
template <int B, bool TiesAway>
KVTUNE_AVX512 inline void e2m1_block_alone(const float* x, float s, float* y) {
  if (!(s > 0.0f)) {  // a NaN scale (never fitted) gives NaN, as the codec's 0 * s
    for (int j = 0; j < B; j += 16) _mm512_storeu_ps(y + j, _mm512_mul_ps(_mm512_setzero_ps(), _mm512_set1_ps(s)));
    return;
  }
  e2m1_block16s<B, TiesAway>(x, _mm512_set1_ps(s), _mm512_set1_ps(exact_reciprocal(s)), block_path(s), y);
}

// Sixteen blocks k0 .. k0 + 15 by one path that needs no reciprocal. Each block's scale is broadcast
// from memory (a load: a permute from a register of sixteen took a shuffle and made the division
// path about 20 % slower).
template <int B, bool TiesAway, BlockPath Path>
KVTUNE_AVX512 inline void e2m1_group16(const float* x, const float* scale, int64_t k0, int64_t blocks, int64_t ahead,
                                       float* y) {
  static_assert(Path != BlockPath::exact);
  for (int64_t b = k0; b < k0 + 16; ++b) {
    if (b < ahead) prefetch_floats(x + (blocks + b) * B, B);  // both lines of a 32-float block
    e2m1_block16s<B, TiesAway>(x + b * B, _mm512_set1_ps(scale[b]), _mm512_setzero_ps(), Path, y + b * B);
  }
}

// e2m1_blocks_B on AVX-512 (B = 16 or 32). Sixteen blocks' scales are classified at a time: a group
// whose blocks all take the grid (MX) or whose scales are all > 0 (nvfp4: E4M3 codes, powers of two
// or not, each divided) runs without a choice per block, which the mix of nvfp4 codes that are
// powers of two and that are not would mispredict; any other group goes block by block. (A scalar
// reciprocal and choice per block had cost as much as a 16-float block's arithmetic.)
template <int B, bool TiesAway>
KVTUNE_AVX512 void e2m1_blocks_avx512(const float* x, const float* scale, int64_t blocks, float* y, int64_t ahead) {
  int64_t k0 = 0;
  for (; k0 + 16 <= blocks; k0 += 16) {
    const __m512 s16 = _mm512_loadu_ps(scale + k0);
    const __mmask16 grid = _mm512_cmp_ps_mask(exact_reciprocal16(s16), _mm512_setzero_ps(), _CMP_NEQ_UQ) &
                           _mm512_cmp_ps_mask(s16, _mm512_set1_ps(kGridMaxScale), _CMP_LE_OQ) &
                           _mm512_cmp_ps_mask(s16, _mm512_set1_ps(kGridMinScale), _CMP_GE_OQ);
    if (grid == 0xffff) {
      e2m1_group16<B, TiesAway, BlockPath::grid>(x, scale, k0, blocks, ahead, y);
    } else if (_mm512_cmp_ps_mask(s16, _mm512_setzero_ps(), _CMP_GT_OQ) == 0xffff) {
      e2m1_group16<B, TiesAway, BlockPath::divide>(x, scale, k0, blocks, ahead, y);
    } else {
      for (int64_t b = k0; b < k0 + 16; ++b) {
        if (b < ahead) prefetch_floats(x + (blocks + b) * B, B);
        e2m1_block_alone<B, TiesAway>(x + b * B, scale[b], y + b * B);
      }
    }
  }
  for (; k0 < blocks; ++k0) {
    if (k0 < ahead) prefetch_floats(x + (blocks + k0) * B, B);
    e2m1_block_alone<B, TiesAway>(x + k0 * B, scale[k0], y + k0 * B);
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
KVTUNE_MULTIVERSION void nvfp4_scales(float* amax, int64_t blocks, float global) {
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
