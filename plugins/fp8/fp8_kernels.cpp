#include "fp8_kernels.h"

#include "kvtune/numeric/multiversion.h"

#include <algorithm>
#include <bit>
#include <limits>

#include "kvtune/numeric/bits.h"
#include "kvtune/numeric/cpu_features.h"

#include "grid_rounding.h"
#include "prefetch.h"
#include "x86_intrinsics.h"


namespace kvtune::builtin::fp8_kernels {
namespace {

using codec::Fp8Format;

// One format's conversion written with selects only, so GCC vectorizes the loops below; the
// codec's encode branches on the range of |x| and its decode on the code's class, which on real
// data mispredicts and never vectorizes. Every constant comes from the codec's Format, so both
// agree by construction on the thresholds.
//
// Why it equals the codec, range by range of ax = |x| bits:
//   NaN: the codec gives the canonical NaN code, decoded as 0x7fffffff.
//   ax >= max finite (±inf too): ± the largest finite value.
//   min normal <= ax < max finite: the codec rebiases the exponent and rounds the low 23 - M bits
//     half to even, so a carry bumps the exponent; doing the same rounding on the float bits
//     themselves gives exactly the bits its decode rebuilds (the rebias cancels).
//   ax < min normal: the result is k * q with q = 2^(1 - bias - M) the smallest subnormal and k the
//     nearest integer (ties to even) to |x| / q, in [0, 2^M]; k = 2^M is the smallest normal, as in
//     the codec. |x| / q is an exact power-of-two scaling below 2^M <= 2^3, where adding and
//     subtracting 1.5 * 2^23 rounds to an integer half to even under the default rounding mode
//     (numeric/rounding.h), and k * q is exact; k = 0 keeps the sign, like the codec's signed zero.
template <class F, Fp8Format kFormat, uint32_t kMantissaBits, uint32_t kBias>
struct Fast {
  using Codec = F;  // the codec's format constants
  static constexpr Fp8Format format = kFormat;
  static constexpr uint32_t shift = 23u - kMantissaBits;
  static constexpr uint32_t rebias = (127u - kBias) << 23;
  static constexpr uint32_t max_code = (F::max_finite_bits - rebias) >> shift;
  static constexpr float magic = 12582912.0f;  // 1.5 * 2^23
  // 1 / q and q as floats: 2^(bias + M - 1) and 2^(1 - bias - M), both normal float32 values.
  static constexpr float up = std::bit_cast<float>((127u + kBias + kMantissaBits - 1u) << 23);
  static constexpr float down = std::bit_cast<float>((128u - kBias - kMantissaBits) << 23);

  // |x| rounded to the format's grid below the saturation and NaN checks: float bits, and the
  // magnitude code they stand for. Either may be garbage where the callers' selects discard it.
  struct Rounded {
    uint32_t bits;
    uint32_t code;
  };

  // All ones where c holds, else zero, and a select by such a mask. Plain `c ? a : b` lets GCC
  // sink the float operations of the subnormal path into a branch, which it then cannot
  // vectorize (a float operation may trap, so it is not executed speculatively again).
  static inline uint32_t mask(bool c) { return 0u - static_cast<uint32_t>(c); }
  // ax < b for ax, b < 2^31, compared as signed: AVX2 has a signed 32-bit compare but no unsigned.
  static inline bool below(uint32_t ax, uint32_t b) { return static_cast<int32_t>(ax) < static_cast<int32_t>(b); }
  static inline uint32_t pick(uint32_t m, uint32_t a, uint32_t b) { return (a & m) | (b & ~m); }

  static inline Rounded round_magnitude(uint32_t ax) {
    const uint32_t normal = (ax + ((1u << (shift - 1u)) - 1u) + ((ax >> shift) & 1u)) & ~((1u << shift) - 1u);
    const float biased = std::bit_cast<float>(ax) * up + magic;  // exact product; the sum rounds
    const uint32_t k = std::bit_cast<uint32_t>(biased) - std::bit_cast<uint32_t>(magic);
    const uint32_t sub_bits = std::bit_cast<uint32_t>((biased - magic) * down);
    const uint32_t sub = mask(below(ax, F::min_normal_bits));
    return {pick(sub, sub_bits, normal), pick(sub, k, (normal - rebias) >> shift)};
  }

