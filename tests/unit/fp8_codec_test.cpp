// FP8 E4M3/E5M2 conversions: hand-computed boundary values, every midpoint between neighbouring
// codes, an independent nearest-value oracle, and (when the toolkit is installed) CUDA's own host
// conversions from <cuda_fp8.h>, bit for bit over more than 100 000 values.
#include "kvtune/codecs/fp8_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kvtune/numeric/bits.h"

#if KVTUNE_HAVE_CUDA_HEADERS
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

namespace kvtune {
namespace {

using codec::f32_to_fp8;
using codec::f32_to_fp8_e4m3;
using codec::f32_to_fp8_e5m2;
using codec::fp8_e4m3_to_f32;
using codec::fp8_e5m2_to_f32;
using codec::fp8_to_f32;
using codec::Fp8Format;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr Fp8Format kFormats[] = {Fp8Format::e4m3, Fp8Format::e5m2};

// Largest finite code of each format (OCP FP8 spec v1.0: E4M3 0x7e = 448, E5M2 0x7b = 57344).
uint8_t max_code(Fp8Format f) { return f == Fp8Format::e4m3 ? 0x7e : 0x7b; }

TEST(Fp8E4M3, HandComputedValues) {
  EXPECT_EQ(f32_to_fp8_e4m3(1.0f), 0x38);    // exponent 7 (bias 7), mantissa 0
  EXPECT_EQ(f32_to_fp8_e4m3(-2.5f), 0xc2);   // 1.25 * 2^1
  EXPECT_EQ(f32_to_fp8_e4m3(448.0f), 0x7e);  // largest finite
  EXPECT_EQ(f32_to_fp8_e4m3(449.0f), 0x7e);  // saturates
  // 464 is the midpoint between 448 and the 480 E4M3 lacks (0x7f is NaN): ties to even keeps 448
  // (mantissa 110), and beyond it SATFINITE saturates, so every value from 448 up is 0x7e.
  EXPECT_EQ(f32_to_fp8_e4m3(464.0f), 0x7e);
  EXPECT_EQ(f32_to_fp8_e4m3(std::nextafter(464.0f, kInf)), 0x7e);
  EXPECT_EQ(f32_to_fp8_e4m3(480.0f), 0x7e);
  EXPECT_EQ(f32_to_fp8_e4m3(1e30f), 0x7e);
  EXPECT_EQ(f32_to_fp8_e4m3(kInf), 0x7e);
  EXPECT_EQ(f32_to_fp8_e4m3(-kInf), 0xfe);
  EXPECT_EQ(f32_to_fp8_e4m3(-448.0f), 0xfe);
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(1.0f, -6)), 0x08);   // smallest normal
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(1.0f, -9)), 0x01);   // smallest subnormal
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(7.0f, -9)), 0x07);   // largest subnormal
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(7.5f, -9)), 0x08);   // tie between 0x07 and 0x08 -> even
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(1.0f, -10)), 0x00);  // tie between 0 and 2^-9 -> even (0)
  EXPECT_EQ(f32_to_fp8_e4m3(std::nextafter(std::ldexp(1.0f, -10), 1.0f)), 0x01);
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(3.0f, -10)), 0x02);   // 1.5 subnormal units -> 2
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(5.0f, -10)), 0x02);   // 2.5 units -> 2
  EXPECT_EQ(f32_to_fp8_e4m3(-std::ldexp(1.0f, -12)), 0x80);  // underflow keeps the sign
  EXPECT_EQ(f32_to_fp8_e4m3(1.0625f), 0x38);                 // midpoint of 1 and 1.125 -> even (1)
  EXPECT_EQ(f32_to_fp8_e4m3(1.1875f), 0x3a);                 // midpoint of 1.125 and 1.25 -> even (1.25)
  EXPECT_EQ(f32_to_fp8_e4m3(15.5f), 0x58);  // midpoint of 15 (0x57) and 16 (0x58): carry into the exponent
  EXPECT_EQ(f32_to_fp8_e4m3(0.0f), 0x00);
  EXPECT_EQ(f32_to_fp8_e4m3(-0.0f), 0x80);
  EXPECT_EQ(f32_to_fp8_e4m3(std::numeric_limits<float>::denorm_min()), 0x00);
  EXPECT_EQ(f32_to_fp8_e4m3(std::numeric_limits<float>::quiet_NaN()), 0x7f);
  EXPECT_EQ(f32_to_fp8_e4m3(-std::numeric_limits<float>::quiet_NaN()), 0x7f);  // CUDA drops the sign
  EXPECT_EQ(f32_to_fp8_e4m3(bits_float(0x7f800001u)), 0x7f);                   // signalling NaN
}

