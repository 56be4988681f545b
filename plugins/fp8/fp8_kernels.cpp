#include "fp8_kernels.h"

#include "kvtune/numeric/multiversion.h"

#include <algorithm>
#include <bit>


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

// On the bits: for floats >= +0 that are not NaN, float order is the order of their bits as
// integers, and an integer maximum is associative, so GCC vectorizes the reduction without
// reassociation flags (a float one it would keep sequential). NaN is mapped to 0, as the
// sequential std::max(amax, |x|) ignores it (the comparison with it is false); every |x| is >= +0,
// so the result is the same maximum of a set.
inline float abs_max_bits(const float* x, int64_t n) {
  uint32_t amax = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t a = std::bit_cast<uint32_t>(x[i]) & 0x7fffffffu;
    amax = std::max(amax, a & (0u - static_cast<uint32_t>(a <= 0x7f800000u)));
  }
  return std::bit_cast<float>(amax);
}

// 1 / scale when scale is a power of two whose reciprocal is a float32 (then exact), else 0.
// x * (1 / scale) and x / scale are then both the correctly rounded value of the same real
// number, so they agree for every x (NaN stays NaN, and the conversion ignores its payload); the
// multiplication spares the loops a vector division, the slowest instruction in them. Scale 1,
// the unit mode's, is the case that matters.
inline float exact_reciprocal(float scale) {
  const uint32_t s = std::bit_cast<uint32_t>(scale);
  const uint32_t exponent = s >> 23;  // also 0 unless the sign is +
  return (s & 0x7fffffu) == 0 && exponent >= 1u && exponent <= 254u ? std::bit_cast<float>((254u - exponent) << 23)
                                                                    : 0.0f;
}

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

}  // namespace

void roundtrip(const float* x, float scale, float* y, int64_t n, Fp8Format format) {
  format == Fp8Format::e4m3 ? roundtrip_e4m3(x, scale, y, n) : roundtrip_e5m2(x, scale, y, n);
}

void quantize(const float* x, float scale, uint8_t* codes, int64_t n, Fp8Format format) {
  format == Fp8Format::e4m3 ? quantize_e4m3(x, scale, codes, n) : quantize_e5m2(x, scale, codes, n);
}

void dequantize(const uint8_t* codes, float scale, float* y, int64_t n, Fp8Format format) {
  format == Fp8Format::e4m3 ? dequantize_e4m3(codes, scale, y, n) : dequantize_e5m2(codes, scale, y, n);
}

void roundtrip_per_row(const float* x, int64_t rows, int64_t cols, float* y, Fp8Format format) {
  format == Fp8Format::e4m3 ? roundtrip_per_row_e4m3(x, rows, cols, y) : roundtrip_per_row_e5m2(x, rows, cols, y);
}

float abs_max(const float* x, int64_t n) { return abs_max_clones(x, n); }

}  // namespace kvtune::builtin::fp8_kernels
