// The block-scaled float codecs (kvtune/codecs/microscale.h): E2M1 and E8M0 against hand-computed
// values (OCP Microscaling Formats v1.0, tables 5 and 6) on every machine, and bit for bit against
// the CUDA toolkit's host conversions (cuda_fp4.h, cuda_fp8.h) where its headers are present, over
// more than 100 000 inputs: every code and its neighbours, every tie, saturation, subnormals, both
// zeros, NaNs, then random bit patterns. And one scale block's arithmetic: MX scales that round
// up, NVFP4's two levels.
#include "kvtune/codecs/microscale.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "kvtune/numeric/bits.h"
#include "microscale/microscale_kernels.h"

#if KVTUNE_HAVE_CUDA_HEADERS
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#endif

// Inside kvtune::codec rather than a using-directive, which a unity build would carry into the
// files batched after this one.
namespace kvtune::codec {
namespace {

constexpr float kInfinity = std::numeric_limits<float>::infinity();

TEST(Microscale, E2M1DecodesTheEightMagnitudesOfTheSpec) {
  const float want[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (uint8_t c = 0; c < 8; ++c) {
    EXPECT_EQ(e2m1_to_f32(c), want[c]) << int(c);
    EXPECT_EQ(e2m1_to_f32(static_cast<uint8_t>(c | 0x8u)), -want[c]) << int(c);
  }
  EXPECT_TRUE(std::signbit(e2m1_to_f32(0x8)));  // -0
}

// Hand-computed: each tie goes to the even code; beyond 6 saturates; NaN is +6.
TEST(Microscale, E2M1RoundsToNearestEvenAndSaturates) {
  const std::pair<float, uint8_t> cases[] = {
      {0.0f, 0x0},  {0.25f, 0x0},   {0.2501f, 0x1}, {0.5f, 0x1},       {0.75f, 0x2},   {0.7499f, 0x1},
      {1.25f, 0x2}, {1.2501f, 0x3}, {1.75f, 0x4},   {2.5f, 0x4},       {2.5001f, 0x5}, {3.5f, 0x6},
      {5.0f, 0x6},  {5.0001f, 0x7}, {6.0f, 0x7},    {7.0f, 0x7},       {1e30f, 0x7},   {kInfinity, 0x7},
      {-0.0f, 0x8}, {-0.3f, 0x9},   {-5.5f, 0xf},   {-kInfinity, 0xf}, {1e-40f, 0x0},
  };
  for (const auto& [x, code] : cases) EXPECT_EQ(f32_to_e2m1(x), code) << x;
  EXPECT_EQ(f32_to_e2m1(bits_float(0x7fc00000u)), 0x7);
  EXPECT_EQ(f32_to_e2m1(bits_float(0xffc00000u)), 0x7);  // the sign of a NaN is dropped
}

TEST(Microscale, E8M0IsAPowerOfTwoRoundedUp) {
  EXPECT_EQ(f32_to_e8m0_up(1.0f), 127);
  EXPECT_EQ(f32_to_e8m0_up(1.5f), 128);
  EXPECT_EQ(f32_to_e8m0_up(-3.0f), 129);  // the magnitude counts
  EXPECT_EQ(f32_to_e8m0_up(0.0f), 0);     // clipped to 2^-127
  EXPECT_EQ(f32_to_e8m0_up(bits_float(0x00400000u)), 0);  // 2^-127 exactly
  EXPECT_EQ(f32_to_e8m0_up(bits_float(0x00400001u)), 1);
  EXPECT_EQ(f32_to_e8m0_up(kInfinity), 254);
  EXPECT_EQ(f32_to_e8m0_up(std::numeric_limits<float>::max()), 254);
  EXPECT_EQ(f32_to_e8m0_up(bits_float(0x7fc00000u)), 255);
  EXPECT_EQ(e8m0_to_f32(127), 1.0f);
  EXPECT_EQ(e8m0_to_f32(0), std::ldexp(1.0f, -127));
  EXPECT_EQ(e8m0_to_f32(254), std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(e8m0_to_f32(255)));
}

// A block's MX scale rounds amax / max_element up to a power of two, so no element saturates:
// amax 7 in E2M1 gives 7 / 6 -> 2, and 7 / 2 = 3.5 is a tie that rounds to 4.
TEST(Microscale, MxScaleRoundsUpSoTheLargestElementFits) {
  EXPECT_EQ(mx_scale_code(7.0f, MicroElement::e2m1), 128);   // 2^1
  EXPECT_EQ(mx_scale_code(6.0f, MicroElement::e2m1), 127);   // exactly 1
  EXPECT_EQ(mx_scale_code(500.0f, MicroElement::e4m3), 128); // 500 / 448 -> 2
  const float s = e8m0_to_f32(mx_scale_code(7.0f, MicroElement::e2m1));
  EXPECT_EQ(micro_dequantize(micro_quantize(7.0f, s, MicroElement::e2m1), s, MicroElement::e2m1), 8.0f);
  EXPECT_EQ(micro_dequantize(micro_quantize(-1.1f, s, MicroElement::e2m1), s, MicroElement::e2m1), -1.0f);
  EXPECT_EQ(mx_scale_code(0.0f, MicroElement::e2m1), 0);  // an all-zero block: 2^-127, codes 0
}

// NVFP4 by hand: tensor amax 2688 gives g = 1; a block with amax 3 gets e4m3(0.5) = 0x30, S = 0.5,
// and 1.2 / 0.5 = 2.4 rounds to 2 (code 4), decoding as 1.0.
TEST(Microscale, Nvfp4TwoLevelScalesByHand) {
  EXPECT_EQ(nvfp4_global_scale(2688.0f), 1.0f);
  EXPECT_EQ(nvfp4_global_scale(0.0f), 1.0f);
  const float g = nvfp4_global_scale(2688.0f);
  const uint8_t b = nvfp4_block_code(3.0f, g);
  EXPECT_EQ(b, 0x30);
  const float S = nvfp4_block_scale(b, g);
  EXPECT_EQ(S, 0.5f);
  EXPECT_EQ(micro_quantize(1.2f, S, MicroElement::e2m1), 0x4);
  EXPECT_EQ(micro_dequantize(0x4, S, MicroElement::e2m1), 1.0f);
  EXPECT_EQ(micro_quantize(3.0f, S, MicroElement::e2m1), 0x7);  // the block's amax maps to 6
  // A block far below the tensor's range: its E4M3 scale underflows to 0 and it stores zeros.
  EXPECT_EQ(nvfp4_block_code(1e-9f, g), 0x00);
  EXPECT_EQ(micro_quantize(1e-9f, nvfp4_block_scale(0x00, g), MicroElement::e2m1), 0x0);
}

// Every E2M1 value and midpoint with its float neighbours, the E8M0 powers of two and theirs,
// specials and both zeros; then random bit patterns, half of them within 2^-30 .. 2^30.
std::vector<float> microscale_hard_values() {
  std::vector<float> v;
  auto add_around = [&](float x) {
    for (float s : {x, -x}) {
      v.push_back(s);
      v.push_back(std::nextafter(s, kInfinity));
      v.push_back(std::nextafter(s, -kInfinity));
    }
  };
  for (uint8_t c = 0; c < 8; ++c) {
    const float value = e2m1_to_f32(c);
    add_around(value);
    add_around(c < 7 ? (value + e2m1_to_f32(static_cast<uint8_t>(c + 1))) / 2 : 7.0f);
  }
  for (int e = -149; e <= 127; ++e) add_around(std::ldexp(1.0f, e));
  for (float x : {std::numeric_limits<float>::max(), std::numeric_limits<float>::min(), 1e30f}) add_around(x);
  for (uint32_t nan : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu}) v.push_back(bits_float(nan));
  v.push_back(kInfinity);
  v.push_back(-kInfinity);
  std::mt19937 engine(7);
  std::uniform_int_distribution<uint32_t> any_bits;
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = any_bits(engine);
    if (i % 2) u = (u & 0x807fffffu) | ((97u + (u >> 23) % 60u) << 23);
    v.push_back(bits_float(u));
  }
  return v;
}

// Hand-computed (SGLang's fp4_mx_block16 compares |x| with the bounds using >=): the four midpoints
// whose even neighbour is the smaller one go up; the other three already went up; the rest as even.
TEST(Microscale, E2M1TiesAwayTakeTheLargerMagnitude) {
  const std::pair<float, uint8_t> cases[] = {
      {0.0f, 0x0},  {0.2499f, 0x0}, {0.25f, 0x1},  {0.75f, 0x2},   {1.25f, 0x3}, {1.2499f, 0x2},    {1.75f, 0x4},
      {2.5f, 0x5},  {3.5f, 0x6},    {5.0f, 0x7},   {4.9999f, 0x6}, {6.0f, 0x7},  {1e30f, 0x7},      {kInfinity, 0x7},
      {-0.0f, 0x8}, {-0.25f, 0x9},  {-1.25f, 0xb}, {-2.5f, 0xd},   {-5.0f, 0xf}, {-kInfinity, 0xf}, {1e-40f, 0x0},
  };
  for (const auto& [x, code] : cases) EXPECT_EQ(f32_to_e2m1_ties_away(x), code) << x;
  EXPECT_EQ(f32_to_e2m1_ties_away(bits_float(0x7fc00000u)), 0x7);
  EXPECT_EQ(f32_to_e2m1_ties_away(bits_float(0xffc00000u)), 0x7);
}

// Over the same 100 000+ inputs as the CUDA comparison: the code is the nearest E2M1 value by
// distance computed in double, a tie taking the larger magnitude (a reference that shares nothing
// with the bounds), and it differs from round-to-even only at |x| = 0.25, 1.25, 2.5 and 5.
TEST(Microscale, E2M1TiesAwayIsNearestWithTiesUpOverManyValues) {
  const std::vector<float> values = microscale_hard_values();
  ASSERT_GE(values.size(), 100000u);
  std::set<float> differ;
  for (float x : values) {
    const uint8_t got = f32_to_e2m1_ties_away(x);
    if (std::isnan(x)) {
      ASSERT_EQ(got, 0x7);
      continue;
    }
    const double a = std::fabs(static_cast<double>(x));
    uint8_t best = 0;
    for (uint8_t c = 1; c < 8; ++c) {
      if (std::fabs(a - e2m1_to_f32(c)) <= std::fabs(a - e2m1_to_f32(best))) best = c;
    }
    const uint8_t want = static_cast<uint8_t>((std::signbit(x) ? 0x8u : 0u) | best);
    ASSERT_EQ(got, want) << std::hexfloat << x;
    if (got != f32_to_e2m1(x)) {
      differ.insert(x);
      ASSERT_TRUE(a == 0.25 || a == 1.25 || a == 2.5 || a == 5.0) << std::hexfloat << x;
    }
  }
  EXPECT_EQ(differ.size(), 8u);  // the four midpoints, each with both signs
}

// The branch-free round trip the fused kernels use is the codec's, over the hard values (every
// midpoint and its neighbours, both zeros, NaNs, infinities) and every 4099th bit pattern.
TEST(Microscale, E2m1RoundIsTheCodecsRoundTrip) {
  std::vector<float> values = microscale_hard_values();
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 4099) values.push_back(bits_float(uint32_t(b)));
  ASSERT_GT(values.size(), 1000000u);
  for (float x : values) {
    ASSERT_EQ(float_bits(e2m1_round<false>(x)), float_bits(e2m1_to_f32(f32_to_e2m1(x)))) << std::hexfloat << x;
    ASSERT_EQ(float_bits(e2m1_round<true>(x)), float_bits(e2m1_to_f32(f32_to_e2m1_ties_away(x))))
        << std::hexfloat << x;
  }
}

