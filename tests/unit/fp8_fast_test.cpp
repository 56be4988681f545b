// The fp8 family's vectorized loops (plugins/fp8/fp8_kernels.cpp) against the codec they replace in
// the hot path: the same codes and the same floats, bit for bit, for every one of the 2^32 float32
// inputs at scale 1 (which covers the per-element rounding completely), and on ties, specials and
// random values at scales that take the division path and the exact-reciprocal path.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "fp8/fp8_kernels.h"
#include "kvtune/codecs/fp8_codec.h"
#include "kvtune/numeric/bits.h"

namespace kvtune::builtin::fp8_kernels {
namespace {

using codec::Fp8Format;

class Fp8FastTest : public ::testing::TestWithParam<Fp8Format> {};

// Checks all three loops on x at one scale against the codec, element by element.
void expect_matches_codec(const std::vector<float>& x, float scale, Fp8Format format) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> y(x.size()), back(x.size());
  std::vector<uint8_t> codes(x.size());
  roundtrip(x.data(), scale, y.data(), n, format);
  quantize(x.data(), scale, codes.data(), n, format);
  dequantize(codes.data(), scale, back.data(), n, format);
  for (size_t i = 0; i < x.size(); ++i) {
    const uint8_t code = codec::fp8_quantize(x[i], scale, format);
    const uint32_t want = float_bits(codec::fp8_dequantize(code, scale, format));
    ASSERT_EQ(codes[i], code) << "x bits " << std::hex << float_bits(x[i]) << " scale " << scale;
    ASSERT_EQ(float_bits(y[i]), want) << "x bits " << std::hex << float_bits(x[i]) << " scale " << scale;
    ASSERT_EQ(float_bits(back[i]), want) << "x bits " << std::hex << float_bits(x[i]) << " scale " << scale;
  }
}

// Both signs, every float32 exponent (subnormals, inf and NaN included) and, per exponent, every
// combination of the top 10 mantissa bits with low bits 0, 1 and just below, at and above the
// 2^12 boundary: every rounding position the conversion uses (bit 20 or 21 for normals, higher
// ones for the format's subnormals) then sees its exact midpoint and both neighbouring floats.
TEST_P(Fp8FastTest, DenseSweep) {
  const Fp8Format format = GetParam();
  std::vector<float> x;
  for (uint32_t sign_exponent = 0; sign_exponent < 512; ++sign_exponent) {
    for (uint32_t top = 0; top < 1024; ++top) {
      for (uint32_t low : {0x0u, 0x1u, 0xfffu, 0x1000u, 0x1001u, 0x1fffu}) {
        x.push_back(bits_float((sign_exponent << 23) | (top << 13) | low));
      }
    }
  }
  expect_matches_codec(x, 1.0f, format);
  expect_matches_codec(x, 0.37f, format);
}

// Each format value and the midpoints between neighbours, with their float neighbours, signs,
// specials and the subnormal/normal boundaries of both float32 and the format; scaled by scales
// that divide (non powers of two, a float32 subnormal) and that multiply by an exact reciprocal.
TEST_P(Fp8FastTest, StructuredValuesAtManyScales) {
  const Fp8Format format = GetParam();
  std::vector<float> base;
  for (uint32_t c = 0; c < 128; ++c) {
    const float v = codec::fp8_to_f32(static_cast<uint8_t>(c), format);
    const float next = codec::fp8_to_f32(static_cast<uint8_t>(c + 1), format);
    base.push_back(v);
    if (std::isfinite(v) && std::isfinite(next)) base.push_back(v + (next - v) / 2);  // exact midpoint
  }
  for (float v : {0.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::signaling_NaN(), std::numeric_limits<float>::denorm_min(),
                  std::numeric_limits<float>::min(), std::numeric_limits<float>::max(), 480.0f, 61440.0f}) {
    base.push_back(v);
  }
  std::vector<float> x;
  for (float v : base) {
    for (int d = -3; d <= 3; ++d) {
      const float w = bits_float(static_cast<uint32_t>(static_cast<int64_t>(float_bits(v)) + d));
      x.push_back(w);
      x.push_back(-w);
    }
  }
  for (float scale : {1.0f, 0.5f, 0x1p-20f, 0x1p100f, 0x1p-126f, 0x1p127f, 0.37f, 3.0f, 1.7e-3f, 2.5e5f, 1e-40f,
                      codec::fp8_fit_scale(1.0f, format), codec::fp8_fit_scale(123.456f, format)}) {
    std::vector<float> scaled(x.size());
    for (size_t i = 0; i < x.size(); ++i) scaled[i] = x[i] * scale;  // the grid at this scale
    expect_matches_codec(scaled, scale, format);
    expect_matches_codec(x, scale, format);
  }
}

TEST_P(Fp8FastTest, RandomBitPatternsAndScales) {
  const Fp8Format format = GetParam();
  std::mt19937 rng(20240607);
  std::vector<float> x(1 << 20);
  for (int round = 0; round < 12; ++round) {
    for (float& v : x) v = bits_float(static_cast<uint32_t>(rng()));
    // A random positive finite scale each round, so the division path sees many.
    float scale;
    do {
      scale = bits_float(static_cast<uint32_t>(rng()) & 0x7fffffffu);
    } while (!std::isfinite(scale) || scale == 0.0f);
    expect_matches_codec(x, round == 0 ? 1.0f : scale, format);
  }
}

TEST_P(Fp8FastTest, DequantizeEveryCode) {
  const Fp8Format format = GetParam();
  for (float scale : {1.0f, 0.37f, 0x1p-30f, 1e-40f, 3.0e38f}) {
    std::vector<uint8_t> codes(256);
    for (uint32_t c = 0; c < 256; ++c) codes[c] = static_cast<uint8_t>(c);
    std::vector<float> y(256);
    dequantize(codes.data(), scale, y.data(), 256, format);
    for (uint32_t c = 0; c < 256; ++c) {
      ASSERT_EQ(float_bits(y[c]), float_bits(codec::fp8_dequantize(static_cast<uint8_t>(c), scale, format)))
          << "code " << c << " scale " << scale;
    }
  }
}

// roundtrip_per_row of a [rows, cols] block against the codec at each row's fp8_fit_scale.
void expect_per_row_matches_codec(const std::vector<float>& x, int64_t rows, int64_t cols, Fp8Format format) {
  std::vector<float> y(x.size());
  roundtrip_per_row(x.data(), rows, cols, y.data(), format);
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 0.0f;
    for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::abs(x[size_t(r * cols + c)]));
    const float scale = codec::fp8_fit_scale(amax, format);
    for (int64_t c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r * cols + c);
      ASSERT_EQ(float_bits(y[i]),
                float_bits(codec::fp8_dequantize(codec::fp8_quantize(x[i], scale, format), scale, format)))
          << "row " << r << " col " << c << " x bits " << std::hex << float_bits(x[i]);
    }
  }
}