  static inline float roundtrip(float x) {
    const uint32_t u = std::bit_cast<uint32_t>(x);
    const uint32_t ax = u & 0x7fffffffu;
    uint32_t r = round_magnitude(ax).bits;
    r = pick(mask(!below(ax, F::max_finite_bits)), F::max_finite_bits, r);
    r |= u & 0x80000000u;
    r = pick(mask(below(0x7f800000u, ax)), 0x7fffffffu, r);
    return std::bit_cast<float>(r);
  }

  static inline uint8_t encode(float x) {
    const uint32_t u = std::bit_cast<uint32_t>(x);
    const uint32_t ax = u & 0x7fffffffu;
    uint32_t c = round_magnitude(ax).code;
    c = pick(mask(!below(ax, F::max_finite_bits)), max_code, c);
    c |= (u >> 24) & 0x80u;
    c = pick(mask(below(0x7f800000u, ax)), codec::kFp8NaNCode, c);
    return static_cast<uint8_t>(c);
  }

  // The magnitude code shifted into float position is the value times 2^(bias - 127): a float32
  // normal for normal codes and a float32 subnormal for subnormal ones, so one exact multiply by
  // 2^(127 - bias) rescales both. That needs subnormal floats read as such (no DAZ), the same
  // default floating-point environment the rest of the library assumes.
  static inline float decode(uint8_t code) {
    const uint32_t m = code & 0x7fu;
    const float magnitude = std::bit_cast<float>(m << shift) * std::bit_cast<float>((254u - kBias) << 23);
    uint32_t r = std::bit_cast<uint32_t>(magnitude) | (static_cast<uint32_t>(code & 0x80u) << 24);
    if constexpr (F::exponent_field_max == 31u) {  // E5M2: IEEE inf and NaN
      const uint32_t special = pick(mask((m & F::mantissa_mask) == 0), (r & 0x80000000u) | 0x7f800000u, 0x7fffffffu);
      r = pick(mask((m >> kMantissaBits) == 31u), special, r);
    } else {  // E4M3: only S.1111.111 is NaN
      r = pick(mask(m == 0x7fu), 0x7fffffffu, r);
    }
    return std::bit_cast<float>(r);
  }
};

using E4M3 = Fast<codec::fp8_detail::E4M3, Fp8Format::e4m3, 3u, 7u>;
using E5M2 = Fast<codec::fp8_detail::E5M2, Fp8Format::e5m2, 2u, 15u>;

// One multiversioned function per format and loop, so the per-element code inlines into each
// clone and the AVX2 clone gets 8-lane vectors. The division (or the multiplication by an exact
// reciprocal, above) and the multiplication by the scale are the codec's own float32 operations
// (fp8_quantize, fp8_dequantize), so they round the same way.
#define KVTUNE_FP8_LOOPS(name, Fmt)                                                                         \
  KVTUNE_MULTIVERSION void roundtrip_##name(const float* x, float scale, float* y, int64_t n) {             \
    if (const float r = exact_reciprocal(scale); r != 0.0f) {                                               \
      for (int64_t i = 0; i < n; ++i) y[i] = Fmt::roundtrip(x[i] * r) * scale;                              \
    } else {                                                                                                \
      for (int64_t i = 0; i < n; ++i) y[i] = Fmt::roundtrip(x[i] / scale) * scale;                          \
    }                                                                                                       \
  }                                                                                                         \
  KVTUNE_MULTIVERSION void roundtrip_per_row_##name(const float* x, int64_t rows, int64_t cols, float* y) { \
    for (int64_t r = 0; r < rows; ++r) {                                                                    \
      const float* row = x + r * cols;                                                                      \
      const float scale = codec::fp8_fit_scale(abs_max_bits(row, cols), Fmt::format);                       \
      for (int64_t i = 0; i < cols; ++i) y[r * cols + i] = Fmt::roundtrip(row[i] / scale) * scale;          \
    }                                                                                                       \
  }                                                                                                         \
  KVTUNE_MULTIVERSION void roundtrip_blocks_##name(const float* x, const float* scale, int64_t blocks,       \
                                                   int64_t block, float* y) {                               \
    for (int64_t k = 0; k < blocks; ++k) {                                                                  \
      const float s = scale[k], *xb = x + k * block;                                                        \
      float* yb = y + k * block;                                                                            \
      if (const float r = exact_reciprocal(s); r != 0.0f) {                                                 \
        for (int64_t i = 0; i < block; ++i) yb[i] = Fmt::roundtrip(xb[i] * r) * s;                          \
      } else {                                                                                              \
        for (int64_t i = 0; i < block; ++i) yb[i] = Fmt::roundtrip(xb[i] / s) * s;                          \
      }                                                                                                     \
    }                                                                                                       \
  }                                                                                                         \
  KVTUNE_MULTIVERSION void quantize_##name(const float* x, float scale, uint8_t* codes, int64_t n) {        \
    if (const float r = exact_reciprocal(scale); r != 0.0f) {                                               \
      for (int64_t i = 0; i < n; ++i) codes[i] = Fmt::encode(x[i] * r);                                     \
    } else {                                                                                                \
      for (int64_t i = 0; i < n; ++i) codes[i] = Fmt::encode(x[i] / scale);                                 \
    }                                                                                                       \
  }                                                                                                         \
  KVTUNE_MULTIVERSION void dequantize_##name(const uint8_t* codes, float scale, float* y, int64_t n) {      \
    for (int64_t i = 0; i < n; ++i) y[i] = Fmt::decode(codes[i]) * scale;                                   \
  }