// e2m1_roundtrip of x in blocks of `block` floats, block k at scales[k], against e2m1_block's bits
// for both tie rules: e2m1_round(x * 1/scale) * scale for a power-of-two scale, e2m1_round(x /
// scale) * scale otherwise, zeros for a scale that is not > 0.
void expect_block_roundtrip_is_the_codecs(const std::vector<float>& x, const std::vector<float>& scales, int64_t block) {
  const int64_t blocks = int64_t(scales.size());
  ASSERT_EQ(x.size(), size_t(blocks * block));
  for (bool ties_away : {false, true}) {
    std::vector<float> y(x.size());
    builtin::microscale_kernels::e2m1_roundtrip(x.data(), scales.data(), blocks, block, ties_away, y.data(), 0);
    for (size_t i = 0; i < x.size(); ++i) {
      const float scale = scales[i / size_t(block)], r = exact_reciprocal(scale);
      const float v = r != 0.0f ? x[i] * r : (scale > 0.0f ? x[i] / scale : 0.0f);
      const float want = (ties_away ? e2m1_round<true>(v) : e2m1_round<false>(v)) * scale;
      ASSERT_EQ(float_bits(y[i]), float_bits(want))
          << std::hexfloat << x[i] << " scale " << scale << " block " << block << " ties_away " << ties_away;
    }
  }
}