TEST(Fp8E5M2, HandComputedValues) {
  EXPECT_EQ(f32_to_fp8_e5m2(1.0f), 0x3c);      // exponent 15 (bias 15), mantissa 0
  EXPECT_EQ(f32_to_fp8_e5m2(57344.0f), 0x7b);  // largest finite
  EXPECT_EQ(f32_to_fp8_e5m2(61440.0f), 0x7b);  // midpoint to 65536 (inf): saturates
  EXPECT_EQ(f32_to_fp8_e5m2(65536.0f), 0x7b);
  EXPECT_EQ(f32_to_fp8_e5m2(kInf), 0x7b);
  EXPECT_EQ(f32_to_fp8_e5m2(-kInf), 0xfb);
  EXPECT_EQ(f32_to_fp8_e5m2(std::ldexp(1.0f, -14)), 0x04);  // smallest normal
  EXPECT_EQ(f32_to_fp8_e5m2(std::ldexp(1.0f, -16)), 0x01);  // smallest subnormal
  EXPECT_EQ(f32_to_fp8_e5m2(std::ldexp(1.0f, -17)), 0x00);  // tie to even (0)
  EXPECT_EQ(f32_to_fp8_e5m2(std::ldexp(3.0f, -17)), 0x02);
  EXPECT_EQ(f32_to_fp8_e5m2(std::ldexp(3.5f, -16)), 0x04);  // tie between 0x03 and 0x04 -> even
  EXPECT_EQ(f32_to_fp8_e5m2(1.125f), 0x3c);                 // midpoint of 1 and 1.25 -> even (1)
  EXPECT_EQ(f32_to_fp8_e5m2(1.375f), 0x3e);                 // midpoint of 1.25 and 1.5 -> even (1.5)
  EXPECT_EQ(f32_to_fp8_e5m2(448.0f), 0x5f);                 // E4M3's maximum is 1.75 * 2^8 here too
  EXPECT_EQ(f32_to_fp8_e5m2(-0.0f), 0x80);
  EXPECT_EQ(f32_to_fp8_e5m2(std::numeric_limits<float>::quiet_NaN()), 0x7f);
  EXPECT_EQ(f32_to_fp8_e5m2(-std::numeric_limits<float>::quiet_NaN()), 0x7f);
}

TEST(Fp8, DecodesSpecialCodes) {
  EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0xfe), -448.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_e4m3_to_f32(0x07), std::ldexp(7.0f, -9));
  EXPECT_EQ(fp8_e4m3_to_f32(0x08), std::ldexp(1.0f, -6));
  EXPECT_EQ(fp8_e4m3_to_f32(0x77), 240.0f);  // exponent 14 is a normal binade in E4M3
  EXPECT_EQ(float_bits(fp8_e4m3_to_f32(0x80)), 0x80000000u);
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0xff)));
  EXPECT_EQ(fp8_e5m2_to_f32(0x7b), 57344.0f);
  EXPECT_EQ(fp8_e5m2_to_f32(0x01), std::ldexp(1.0f, -16));
  EXPECT_EQ(fp8_e5m2_to_f32(0x03), std::ldexp(3.0f, -16));
  EXPECT_EQ(fp8_e5m2_to_f32(0x7c), kInf);
  EXPECT_EQ(fp8_e5m2_to_f32(0xfc), -kInf);
  for (uint8_t c : {0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff}) EXPECT_TRUE(std::isnan(fp8_e5m2_to_f32(c))) << int(c);
  EXPECT_EQ(codec::kFp8E4M3MaxFinite, fp8_e4m3_to_f32(0x7e));
  EXPECT_EQ(codec::kFp8E5M2MaxFinite, fp8_e5m2_to_f32(0x7b));
}