KVTUNE_FP8_LOOPS(e4m3, E4M3)
KVTUNE_FP8_LOOPS(e5m2, E5M2)

KVTUNE_MULTIVERSION float abs_max_clones(const float* x, int64_t n) { return abs_max_bits(x, n); }

#undef KVTUNE_FP8_LOOPS

#if KVTUNE_X86_INTRINSICS

// Fast::roundtrip on sixteen lanes: the same integer and float operations, selects as masks. Two
// shortcuts keep the bits: the normal rounding is monotone and the largest finite value lies on its
// grid, so min(rounded |x|, largest) is the codec's saturation for every |x| up to infinity (the
// integer sum stays below 2^32, and NaN is replaced last); and the subnormal step, which differs only
// for 0 < |x| < the smallest normal (zero rounds to zero either way), runs only for a vector that
// has such a lane (rare once a block is scaled to its maximum, as the MX formats are).
template <class Fmt>
KVTUNE_AVX512 inline __m512 roundtrip16(__m512 x) {
  using F = typename Fmt::Codec;
  const __m512i u = _mm512_castps_si512(x);
  const __m512i ax = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __m512i carry = _mm512_and_si512(_mm512_srli_epi32(ax, Fmt::shift), _mm512_set1_epi32(1));
  const __m512i normal =
      _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(ax, _mm512_set1_epi32((1 << (Fmt::shift - 1)) - 1)), carry),
                       _mm512_set1_epi32(~((1 << Fmt::shift) - 1)));
  __m512i r = _mm512_min_epu32(normal, _mm512_set1_epi32(int(F::max_finite_bits)));
  const __mmask16 subnormal = _mm512_cmplt_epu32_mask(_mm512_sub_epi32(ax, _mm512_set1_epi32(1)),
                                                      _mm512_set1_epi32(int(F::min_normal_bits) - 1));
  if (subnormal != 0) {
    const __m512 magic = _mm512_set1_ps(Fmt::magic);
    const __m512 biased = _mm512_add_ps(_mm512_mul_ps(_mm512_castsi512_ps(ax), _mm512_set1_ps(Fmt::up)), magic);
    const __m512i sub = _mm512_castps_si512(_mm512_mul_ps(_mm512_sub_ps(biased, magic), _mm512_set1_ps(Fmt::down)));
    r = _mm512_mask_blend_epi32(subnormal, r, sub);
  }
  r = _mm512_or_si512(r, _mm512_and_si512(u, _mm512_set1_epi32(int(0x80000000u))));
  r = _mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(ax, _mm512_set1_epi32(0x7f800000)), r,
                              _mm512_set1_epi32(0x7fffffff));
  return _mm512_castsi512_ps(r);
}