// The block loop the microscale schemes' round trip runs (its AVX-512 path by rounding, where the
// machine has one) gives e2m1_block's bits: e2m1_round(x * 1/scale) * scale for a power-of-two
// scale, e2m1_round(x / scale) * scale otherwise, zeros for a scale that is not > 0, over the hard
// values (each E2M1 midpoint and its neighbours, zeros, NaNs, infinities) and every 4099th bit
// pattern, both tie rules, blocks of 16 and 32. The powers of two reach both ends of the range the
// AVX-512 path rounds without products (up to 2^100) and go past it (2^101, 2^120; 2^-127 and 2^127
// have no exact reciprocal).
TEST(Microscale, BlockRoundTripLoopIsTheCodecs) {
  std::vector<float> values = microscale_hard_values();
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 4099) values.push_back(bits_float(uint32_t(b)));
  values.resize(values.size() / 32 * 32);
  for (int64_t block : {16, 32}) {
    const int64_t blocks = int64_t(values.size()) / block;
    for (float scale : {1.0f, 0.5f, 0x1p-20f, 0x1p-100f, 0x1p100f, 0x1p-101f, 0x1p101f, 0x1p120f, 0x1p-127f, 0x1p127f, 3.0f, 0.75f,
                        0.0f}) {
      expect_block_roundtrip_is_the_codecs(values, std::vector<float>(size_t(blocks), scale), block);
    }
  }
}