// Every finite code decodes to a value that encodes back to the same code.
TEST(Fp8, EveryFiniteCodeRoundTrips) {
  for (Fp8Format f : kFormats) {
    for (uint32_t c = 0; c < 256; ++c) {
      const float v = fp8_to_f32(static_cast<uint8_t>(c), f);
      if (!std::isfinite(v)) continue;
      ASSERT_EQ(f32_to_fp8(v, f), c) << "format " << int(f) << " code " << std::hex << c;
    }
  }
}

// Between each pair of neighbouring positive codes: the midpoint ties to the even code, the float
// just below it goes down and the one just above goes up; the same for the negatives.
TEST(Fp8, MidpointsBetweenNeighboursTieToEven) {
  for (Fp8Format f : kFormats) {
    for (uint32_t c = 0; c < max_code(f); ++c) {
      const double lo = fp8_to_f32(static_cast<uint8_t>(c), f);
      const double hi = fp8_to_f32(static_cast<uint8_t>(c + 1), f);
      const float mid = static_cast<float>((lo + hi) / 2);  // exact: one more bit than the codes
      const uint32_t even = (c & 1u) ? c + 1 : c;
      ASSERT_EQ(f32_to_fp8(mid, f), even) << int(f) << " " << c;
      ASSERT_EQ(f32_to_fp8(std::nextafter(mid, 0.0f), f), c) << int(f) << " " << c;
      ASSERT_EQ(f32_to_fp8(std::nextafter(mid, kInf), f), c + 1) << int(f) << " " << c;
      ASSERT_EQ(f32_to_fp8(-mid, f), even | 0x80u) << int(f) << " " << c;
      ASSERT_EQ(f32_to_fp8(-std::nextafter(mid, kInf), f), (c + 1) | 0x80u) << int(f) << " " << c;
    }
  }
}

// An oracle that knows nothing about bit layouts: the nearest of all finite values (ties to the
// even code), saturating at the largest. It checks a million random floats around the fp8 range.
TEST(Fp8, MatchesANearestValueOracle) {
  for (Fp8Format f : kFormats) {
    std::vector<double> values;  // positive finite values, ascending with the code
    for (uint32_t c = 0; c <= max_code(f); ++c) values.push_back(fp8_to_f32(static_cast<uint8_t>(c), f));
    auto oracle = [&](float x) -> uint32_t {
      const uint32_t sign = std::signbit(x) ? 0x80u : 0u;
      const double a = std::fabs(static_cast<double>(x));
      if (a >= values.back()) return sign | max_code(f);
      const auto up = static_cast<uint32_t>(std::upper_bound(values.begin(), values.end(), a) - values.begin());
      const uint32_t down = up - 1;
      const double dlo = a - values[down], dhi = values[up] - a;
      const uint32_t code = dlo < dhi ? down : (dhi < dlo ? up : ((down & 1u) ? up : down));
      return sign | code;
    };
    std::mt19937 engine(11);
    std::uniform_int_distribution<uint32_t> any_bits;
    for (int i = 0; i < 1000000; ++i) {
      const uint32_t u = any_bits(engine);
      // Exponents 2^-20 .. 2^19 cover the zero flush, both subnormal ranges and both saturations.
      const float x = bits_float((u & 0x807fffffu) | ((107u + (u >> 23) % 40u) << 23));
      ASSERT_EQ(f32_to_fp8(x, f), oracle(x)) << int(f) << " " << std::hex << float_bits(x);
    }
  }
}

TEST(Fp8, ScaledQuantizeDividesAndDequantizeMultiplies) {
  EXPECT_EQ(codec::fp8_quantize(3.0f, 2.0f, Fp8Format::e4m3), 0x3c);  // 3 / 2 = 1.5
  EXPECT_EQ(codec::fp8_dequantize(0x3c, 2.0f, Fp8Format::e4m3), 3.0f);
  EXPECT_EQ(codec::fp8_quantize(1000.0f, 1.0f, Fp8Format::e4m3), 0x7e);  // unit scale clips at 448
  EXPECT_EQ(codec::fp8_fit_scale(896.0f, Fp8Format::e4m3), 2.0f);
  EXPECT_EQ(codec::fp8_fit_scale(57344.0f, Fp8Format::e5m2), 1.0f);
  EXPECT_EQ(codec::fp8_fit_scale(0.0f, Fp8Format::e4m3), 1.0f);  // all-zero group
}