// roundtrip16 for lanes that are ±0, NaN or in the format's normal range no farther above its
// largest finite value than the next rounding boundary (a row's products by the reciprocal of its
// scale, once near_boundary16 has passed them): no subnormal or saturation step, as neither can
// apply, so the fast path spends about half the instructions.
// MayHoldNaN = false: the caller knows no lane is NaN, and the NaN select is left out.
template <class Fmt, bool MayHoldNaN = true>
KVTUNE_AVX512 inline __m512 roundtrip16_normal(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i ax = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __m512i carry = _mm512_and_si512(_mm512_srli_epi32(ax, Fmt::shift), _mm512_set1_epi32(1));
  const __m512i normal =
      _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32((1 << (Fmt::shift - 1)) - 1)), carry),
                       _mm512_set1_epi32(~((1 << Fmt::shift) - 1)));  // the sign bit rides along on u
  if constexpr (!MayHoldNaN) return _mm512_castsi512_ps(normal);
  return _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(ax, _mm512_set1_epi32(0x7f800000)),
                                                     normal, _mm512_set1_epi32(0x7fffffff)));
}

// Whether any lane of v = fl(x * fl(1/s)) might round to another fp8 value than the codec's
// fl(x / s). With q = x / s exactly, |v - q| <= |q| (2^-23 + 2^-48) and |fl(q) - q| <= |q| 2^-24,
// so for a normal float v, v and fl(q) lie less than 4 ulps of v apart, and round differently only
// when a rounding boundary lies between them. In the format's normal range the boundaries are the
// floats whose low `shift` bits are 100...0 (never within 4 ulps of a power of two, where the ulp
// changes), so a v more than 8 ulps from that pattern is safe; saturation at the largest finite
// value is a grid point and changes nothing. In the format's subnormal range the boundaries sit at
// other bit positions, so every nonzero v below its smallest normal is flagged (rare in a row
// scaled to its own maximum). v = ±0 is exact: x = ±0, or both round to a zero of x's sign.
template <class Fmt>
KVTUNE_AVX512 inline bool near_boundary16(__m512 v) {
  using F = typename Fmt::Codec;
  const __m512i ax = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff));
  // |low - half| <= 8 for the low `shift` bits: shifted by 8 - half modulo 2^shift, they land in
  // [0, 16] exactly then (a low bit pattern below half - 8 wraps to the top of the range).
  const __m512i shifted = _mm512_and_si512(_mm512_add_epi32(ax, _mm512_set1_epi32(8 - (1 << (Fmt::shift - 1)))),
                                           _mm512_set1_epi32((1 << Fmt::shift) - 1));
  const __mmask16 tie = _mm512_cmple_epu32_mask(shifted, _mm512_set1_epi32(16));
  // 0 < ax < min_normal as one unsigned compare: ax - 1 wraps to the top for ax = 0.
  const __mmask16 sub = _mm512_cmplt_epu32_mask(_mm512_sub_epi32(ax, _mm512_set1_epi32(1)),
                                                _mm512_set1_epi32(int(F::min_normal_bits) - 1));
  return (tie | sub) != 0;
}

// One row of roundtrip_per_row_avx512: multiplied by its scale's reciprocal, divided where
// near_boundary16 says so or where the reciprocal is not usable (`multiply` false). Finite: the
// caller knows every lane is finite, so the NaN select is left out.
template <class Fmt, bool Finite>
KVTUNE_AVX512 inline void row_roundtrip16(const float* row, int64_t cols, __m512 s, __m512 rv, bool multiply,
                                          float* out) {
  for (int64_t c = 0; c < cols; c += 16) {
    const __m512 xv = _mm512_loadu_ps(row + c);
    const __m512 v = _mm512_mul_ps(xv, rv);
    const bool divide = (!Finite && !multiply) || near_boundary16<Fmt>(v);
    const __m512 level = divide ? roundtrip16<Fmt>(_mm512_div_ps(xv, s)) : roundtrip16_normal<Fmt, !Finite>(v);
    _mm512_storeu_ps(out + c, _mm512_mul_ps(level, s));
  }
}