// The fused per-token loop: each row at fp8_fit_scale of its own maximum, NaN and inf included.
TEST_P(Fp8FastTest, RoundtripPerRowMatchesCodec) {
  const Fp8Format format = GetParam();
  std::mt19937 rng(99);
  constexpr int64_t kRows = 257, kCols = 77;
  std::vector<float> x(kRows * kCols);
  for (float& v : x)
    v = rng() % 50 == 0 ? bits_float(static_cast<uint32_t>(rng()))
                        : std::ldexp(float(rng() % 4001) - 2000.0f, int(rng() % 30) - 20);
  for (int64_t c = 0; c < kCols; ++c) x[5 * kCols + c] = 0.0f;  // an all-zero row: scale 1
  expect_per_row_matches_codec(x, kRows, kCols, format);
}

// Rows of 128 (the sixteen-lane path multiplies by the reciprocal of a scale that is not a power
// of two and divides only near a rounding boundary): each row's values are the format's rounding
// boundaries times the row's scale, and the floats up to four ulps either side, so x / s lands on
// or next to a boundary while x * (1 / s) may round the other way; plus subnormal-range values,
// zeros of both signs and a NaN. Rows come in a count that is not a multiple of sixteen.
TEST_P(Fp8FastTest, RoundtripPerRowOnRoundingBoundariesOfUnevenScales) {
  const Fp8Format format = GetParam();
  std::mt19937 rng(123);
  std::vector<float> boundaries;  // midpoints between neighbouring non-negative finite values
  for (uint32_t code = 0; code < 0x7f; ++code) {
    const float a = codec::fp8_to_f32(uint8_t(code), format), b = codec::fp8_to_f32(uint8_t(code + 1), format);
    if (std::isfinite(a) && std::isfinite(b) && b <= codec::fp8_max_finite(format)) boundaries.push_back(0.5f * (a + b));
  }
  // The boundaries below the format's smallest normal value come first.
  const size_t subnormal_boundaries = size_t(std::count_if(
      boundaries.begin(), boundaries.end(), [&](float b) { return b < codec::fp8_to_f32(uint8_t(8 >> (format == Fp8Format::e5m2)), format); }));
  ASSERT_GT(subnormal_boundaries, 0u);
  constexpr int64_t kRows = 37, kCols = 128;
  std::vector<float> x(kRows * kCols);
  for (int64_t r = 0; r < kRows; ++r) {
    const float amax = std::ldexp(1.0f + float(rng() % 1000003) / 1000003.0f, int(rng() % 40) - 20);
    const float scale = codec::fp8_fit_scale(amax, format);
    float* row = x.data() + r * kCols;
    row[0] = r % 2 ? -amax : amax;
    // Rows of three kinds, so a boundary of one range is not hidden in a vector that another
    // lane already sends to the division: every lane a boundary; values away from boundaries with
    // every fifth lane a boundary of the subnormal range; the same with every seventh lane a
    // boundary of the normal range.
    for (int64_t c = 1; c < kCols; ++c) {
      const int kind = int(r % 3);
      float t = std::ldexp(float(rng() % 1000) + 0.25f, -10) * scale;  // q = 0.25 + k / 1024: no boundary
      if (kind == 0 || (kind == 1 && c % 5 == 0)) t = boundaries[rng() % boundaries.size()] * scale;
      if (kind == 1 && c % 5 == 0) t = boundaries[rng() % subnormal_boundaries] * scale;
      if (kind == 2 && c % 7 == 0) t = boundaries[subnormal_boundaries + rng() % (boundaries.size() - subnormal_boundaries)] * scale;
      const int ulps = int(rng() % 9) - 4;
      float v = std::min(bits_float(uint32_t(int64_t(float_bits(t)) + ulps)), amax);
      row[c] = rng() % 2 ? -v : v;
    }
    row[5] = 0.0f, row[6] = -0.0f, row[7] = amax * 1e-6f;
    if (r == 3) row[9] = std::numeric_limits<float>::quiet_NaN();
    if (r == 4) row[10] = -std::numeric_limits<float>::quiet_NaN();  // NaN's bits lie above inf's
    if (r == 7) row[11] = -std::numeric_limits<float>::infinity();
  }
  // The last row away from every boundary but for two NaNs, so their vectors take the multiply
  // path (a boundary lane would send a vector to the division, NaN and all).
  float* last = x.data() + (kRows - 1) * kCols;
  const float last_scale = codec::fp8_fit_scale(std::abs(last[0]), format);
  for (int64_t c = 1; c < kCols; ++c) last[c] = std::ldexp(float(rng() % 1000) + 0.25f, -10) * last_scale;
  last[20] = std::numeric_limits<float>::quiet_NaN();
  last[100] = -std::numeric_limits<float>::quiet_NaN();
  expect_per_row_matches_codec(x, kRows, kCols, format);
}

