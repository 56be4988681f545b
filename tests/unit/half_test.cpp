// f16 and bf16 conversions: bit-exact against ggml's own round trips, CUDA's host conversions
// (when the toolkit is installed) and hand-picked boundary values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kvtune/npy.h"
#include "kvtune/numeric/bits.h"
#include "kvtune/numeric/half.h"
#include "test_support.h"

#if KVTUNE_HAVE_CUDA_HEADERS
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace kvtune {
namespace {

TEST(Half, BoundaryValuesRoundToNearestEven) {
  EXPECT_EQ(f32_to_f16_bits(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16_bits(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16_bits(65504.0f), 0x7bff);               // largest finite
  EXPECT_EQ(f32_to_f16_bits(65519.99f), 0x7bff);              // below the midpoint to inf
  EXPECT_EQ(f32_to_f16_bits(65520.0f), 0x7c00);               // midpoint ties to even = inf
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -25)), 0x0000);  // tie between 0 and 2^-24 -> even (0)
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 units ties to 2
  EXPECT_EQ(f32_to_f16_bits(-0.0f), 0x8000);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1).
  EXPECT_EQ(f32_to_f16_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(f32_to_f16_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(f32_to_f16_bits(std::numeric_limits<float>::infinity()), 0x7c00);
  const uint16_t nan = f32_to_f16_bits(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
}

TEST(Half, EveryF16ValueSurvivesTheRoundTrip) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_bits_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16_bits(f), h) << std::hex << h;
  }
}

TEST(Half, MidpointsBetweenNeighboursTieToEven) {
  for (uint32_t h = 0; h < 0x7bff; ++h) {  // positive finite pairs (h, h+1)
    const double lo = f16_bits_to_f32(static_cast<uint16_t>(h));
    const double hi = f16_bits_to_f32(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((lo + hi) / 2);  // exact: f16 midpoints fit in float32
    const uint32_t even = (h & 1u) ? h + 1 : h;
    ASSERT_EQ(f32_to_f16_bits(mid), even) << std::hex << h;
    ASSERT_EQ(f32_to_f16_bits(std::nextafter(mid, 0.0f)), h) << std::hex << h;
    ASSERT_EQ(f32_to_f16_bits(std::nextafter(mid, 1e9f)), h + 1) << std::hex << h;
  }
}

TEST(BFloat16, RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(f32_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16_bits(bits_float(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(f32_to_bf16_bits(bits_float(0x3f818000u)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(f32_to_bf16_bits(bits_float(0x3f808001u)), 0x3f81);
  EXPECT_EQ(f32_to_bf16_bits(bits_float(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds to inf
  const uint16_t nan = f32_to_bf16_bits(bits_float(0x7f800001u));  // signalling NaN stays NaN
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
}

// ggml's fp32 -> f16/bf16 -> fp32 of a [256, 128] tensor with outlier channels and an offset.
TEST(Half, MatchesGgmlRoundTripsBitForBit) {
  const Matrix input = read_npy(testing::data_path("ggml/input.npy")).values;
  const Matrix f16 = read_npy(testing::data_path("ggml/roundtrip_f16.npy")).values;
  const Matrix bf16 = read_npy(testing::data_path("ggml/roundtrip_bf16.npy")).values;
  ASSERT_EQ(input.size(), 256 * 128);
  for (int64_t i = 0; i < input.size(); ++i) {
    ASSERT_EQ(float_bits(round_to_f16(input.data()[i])), float_bits(f16.data()[i])) << i;
    ASSERT_EQ(float_bits(round_to_bf16(input.data()[i])), float_bits(bf16.data()[i])) << i;
  }
}

#if KVTUNE_HAVE_CUDA_HEADERS
// CUDA's host-side conversions are the reference the GPU kernels will use.
TEST(Half, MatchesCudaHostConversionsBitForBit) {
  std::mt19937 engine(7);
  std::uniform_int_distribution<uint32_t> any_bits;
  for (int i = 0; i < 1000000; ++i) {
    // Half of the draws are arbitrary bit patterns, half are near the f16 range.
    uint32_t u = any_bits(engine);
    if (i % 2) u = (u & 0x807fffffu) | ((100u + (u >> 23) % 60u) << 23);
    const float f = bits_float(u);
    if (std::isnan(f)) continue;
    const __half h = __float2half_rn(f);
    uint16_t cuda_bits;
    std::memcpy(&cuda_bits, &h, 2);
    ASSERT_EQ(f32_to_f16_bits(f), cuda_bits) << std::hex << u;
    const __nv_bfloat16 b = __float2bfloat16_rn(f);
    std::memcpy(&cuda_bits, &b, 2);
    ASSERT_EQ(f32_to_bf16_bits(f), cuda_bits) << std::hex << u;
  }
}
#endif

}  // namespace
}  // namespace kvtune