// The per-token mode for rows of a multiple of 16, sixteen rows at a time: each row's maximum
// (abs_max_bits), the sixteen scales and reciprocals in two vector divisions (fp8_fit_scale's
// float32 division, so the same bits), then each row sixteen lanes at a time multiplied by its
// reciprocal, divided instead where near_boundary16 says so (the vector division is the slowest
// instruction here). A row whose scale has no finite nonzero reciprocal divides throughout.
template <class Fmt>
KVTUNE_AVX512 void roundtrip_per_row_avx512(const float* x, int64_t rows, int64_t cols, float* y) {
  alignas(64) uint32_t amax[16];
  alignas(64) float scales[16], recips[16];
  for (int64_t r0 = 0; r0 < rows; r0 += 16) {
    const int64_t n = std::min<int64_t>(16, rows - r0);
    uint32_t nan_rows = 0;  // bit k: row k holds a NaN
    for (int64_t k = 0; k < 16; ++k) {
      // The largest magnitude's bits, NaN included (its bits lie above infinity's); a row that held
      // a NaN is scanned again without it, as abs_max_bits ignores NaN.
      const float* row = x + (r0 + k) * cols;
      __m512i m = _mm512_setzero_si512();
      for (int64_t c = 0; k < n && c < cols; c += 16) {
        m = _mm512_max_epu32(m, _mm512_and_si512(_mm512_loadu_si512(row + c), _mm512_set1_epi32(0x7fffffff)));
      }
      amax[k] = _mm512_reduce_max_epu32(m);
      if (amax[k] > 0x7f800000u) {
        amax[k] = std::bit_cast<uint32_t>(abs_max_bits(row, cols));
        nan_rows |= 1u << k;
      }
    }
    const __m512 a = _mm512_load_ps(amax);
    const __m512 fit = _mm512_div_ps(a, _mm512_set1_ps(codec::fp8_max_finite(Fmt::format)));
    const __m512 scale = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(fit, _mm512_setzero_ps(), _CMP_GT_OQ),
                                              _mm512_set1_ps(1.0f), fit);  // fp8_fit_scale
    const __m512 recip = _mm512_div_ps(_mm512_set1_ps(1.0f), scale);
    _mm512_store_ps(scales, scale);
    _mm512_store_ps(recips, recip);
    for (int64_t k = 0; k < n; ++k) {
      const float* row = x + (r0 + k) * cols;
      float* out = y + (r0 + k) * cols;
      // Row k of the next sixteen, asked for now: the maxima pass would otherwise wait on memory
      // while this compute pass, which reads only cached rows, leaves it idle.
      if (r0 + 16 + k < rows) prefetch_floats(x + (r0 + 16 + k) * cols, cols);
      const bool multiply = recips[k] > 0.0f && recips[k] <= std::numeric_limits<float>::max();
      const __m512 s = _mm512_set1_ps(scales[k]), rv = _mm512_set1_ps(recips[k]);
      if (multiply && (nan_rows >> k & 1) == 0) {  // a finite reciprocal and no NaN: every lane finite
        row_roundtrip16<Fmt, true>(row, cols, s, rv, true, out);
      } else {
        row_roundtrip16<Fmt, false>(row, cols, s, rv, multiply, out);
      }
    }
  }
}

// roundtrip16(x * (1 / s)) * s for a power-of-two scale s in [2^-100, 2^90], without the two
// products: x / s is then exact (or far below the format's smallest subnormal, where both give a
// zero of x's sign), so the round trip is |x| rounded to the format's grid times s
// (round_to_scaled_grid16; `lo` and `top`: its smallest normal and largest finite values times s),
// and 0x7fffffff for NaN, as roundtrip16's NaN times s gives. The range keeps every constant normal
// and finite for both formats.
template <class Fmt>
KVTUNE_AVX512 inline __m512 scaled_roundtrip16(__m512 x, __m512i lo, __m512 top) {
  const __m512 y = round_to_scaled_grid16<int(23u - Fmt::shift)>(x, lo, top);
  return _mm512_castsi512_ps(_mm512_mask_mov_epi32(_mm512_castps_si512(y), _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q),
                                                   _mm512_set1_epi32(0x7fffffff)));
}