// Blocks of 32 each at its own scale: powers of two (the MX formats' scales, multiplied by their
// exact reciprocal) and others (divided), against the codec element by element.
TEST_P(Fp8FastTest, RoundtripBlocksMatchesCodec) {
  const Fp8Format format = GetParam();
  std::mt19937 rng(31);
  constexpr int64_t kBlocks = 40, kBlock = 32;
  std::vector<float> x(kBlocks * kBlock), y(x.size()), scale(kBlocks);
  for (int64_t k = 0; k < kBlocks; ++k) {
    scale[size_t(k)] = std::ldexp(k % 2 ? 1.0f : 1.0f + float(rng() % 997) / 997.0f, int(rng() % 60) - 30);
  }
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = std::ldexp(float(rng() % 4001) - 2000.0f, int(rng() % 40) - 30);
  }
  x[3] = std::numeric_limits<float>::quiet_NaN(), x[40] = -0.0f, x[77] = std::numeric_limits<float>::infinity();
  roundtrip_blocks(x.data(), scale.data(), kBlocks - 8, kBlock, y.data(), format, 8);  // the last 8 read ahead
  roundtrip_blocks(x.data() + (kBlocks - 8) * kBlock, scale.data() + kBlocks - 8, 8, kBlock,
                   y.data() + (kBlocks - 8) * kBlock, format, 0);
  for (size_t i = 0; i < x.size(); ++i) {
    const float s = scale[i / kBlock];
    ASSERT_EQ(float_bits(y[i]), float_bits(codec::fp8_dequantize(codec::fp8_quantize(x[i], s, format), s, format)))
        << "element " << i << " scale " << s;
  }
}