#if KVTUNE_HAVE_CUDA_HEADERS
uint8_t cuda_encode(float x, Fp8Format f) {
  return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, f == Fp8Format::e4m3 ? __NV_E4M3 : __NV_E5M2);
}

float cuda_decode(uint8_t code, Fp8Format f) {
  const __half_raw raw = __nv_cvt_fp8_to_halfraw(code, f == Fp8Format::e4m3 ? __NV_E4M3 : __NV_E5M2);
  return __half2float(__half(raw));
}

// The values where conversions go wrong: every code value and its float neighbours, every midpoint
// between neighbouring codes (ties, in every binade, subnormals included) and its neighbours, the
// saturation points and beyond, infinities, NaNs, float subnormals and both zeros, for both signs;
// then random bit patterns, half of them arbitrary and half within the fp8 exponent range.
std::vector<float> fp8_hard_values() {
  std::vector<float> v;
  auto add_around = [&](float x) {
    for (float s : {x, -x}) {
      v.push_back(s);
      v.push_back(std::nextafter(s, kInf));
      v.push_back(std::nextafter(s, -kInf));
    }
  };
  for (Fp8Format f : kFormats) {
    for (uint32_t c = 0; c <= max_code(f); ++c) {
      const double value = fp8_to_f32(static_cast<uint8_t>(c), f);
      add_around(static_cast<float>(value));
      // The midpoint to the next code; above the largest code, the midpoint to the value one more
      // step would have (464 for E4M3, 61440 for E5M2).
      const double next = c < max_code(f) ? fp8_to_f32(static_cast<uint8_t>(c + 1), f)
                                          : value + (value - fp8_to_f32(static_cast<uint8_t>(c - 1), f));
      add_around(static_cast<float>((value + next) / 2));
    }
  }
  for (float x : {480.0f, 896.0f, 65536.0f, 1e6f, 3.4e38f, std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(), 1e-30f}) {
    add_around(x);
  }
  for (uint32_t nan : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu, 0x7fa00000u, 0x7f900000u}) {
    v.push_back(bits_float(nan));
  }
  v.push_back(kInf);
  v.push_back(-kInf);
  v.push_back(0.0f);
  v.push_back(-0.0f);
  std::mt19937 engine(5);
  std::uniform_int_distribution<uint32_t> any_bits;
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = any_bits(engine);
    if (i % 2) u = (u & 0x807fffffu) | ((100u + (u >> 23) % 60u) << 23);  // 2^-27 .. 2^32
    v.push_back(bits_float(u));
  }
  return v;
}

TEST(Fp8, MatchesCudaHostConversionsBitForBit) {
  const std::vector<float> values = fp8_hard_values();
  ASSERT_GE(values.size(), 100000u);
  for (Fp8Format f : kFormats) {
    for (float x : values) {
      ASSERT_EQ(f32_to_fp8(x, f), cuda_encode(x, f)) << "format " << int(f) << " input " << std::hex << float_bits(x);
    }
  }
}

TEST(Fp8, DecodingMatchesCudaForEveryCode) {
  for (Fp8Format f : kFormats) {
    for (uint32_t c = 0; c < 256; ++c) {
      const float ours = fp8_to_f32(static_cast<uint8_t>(c), f);
      const float cuda = cuda_decode(static_cast<uint8_t>(c), f);
      if (std::isnan(cuda)) {
        ASSERT_TRUE(std::isnan(ours)) << int(f) << " " << c;  // CUDA's NaN is canonical, so is ours
      } else {
        ASSERT_EQ(float_bits(ours), float_bits(cuda)) << int(f) << " " << c;
      }
    }
  }
}
#endif

}  // namespace
}  // namespace kvtune