// roundtrip_blocks for blocks of a multiple of 16 (mxfp8's 32): a power-of-two scale in
// scaled_roundtrip16's range goes through it; any other power of two multiplies by its exact
// reciprocal (the same bits as the division), any other scale divides.
template <class Fmt>
KVTUNE_AVX512 void roundtrip_blocks_avx512(const float* x, const float* scale, int64_t blocks, int64_t block, float* y,
                                           int64_t ahead) {
  using F = typename Fmt::Codec;
  for (int64_t k = 0; k < blocks; ++k) {
    if (k < ahead) prefetch_floats(x + (blocks + k) * block, block);
    const float s = scale[k], r = exact_reciprocal(s);
    const __m512 sv = _mm512_set1_ps(s), rv = _mm512_set1_ps(r);
    if (r != 0.0f && s >= 0x1p-100f && s <= 0x1p90f) {
      const __m512i lo = _mm512_castps_si512(_mm512_mul_ps(_mm512_set1_ps(std::bit_cast<float>(F::min_normal_bits)), sv));
      const __m512 top = _mm512_mul_ps(_mm512_set1_ps(std::bit_cast<float>(F::max_finite_bits)), sv);
      for (int64_t c = k * block; c < (k + 1) * block; c += 16) {
        _mm512_storeu_ps(y + c, scaled_roundtrip16<Fmt>(_mm512_loadu_ps(x + c), lo, top));
      }
      continue;
    }
    for (int64_t c = k * block; c < (k + 1) * block; c += 16) {
      const __m512 xv = _mm512_loadu_ps(x + c);
      const __m512 v = r != 0.0f ? _mm512_mul_ps(xv, rv) : _mm512_div_ps(xv, sv);
      _mm512_storeu_ps(y + c, _mm512_mul_ps(roundtrip16<Fmt>(v), sv));
    }
  }
}
#endif

}  // namespace

void roundtrip(const float* x, float scale, float* y, int64_t n, Fp8Format format) {
  format == Fp8Format::e4m3 ? roundtrip_e4m3(x, scale, y, n) : roundtrip_e5m2(x, scale, y, n);
}

void roundtrip_blocks(const float* x, const float* scale, int64_t blocks, int64_t block, float* y, Fp8Format format,
                      int64_t ahead) {
#if KVTUNE_X86_INTRINSICS
  if (block % 16 == 0 && cpu_has_avx512()) {
    return format == Fp8Format::e4m3 ? roundtrip_blocks_avx512<E4M3>(x, scale, blocks, block, y, ahead)
                                     : roundtrip_blocks_avx512<E5M2>(x, scale, blocks, block, y, ahead);
  }
#endif
  (void)ahead;
  format == Fp8Format::e4m3 ? roundtrip_blocks_e4m3(x, scale, blocks, block, y)
                            : roundtrip_blocks_e5m2(x, scale, blocks, block, y);
}

void quantize(const float* x, float scale, uint8_t* codes, int64_t n, Fp8Format format) {
  format == Fp8Format::e4m3 ? quantize_e4m3(x, scale, codes, n) : quantize_e5m2(x, scale, codes, n);
}

void dequantize(const uint8_t* codes, float scale, float* y, int64_t n, Fp8Format format) {
  format == Fp8Format::e4m3 ? dequantize_e4m3(codes, scale, y, n) : dequantize_e5m2(codes, scale, y, n);
}

void roundtrip_per_row(const float* x, int64_t rows, int64_t cols, float* y, Fp8Format format) {
#if KVTUNE_X86_INTRINSICS
  if (cols % 16 == 0 && cpu_has_avx512()) {
    return format == Fp8Format::e4m3 ? roundtrip_per_row_avx512<E4M3>(x, rows, cols, y)
                                     : roundtrip_per_row_avx512<E5M2>(x, rows, cols, y);
  }
#endif
  format == Fp8Format::e4m3 ? roundtrip_per_row_e4m3(x, rows, cols, y) : roundtrip_per_row_e5m2(x, rows, cols, y);
}

float abs_max(const float* x, int64_t n) { return abs_max_clones(x, n); }

}  // namespace kvtune::builtin::fp8_kernels