// Blocks through power-of-two scales, where the kernel rounds |x| itself (no products) for scales
// in [2^-100, 2^90]: every midpoint between two positive fp8 values times the scale, with the float
// either side, and each value itself, both signs; specials (±inf, NaN of both signs, ±0, far above
// the largest value); scales at both ends of that range and outside it. Every seventh block also
// holds one value in the scaled subnormal range, where the step is the subnormal one.
TEST_P(Fp8FastTest, RoundtripBlocksThroughPowerOfTwoScalesOnEveryMidpoint) {
  const Fp8Format format = GetParam();
  constexpr int64_t kBlock = 32;
  std::vector<float> grid;
  for (int code = 1; code < 0x80; ++code) {
    const float v = codec::fp8_dequantize(uint8_t(code), 1.0f, format);
    if (std::isfinite(v)) grid.push_back(v);
  }
  for (const float s : {1.0f, 0x1p-7f, 0x1p13f, 0x1p-100f, 0x1p90f, 0x1p-101f, 0x1p91f, 0x1p100f, 0x1p-126f, 0x1p120f, 0x1p127f}) {
    std::vector<float> x;
    for (size_t i = 0; i + 1 < grid.size(); ++i) {
      for (const float v : {grid[i], (grid[i] + grid[i + 1]) / 2}) {
        for (const float sign : {1.0f, -1.0f}) {
          const float a = sign * v * s;
          x.insert(x.end(), {a, std::nextafter(a, 0.0f), std::nextafter(a, sign * INFINITY)});
        }
      }
    }
    x.insert(x.end(), {INFINITY, -INFINITY, std::numeric_limits<float>::quiet_NaN(),
                       -std::numeric_limits<float>::quiet_NaN(), 0.0f, -0.0f, 1e30f * s, grid.back() * 1.01f * s});
    while (x.size() % kBlock != 0) x.push_back(s);
    const int64_t blocks = int64_t(x.size()) / kBlock;
    const float smallest = codec::fp8_dequantize(1, 1.0f, format);  // the smallest subnormal
    for (int64_t k = 0; k < blocks; k += 7) x[size_t(k * kBlock + 5)] = 3 * smallest * s;
    std::vector<float> y(x.size());
    const std::vector<float> scale(size_t(blocks), s);
    roundtrip_blocks(x.data(), scale.data(), blocks, kBlock, y.data(), format, 0);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(float_bits(y[i]), float_bits(codec::fp8_dequantize(codec::fp8_quantize(x[i], s, format), s, format)))
          << std::hexfloat << x[i] << " scale " << s;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8FastTest, ::testing::Values(Fp8Format::e4m3, Fp8Format::e5m2),
                         [](const auto& p) { return p.param == Fp8Format::e4m3 ? "e4m3" : "e5m2"; });

// The vectorized maximum equals the sequential std::max(amax, |x|) from 0 on data with NaN, ±inf,
// ±0 and subnormals, at every length up to a few vectors (tails included).
TEST(Fp8FastAbsMax, MatchesSequentialMax) {
  std::mt19937 rng(7);
  const std::array<float, 8> specials = {std::numeric_limits<float>::quiet_NaN(),
                                         -std::numeric_limits<float>::quiet_NaN(),
                                         std::numeric_limits<float>::infinity(),
                                         -std::numeric_limits<float>::infinity(),
                                         -0.0f,
                                         0.0f,
                                         std::numeric_limits<float>::denorm_min(),
                                         -1e-39f};
  for (int trial = 0; trial < 2000; ++trial) {
    const int64_t n = 1 + trial % 67;
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) {
      const uint32_t pick = rng() % 16;
      v = pick < specials.size() ? specials[pick]
                                 : std::ldexp(static_cast<float>(rng() % 2001) - 1000.0f, int(rng() % 40) - 20);
    }
    float want = 0.0f;
    for (float v : x) want = std::max(want, std::abs(v));
    ASSERT_EQ(float_bits(abs_max(x.data(), n)), float_bits(want)) << "trial " << trial;
  }
}

}  // namespace
}  // namespace kvtune::builtin::fp8_kernels