// The same loop with a scale per block: every power of two from 2^-130 to 2^127 (the grid path's
// bounds 2^-124 and 2^100 included), with zero and non-power-of-two scales among them, so that the
// AVX-512 path's groups of sixteen blocks mix every kind. Each block holds E2M1's values and
// midpoints times its own scale (exact ties at every scale), and their neighbours.
TEST(Microscale, BlockRoundTripIsTheCodecsAtEveryScaleInMixedGroups) {
  std::vector<float> scales;
  for (int e = -130; e <= 127; ++e) {
    scales.push_back(std::ldexp(1.0f, e));
    if (e % 37 == 0) scales.push_back(0.0f);
    if (e % 29 == 0) scales.push_back(std::ldexp(3.0f, e / 2));
  }
  const float levels[] = {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f, 2.0f, 2.5f, 3.0f, 3.5f, 4.0f, 5.0f, 6.0f, 7.0f};
  for (int64_t block : {16, 32}) {
    const int64_t blocks = int64_t(scales.size());
    std::vector<float> x(size_t(blocks * block));
    for (int64_t k = 0; k < blocks; ++k) {
      for (int64_t j = 0; j < block; ++j) {
        const float v = (j % 3 == 1 ? -1.0f : 1.0f) * levels[j % 16] * (scales[size_t(k)] > 0.0f ? scales[size_t(k)] : 1.0f);
        x[size_t(k * block + j)] = j < 16 ? v : std::nextafter(v, j % 2 ? kInfinity : -kInfinity);
      }
    }
    expect_block_roundtrip_is_the_codecs(x, scales, block);
  }
}

// Scales that are not powers of two (nvfp4's E4M3 codes times a tensor scale), in groups of sixteen
// blocks that all divide: around every E2M1 boundary and value times s, the 24 floats on each side,
// for E4M3-like mantissas and random ones from 2^-126 to 2^126 and a few beyond, blocks of 16 and
// 32, both tie rules.
TEST(Microscale, BlockRoundTripDividesNearEveryBoundary) {
  std::vector<float> scales;
  for (int e = -126; e <= 126; e += 3) {
    for (int m = 1; m < 8; ++m) scales.push_back(std::ldexp(1.0f + float(m) / 8.0f, e));
  }
  std::mt19937 engine(11);
  std::uniform_real_distribution<float> exponent(-126.0f, 126.0f);
  for (int i = 0; i < 400; ++i) scales.push_back(std::exp2(exponent(engine)));
  for (float beyond : {0x1.8p126f, 0x1.8p-127f, 0x1.4p-140f}) scales.push_back(beyond);
  const float marks[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (int64_t block : {16, 32}) {
    std::vector<float> x, block_scale;
    for (float scale : scales) {
      for (float mark : marks) {
        float v = mark * scale;
        for (int i = 0; i < 24; ++i) v = std::nextafter(v, -kInfinity);
        for (int i = 0; i < 49; ++i, v = std::nextafter(v, kInfinity)) x.push_back(i % 2 ? -v : v);
      }
      while (x.size() % size_t(block) != 0) x.push_back(0.0f);
      block_scale.resize(x.size() / size_t(block), scale);
    }
    expect_block_roundtrip_is_the_codecs(x, block_scale, block);
  }
}

// The branch-free MX scale is the codec's E8M0 round trip for every non-NaN input.
TEST(Microscale, E8m0UpValueIsTheCodecsRoundTrip) {
  std::vector<float> values = microscale_hard_values();
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 4099) values.push_back(bits_float(uint32_t(b)));
  for (float x : values) {
    if (std::isnan(x)) continue;
    ASSERT_EQ(float_bits(e8m0_up_value(x)), float_bits(e8m0_to_f32(f32_to_e8m0_up(x)))) << std::hexfloat << x;
  }
}

// Each block's largest magnitude, sixteen blocks at a time on AVX-512, against abs_max_bits block by
// block: block counts that leave a tail, infinities, both zeros, subnormals, an all-zero block, and
// NaN of both signs (skipped) in the first sixteen blocks only (a NaN sends its sixteen to the scalar
// scan, so the later ones test the vector reduction).
TEST(Microscale, BlockAbsMaxIsEachBlocksScan) {
  std::mt19937 rng(11);
  const float specials[] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            -0.0f, 0.0f, std::numeric_limits<float>::denorm_min(), -1e-39f};
  for (const int64_t block : {int64_t(16), int64_t(32)}) {
    for (const int64_t blocks : {int64_t(15), int64_t(16), int64_t(37), int64_t(64)}) {
      std::vector<float> x(static_cast<size_t>(blocks * block));
      for (float& v : x) v = std::ldexp(float(int(rng() % 2001) - 1000), int(rng() % 20) - 10);
      for (size_t i = 0; i < x.size(); i += 29) x[i] = specials[rng() % 6];
      x[size_t(block + 3)] = std::numeric_limits<float>::quiet_NaN();
      x[size_t(5 * block + 1)] = -std::numeric_limits<float>::quiet_NaN();
      for (int64_t c = 0; c < block; ++c) x[size_t(2 * block + c)] = c % 2 ? 0.0f : -0.0f;  // block 2: zeros
      std::vector<float> amax(static_cast<size_t>(blocks));
      builtin::microscale_kernels::block_abs_max(x.data(), blocks, block, amax.data());
      for (int64_t k = 0; k < blocks; ++k) {
        ASSERT_EQ(float_bits(amax[size_t(k)]), float_bits(abs_max_bits(x.data() + k * block, block)))
            << "block size " << block << ", " << blocks << " blocks, block " << k;
      }
    }
  }
}

#if KVTUNE_HAVE_CUDA_HEADERS
TEST(Microscale, E2M1MatchesCudaHostConversionBitForBit) {
  const std::vector<float> values = microscale_hard_values();
  ASSERT_GE(values.size(), 100000u);
  for (float x : values) {
    ASSERT_EQ(f32_to_e2m1(x), __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest)) << std::hexfloat << x;
  }
  for (uint8_t c = 0; c < 16; ++c) {
    const __half_raw h = __nv_cvt_fp4_to_halfraw(c, __NV_E2M1);
    ASSERT_EQ(float_bits(e2m1_to_f32(c)), float_bits(__half2float(__half(h)))) << int(c);
  }
}

TEST(Microscale, E8M0MatchesCudaHostConversionBitForBit) {
  const std::vector<float> values = microscale_hard_values();
  for (float x : values) {
    ASSERT_EQ(f32_to_e8m0_up(x), __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf)) << std::hexfloat << x;
  }
  for (int c = 0; c < 255; ++c) {  // decoding, through CUDA's bf16 (exact for every power of two)
    const __nv_bfloat16_raw b = __nv_cvt_e8m0_to_bf16raw(static_cast<uint8_t>(c));
    ASSERT_EQ(float_bits(e8m0_to_f32(static_cast<uint8_t>(c))), uint32_t(b.x) << 16) << c;
  }
}
#endif

}  // namespace
}  // namespace kvtune::codec
