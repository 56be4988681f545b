// The tokenint family (plugins/tokenint): hand-computed rows per zero mode, each rounding mode on
// exact ties, truncation of negative codes, vLLM's zero-in-scale bit layout, the min_scale floor,
// clamping, 16-bit storage of the parameters, footprints, refusals, the runtime specs of
// docs/schemes.md, and the error of 8-bit truncation and 4-bit integer zero points on N(0, 1) data.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "kvtune/conformance.h"
#include "kvtune/error.h"
#include "kvtune/numeric/bits.h"
#include "kvtune/numeric/half.h"
#include "test_support.h"
#include "tokenint/tokenint_codec.h"
#include "tokenint/tokenint_kernels.h"

namespace kvtune {
namespace {

using testing::block;
using testing::make_scheme;

// The fused round trip, checked against dequantize(quantize()) bit for bit on the way.
Matrix both_paths(const std::string& spec, const Matrix& x) {
  const SchemePtr s = make_scheme(spec);
  Matrix fused(x.rows(), x.cols()), packed(x.rows(), x.cols());
  s->roundtrip(x, {}, fused);
  s->dequantize(s->quantize(x, {}), {}, packed);
  for (int64_t i = 0; i < x.size(); ++i) EXPECT_EQ(float_bits(fused.data()[i]), float_bits(packed.data()[i])) << spec << " " << i;
  return fused;
}

std::vector<float> row_of(const Matrix& m, int64_t r = 0) { return {m.row(r), m.row(r) + m.cols()}; }

uint32_t word_at(const std::vector<std::byte>& p, size_t offset) {
  uint32_t w;
  std::memcpy(&w, p.data() + offset, 4);
  return w;
}

float f32_at(const std::vector<std::byte>& p, size_t offset) { return bits_float(word_at(p, offset)); }

uint8_t byte_at(const std::vector<std::byte>& p, size_t offset) { return static_cast<uint8_t>(p[offset]); }

// Code i of a little-endian bit stream of `bits`-bit codes starting at byte `offset`.
uint32_t code_at(const std::vector<std::byte>& p, size_t offset, int64_t i, int bits) {
  return codec::unpack_code(reinterpret_cast<const uint8_t*>(p.data()) + offset, i, bits);
}

std::string spec_refusal(const std::string& spec) {
  try {
    make_scheme(spec);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

// ---- hand-computed rows, one per zero mode ---------------------------------------------------

TEST(TokenInt, SymmetricEightBitsEachRoundingMode) {
  // absmax 127 -> s = 127 / (128 - 1) = 1, so x / s = x: ties at -63.5, 0.5, -0.5.
  //   x        127  -63.5  0.5  -0.5  1.7  -1.7  -127
  //   even     127  -64    0    -0    2    -2    -127
  //   away     127  -64    1    -1    2    -2    -127
  //   trunc    127  -63    0    -0    1    -1    -127   (toward zero: the negative codes go up)
  const Matrix x = block(1, 7, {127.0f, -63.5f, 0.5f, -0.5f, 1.7f, -1.7f, -127.0f});
  EXPECT_THAT(row_of(both_paths("tokenint:bits=8", x)), ::testing::ElementsAre(127, -64, 0, 0, 2, -2, -127));
  EXPECT_THAT(row_of(both_paths("tokenint:bits=8,round=away", x)), ::testing::ElementsAre(127, -64, 1, -1, 2, -2, -127));
  EXPECT_THAT(row_of(both_paths("tokenint:bits=8,round=trunc", x)), ::testing::ElementsAre(127, -63, 0, 0, 1, -1, -127));
  // The record: f32 scale 1.0, then the codes q + 128 one byte each.
  const std::vector<std::byte> p = make_scheme("tokenint:bits=8,round=trunc")->quantize(x, {});
  ASSERT_EQ(p.size(), 4u + 7u);
  EXPECT_EQ(f32_at(p, 0), 1.0f);
  EXPECT_EQ(byte_at(p, 4), 255);      // 127 + 128
  EXPECT_EQ(byte_at(p, 5), 65);       // -63 + 128
  EXPECT_EQ(byte_at(p, 9), 127);      // -1 + 128
  EXPECT_EQ(byte_at(p, 10), 1);       // -127 + 128: code 0 (-128) is never reached
}

TEST(TokenInt, SymmetricFourBitsPacksNibbles) {
  // bits=4: Q = 8, absmax 7 -> s = 7 / 7 = 1; even: 7 -3.5 1.5 -7 2.5 0.49 -> 7 -4 2 -7 2 0.
  const Matrix x = block(1, 6, {7.0f, -3.5f, 1.5f, -7.0f, 2.5f, 0.49f});
  EXPECT_THAT(row_of(both_paths("tokenint:bits=4", x)), ::testing::ElementsAre(7, -4, 2, -7, 2, 0));
  // Codes q + 8 = 15 4 10 1 10 8, element 2i in the low nibble: 0x4F 0x1A 0x8A after the scale.
  const std::vector<std::byte> p = make_scheme("tokenint:bits=4")->quantize(x, {});
  ASSERT_EQ(p.size(), 4u + 3u);
  EXPECT_EQ(byte_at(p, 4), 0x4F);
  EXPECT_EQ(byte_at(p, 5), 0x1A);
  EXPECT_EQ(byte_at(p, 6), 0x8A);
}

TEST(TokenInt, MinimumFourBitsEachRoundingMode) {
  // lo = -1, hi = 14: s = 15 / 15 = 1, m = -1; (x - m) / s = 0 15 2.5 4.5 1.2.
  //   even  0 15 2 4 1   -> x' = q + m = -1 14 1 3 0
  //   away  0 15 3 5 1   -> -1 14 2 4 0
  //   up    trunc(v + 0.5) = 0 15 3 5 1 (half up on these unsigned codes) -> -1 14 2 4 0
  //   trunc 0 15 2 4 1   -> -1 14 1 3 0
  const Matrix x = block(1, 5, {-1.0f, 14.0f, 1.5f, 3.5f, 0.2f});
  EXPECT_THAT(row_of(both_paths("tokenint:bits=4,zero=min", x)), ::testing::ElementsAre(-1, 14, 1, 3, 0));
  EXPECT_THAT(row_of(both_paths("tokenint:bits=4,zero=min,round=away", x)), ::testing::ElementsAre(-1, 14, 2, 4, 0));
  EXPECT_THAT(row_of(both_paths("tokenint:bits=4,zero=min,round=up", x)), ::testing::ElementsAre(-1, 14, 2, 4, 0));
  EXPECT_THAT(row_of(both_paths("tokenint:bits=4,zero=min,round=trunc", x)), ::testing::ElementsAre(-1, 14, 1, 3, 0));
  // Record: f32 s, f32 m, then 5 nibbles 0 15 2 4 1 (even): 0xF0 0x42 0x01.
  const std::vector<std::byte> p = make_scheme("tokenint:bits=4,zero=min")->quantize(x, {});
  ASSERT_EQ(p.size(), 4u + 4u + 3u);
  EXPECT_EQ(f32_at(p, 0), 1.0f);
  EXPECT_EQ(f32_at(p, 4), -1.0f);
  EXPECT_EQ(byte_at(p, 8), 0xF0);
  EXPECT_EQ(byte_at(p, 9), 0x42);
  EXPECT_EQ(byte_at(p, 10), 0x01);
}

TEST(TokenInt, FloatZeroPointLmdeployPyTorch) {
  // lo = -2, hi = 61.75: s = 63.75 / 255 = 0.25, z = -lo / s = 8 (a float, stored f16: exact).
  // x / s + z = 0, 255, 8, 12.5, 21.2 (3.3 / 0.25 = 13.2); round=up: trunc(v + 0.5) = 0 255 8 13 21.
  // x' = (q - z) s = -2 61.75 0 1.25 3.25.
  const Matrix x = block(1, 5, {-2.0f, 61.75f, 0.0f, 1.125f, 3.3f});
  EXPECT_THAT(row_of(both_paths("tokenint:bits=8,zero=float,round=up,scale=f16", x)),
              ::testing::ElementsAre(-2.0f, 61.75f, 0.0f, 1.25f, 3.25f));
  // Record: f16 s, f16 z, then the five code bytes.
  const std::vector<std::byte> p = make_scheme("tokenint:bits=8,zero=float,round=up,scale=f16")->quantize(x, {});
  ASSERT_EQ(p.size(), 2u + 2u + 5u);
  uint16_t h[2];
  std::memcpy(h, p.data(), 4);
  EXPECT_EQ(f16_bits_to_f32(h[0]), 0.25f);
  EXPECT_EQ(f16_bits_to_f32(h[1]), 8.0f);
  EXPECT_EQ(byte_at(p, 4), 0);
  EXPECT_EQ(byte_at(p, 5), 255);
  EXPECT_EQ(byte_at(p, 7), 13);
  EXPECT_EQ(byte_at(p, 8), 21);
}

TEST(TokenInt, IntegerZeroPointRoundsOntoTheGrid) {
  // lo = -1.25, hi = 6.25: s = 7.5 / 15 = 0.5; -lo / s = 2.5, a tie: away -> z = 3 (even -> 2).
  // away: x / s + z = 0.5 15.5 3.5 1.5 5 -> 1 16 4 2 5, 16 clamped to 15; x' = (q - 3) * 0.5 =
  // -1 6 0.5 -0.5 1: the row's minimum moves by a quarter step because z is an integer.
  const Matrix x = block(1, 5, {-1.25f, 6.25f, 0.25f, -0.75f, 1.0f});
  EXPECT_THAT(row_of(both_paths("tokenint:bits=4,zero=int,round=away", x)),
              ::testing::ElementsAre(-1.0f, 6.0f, 0.5f, -0.5f, 1.0f));
  // even: z = 2 (2.5 to even); x / s + 2 = -0.5 14.5 2.5 0.5 4 -> 0 (clamped) 14 2 0 4;
  // x' = (q - 2) * 0.5 = -1 6 0 -1 1.
  EXPECT_THAT(row_of(both_paths("tokenint:bits=4,zero=int", x)), ::testing::ElementsAre(-1.0f, 6.0f, 0.0f, -1.0f, 1.0f));
  // Record without zero_in_scale: f32 s, one byte z, nibbles.
  const std::vector<std::byte> p = make_scheme("tokenint:bits=4,zero=int,round=away")->quantize(x, {});
  ASSERT_EQ(p.size(), 4u + 1u + 3u);
  EXPECT_EQ(f32_at(p, 0), 0.5f);
  EXPECT_EQ(byte_at(p, 4), 3);
  EXPECT_EQ(code_at(p, 5, 1, 4), 15u);
}

TEST(TokenInt, MidpointSglang) {
  // lo = 0, hi = 255: m = 127.5, s = 255 / 255 = 1; (x - m) / s = -127.5 127.5 0 2.5 -27.25.
  //   even  -128  128 -> clamped 127  0  2  -27   -> x' = q + m = -0.5 254.5 127.5 129.5 100.5
  //   trunc -127  127                 0  2  -27   -> 0.5 254.5 127.5 129.5 100.5
  const Matrix x = block(1, 5, {0.0f, 255.0f, 127.5f, 130.0f, 100.25f});
  EXPECT_THAT(row_of(both_paths("tokenint:bits=8,zero=mid", x)),
              ::testing::ElementsAre(-0.5f, 254.5f, 127.5f, 129.5f, 100.5f));
  EXPECT_THAT(row_of(both_paths("tokenint:bits=8,zero=mid,round=trunc", x)),
              ::testing::ElementsAre(0.5f, 254.5f, 127.5f, 129.5f, 100.5f));
  // Record: f32 s, f32 m, codes q + 128: 0 255 128 130 101.
  const std::vector<std::byte> p = make_scheme("tokenint:bits=8,zero=mid")->quantize(x, {});
  ASSERT_EQ(p.size(), 4u + 4u + 5u);
  EXPECT_EQ(f32_at(p, 4), 127.5f);
  EXPECT_EQ(byte_at(p, 8), 0);
  EXPECT_EQ(byte_at(p, 9), 255);
  EXPECT_EQ(byte_at(p, 12), 101);
}

// ---- rounding -------------------------------------------------------------------------------------

TEST(TokenInt, EachRoundingModeOnExactTies) {
  using builtin::tokenint::Round;
  using builtin::tokenint::round_code;
  //            -2.5 -1.5 -0.5  0.5  1.5  2.5
  // even        -2   -2   -0    0    2    2
  // away        -3   -2   -1    1    2    3
  // trunc       -2   -1   -0    0    1    2
  // up = trunc(v + 0.5): -2  -1   0    1    2    3   (half up, and toward zero below -0.5: why
  //                                                  tokenint refuses it for signed codes)
  const float ties[] = {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f};
  const float even[] = {-2, -2, 0, 0, 2, 2}, away[] = {-3, -2, -1, 1, 2, 3}, trunc[] = {-2, -1, 0, 0, 1, 2},
              up[] = {-2, -1, 0, 1, 2, 3};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(round_code(ties[i], Round::even), even[i]) << ties[i];
    EXPECT_EQ(round_code(ties[i], Round::away), away[i]) << ties[i];
    EXPECT_EQ(round_code(ties[i], Round::trunc), trunc[i]) << ties[i];
    EXPECT_EQ(round_code(ties[i], Round::up), up[i]) << ties[i];
  }
  EXPECT_EQ(round_code(-2.7f, Round::up), -2.0f);  // not nearest (-3): trunc(-2.2)
  EXPECT_EQ(round_code(-2.7f, Round::trunc), -2.0f);
  // Through a scheme, negative ties of signed codes (3 bits, absmax 3: s = 1):
  //   x      3  -2.5  -1.5  -0.5  1.5  2.5
  //   even   3  -2    -2    -0    2    2
  //   away   3  -3    -2    -1    2    3
  //   trunc  3  -2    -1    -0    1    2
  const Matrix x = block(1, 6, {3.0f, -2.5f, -1.5f, -0.5f, 1.5f, 2.5f});
  EXPECT_THAT(row_of(both_paths("tokenint:bits=3", x)), ::testing::ElementsAre(3, -2, -2, 0, 2, 2));
  EXPECT_THAT(row_of(both_paths("tokenint:bits=3,round=away", x)), ::testing::ElementsAre(3, -3, -2, -1, 2, 3));
  EXPECT_THAT(row_of(both_paths("tokenint:bits=3,round=trunc", x)), ::testing::ElementsAre(3, -2, -1, 0, 1, 2));
}

// The element loops' roundings (round_code_of, and round_nonnegative_code_of for v >= 0: trunc by
// an int32 conversion, half away as trunc(v + copysign(0.49999997, v))) against round_code, the
// reference, on every float within 300 ulps of each integer and half-integer of the clamped range
// [-256, 256] (0.49999997 among them), on zeros, subnormals and tiny values, for every mode. The
// zero's sign is not compared: level_of adds +0 to signed codes, and unsigned ones are +0 both ways.
TEST(TokenInt, VectorRoundingsAreTheReferenceNearEveryIntegerAndHalf) {
  using builtin::tokenint::Round;
  std::vector<float> values = {0.0f, -0.0f, 1e-45f, -1e-45f, 1e-38f, -1e-30f, 3e-8f};
  for (int k2 = -512; k2 <= 512; ++k2) {  // k2 / 2: every integer and half-integer
    const float center = 0.5f * float(k2);
    float up = center, down = center;
    values.push_back(center);
    for (int i = 0; i < 300; ++i) {
      up = std::nextafter(up, INFINITY), down = std::nextafter(down, -INFINITY);
      values.push_back(up);
      values.push_back(down);
    }
  }
  const auto same = [](float a, float b) { return float_bits(a + 0.0f) == float_bits(b + 0.0f); };
  int64_t checked = 0, mismatches = 0;
  const auto check = [&]<Round R>(float v) {
    const float want = builtin::tokenint::round_code(v, R);
    mismatches += !same(builtin::tokenint::round_code_of<R>(v), want);
    if (v >= 0.0f) mismatches += !same(builtin::tokenint::round_nonnegative_code_of<R>(v), want);
    ++checked;
  };
  for (const float v : values) {
    check.operator()<Round::even>(v);
    check.operator()<Round::away>(v);
    check.operator()<Round::trunc>(v);
    check.operator()<Round::up>(v);
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(checked, 2'000'000);
  // The value that breaks the plain trunc(v + 0.5): pred(0.5) rounds to 0 half away.
  EXPECT_EQ(builtin::tokenint::round_code_of<Round::away>(0.49999997f), 0.0f);
  EXPECT_EQ(builtin::tokenint::round_code_of<Round::away>(-0.49999997f) + 0.0f, 0.0f);
}

TEST(TokenInt, TruncationTakesNegativeCodesTowardZero) {
  // A float -> int8 cast truncates (vLLM's per-token kernel stores clamp(x * (1/scale)) so;
  // its per-token-head int8 kernel adds +-0.5 first: round=away). absmax 127 -> s = 1:
  // -126.9 -> -126, -0.99 -> -0, 0.99 -> 0, -5.5 -> -5.
  const Matrix x = block(1, 5, {127.0f, -126.9f, -0.99f, 0.99f, -5.5f});
  EXPECT_THAT(row_of(both_paths("tokenint:bits=8,round=trunc,min_scale=1e-6,reciprocal", x)),
              ::testing::ElementsAre(127, -126, 0, 0, -5));
  // ... and a positive value just under a code loses the whole step: 1.9999 -> 1.
  const Matrix y = block(1, 2, {127.0f, 1.9999f});
  EXPECT_EQ(both_paths("tokenint:bits=8,round=trunc", y)(0, 1), 1.0f);
}

TEST(TokenInt, ReciprocalMultipliesByTheFloat32InverseScale) {
  // s = 3 / 127 (not a power of two): each code is R(x * fl(1 / s)), which may differ from R(x / s).
  const Matrix x = testing::normal_matrix(64, 32, 5);
  const SchemePtr rec = make_scheme("tokenint:bits=8,round=trunc,reciprocal");
  const Matrix y = both_paths(rec->spec(), x);
  for (int64_t r = 0; r < x.rows(); ++r) {
    float amax = 0;
    for (int64_t c = 0; c < x.cols(); ++c) amax = std::max(amax, std::abs(x(r, c)));
    const float s = amax / 127.0f, inv = 1.0f / s;
    for (int64_t c = 0; c < x.cols(); ++c) {
      const float q = std::trunc(std::clamp(x(r, c) * inv, -128.0f, 127.0f));
      ASSERT_EQ(y(r, c), q * s) << r << " " << c;
    }
  }
}

// ---- vLLM's zero point in the scale ------------------------------------------------------------

TEST(TokenInt, ZeroInScaleBitLayout) {
  // vLLM int4_per_token_head: k_scale = max((max - min) / 15, 1e-6), zp = round-half-away(-min /
  // k_scale) clamped 0..15, stored scale bits = (bits(k_scale) & ~0xF) | zp; decode uses the scale
  // with those bits cleared and the codes computed with the uncleared 1 / k_scale.
  const std::string spec = "tokenint:bits=4,zero=int,round=away,min_scale=1e-6,reciprocal,zero_in_scale";
  const SchemePtr s = make_scheme(spec);
  const Matrix x = testing::normal_matrix(16, 128, 21);
  const std::vector<std::byte> p = s->quantize(x, {});
  ASSERT_EQ(p.size(), 16u * (4u + 64u));
  Matrix y(16, 128);
  s->dequantize(p, {}, y);
  int low_bits_nonzero = 0;
  for (int64_t r = 0; r < x.rows(); ++r) {
    const size_t at = size_t(r) * 68;
    float lo = x(r, 0), hi = x(r, 0);
    for (int64_t c = 0; c < 128; ++c) lo = std::min(lo, x(r, c)), hi = std::max(hi, x(r, c));
    const float k_scale = std::max((hi - lo) / 15.0f, 1e-6f);
    const float z = std::clamp(round_half_away(-lo / k_scale), 0.0f, 15.0f);
    const uint32_t word = word_at(p, at);
    EXPECT_EQ(word & 0xFu, uint32_t(z)) << r;                     // the low 4 bits are z
    EXPECT_EQ(word & ~0xFu, float_bits(k_scale) & ~0xFu) << r;  // the rest is the scale
    low_bits_nonzero += (float_bits(k_scale) & 0xFu) != 0;
    const float decoded_scale = bits_float(word & ~0xFu);
    const float inv = 1.0f / k_scale;  // the codes use the scale as computed
    for (int64_t c = 0; c < 128; ++c) {
      const float q = std::clamp(round_half_away(x(r, c) * inv + z), 0.0f, 15.0f);
      ASSERT_EQ(code_at(p, at + 4, c, 4), uint32_t(q)) << r << " " << c;
      ASSERT_EQ(y(r, c), (q - z) * decoded_scale) << r << " " << c;  // decode: the cleared scale
    }
  }
  EXPECT_GT(low_bits_nonzero, 8);  // the clearing really changed most scales
}

// ---- min_scale, clamping, constant rows ------------------------------------------------------

TEST(TokenInt, MinScaleFloorsANearConstantRow) {
  // min_scale = 2^-10 (exact). zero=none: absmax 3 * 2^-10, absmax / 127 < 2^-10 -> s = 2^-10:
  // codes 2 -3 0, exact.
  const Matrix a = block(1, 3, {0.001953125f, -0.0029296875f, 0.0f});
  EXPECT_EQ(both_paths("tokenint:bits=8,min_scale=0.0009765625", a), a);
  const std::vector<std::byte> pa = make_scheme("tokenint:bits=8,min_scale=0.0009765625")->quantize(a, {});
  EXPECT_EQ(f32_at(pa, 0), 0.0009765625f);
  // zero=min on 3, 3 + 2^-12: (hi - lo) / 15 < 2^-10 -> s = 2^-10, m = 3; (x - m) / s = 0, 0.25 -> 0 0.
  const Matrix b = block(1, 2, {3.0f, 3.000244140625f});
  EXPECT_THAT(row_of(both_paths("tokenint:bits=4,zero=min,min_scale=0.0009765625", b)), ::testing::ElementsAre(3, 3));
  // zero=int far from 0 (vLLM int4's floor of 1e-6, here 2^-10): a constant -2.5 row has s = 2^-10,
  // -lo / s = 2560 clamps z to 15, every code clamps to 0 and the row decodes to
  // (0 - 15) * 2^-10 = -0.0146484375: the integer zero point cannot reach the row.
  const Matrix c = block(1, 3, {-2.5f, -2.5f, -2.5f});
  EXPECT_THAT(row_of(both_paths("tokenint:bits=4,zero=int,round=away,min_scale=0.0009765625", c)),
              ::testing::Each(-0.0146484375f));
}

TEST(TokenInt, ClampsCodesAndTheIntegerZeroPoint) {
  // zero=int, all positive 10, 25: s = 15 / 15 = 1, -lo / s = -10 -> z clamped to 0; codes
  // x / s + 0 = 10 25 -> 10, 15 (clamped): x' = 10 15.
  const Matrix x = block(1, 2, {10.0f, 25.0f});
  EXPECT_THAT(row_of(both_paths("tokenint:bits=4,zero=int", x)), ::testing::ElementsAre(10, 15));
  // All negative -25, -10: z = R(25 / 1) clamped to 15; x / s + 15 = -10, 5 -> 0 (clamped), 5;
  // x' = (q - 15) * 1 = -15 -10.
  const Matrix y = block(1, 2, {-25.0f, -10.0f});
  EXPECT_THAT(row_of(both_paths("tokenint:bits=4,zero=int", y)), ::testing::ElementsAre(-15, -10));
  // zero=mid's top is half a step beyond the signed codes: 127.5 clamps to 127 (MidpointSglang).
}

TEST(TokenInt, ConstantAndZeroRowsAreKeptWithoutNan) {
  // min_scale 0: none: s = 2.5 / 127 > 0, x / s = -127 exactly. min, mid: s = 0, every code the
  // zero code q = 0, x' = the stored m = -2.5 exactly. float, int: at s = 0 the zero point -lo / s
  // has no value, so s = |v| / N for the row's value v and every code is the one that decodes to v:
  // float z = -v / s, q = 0; int z = N, q = 0 for v < 0 (z = 0, q = N for v > 0); x' = +-N s.
  const Matrix negative(3, 16, -2.5f), positive(2, 8, 2.5f), zeros(3, 16);
  for (const char* spec : {"tokenint:bits=8", "tokenint:bits=8,round=trunc", "tokenint:bits=4,zero=min",
                           "tokenint:bits=8,zero=mid", "tokenint:bits=4,zero=float,scale=f16",
                           "tokenint:bits=8,zero=float,round=trunc,reciprocal",
                           "tokenint:bits=4,zero=int,round=away,zero_in_scale", "tokenint:bits=2,zero=int",
                           "tokenint:bits=8,zero=int,round=trunc", "tokenint:bits=8,zero=int,round=up,scale=bf16"}) {
    for (const Matrix* x : {&negative, &positive}) {
      const Matrix y = both_paths(spec, *x);
      for (int64_t i = 0; i < y.size(); ++i) {
        ASSERT_TRUE(std::isfinite(y.data()[i])) << spec;
        ASSERT_NEAR(y.data()[i], x->data()[0], 2.5f / 256) << spec;  // bf16 s: within 2^-9
      }
    }
    EXPECT_EQ(both_paths(spec, zeros), zeros) << spec;
  }
  EXPECT_EQ(both_paths("tokenint:bits=4,zero=min", negative), negative);  // exactly
  EXPECT_EQ(both_paths("tokenint:bits=8,zero=mid", negative), negative);
  // The int record of the -2.5 row: s = 2.5 / 255, z = 255, codes 0; of the +2.5 row z = 0, codes 255.
  const SchemePtr s = make_scheme("tokenint:bits=8,zero=int,round=trunc");
  const std::vector<std::byte> pn = s->quantize(negative, {}), pp = s->quantize(positive, {});
  EXPECT_EQ(f32_at(pn, 0), 2.5f / 255.0f);
  EXPECT_EQ(byte_at(pn, 4), 255);
  EXPECT_EQ(byte_at(pn, 5), 0);
  EXPECT_EQ(byte_at(pp, 4), 0);
  EXPECT_EQ(byte_at(pp, 5), 255);
}

// A NaN inside a row (never validated input) is the lowest code on every path: the round trip gives
// what its stored code decodes to, under every rounding and zero mode. Converting the NaN was
// undefined, and on x86 the round trip gave -2^31 · s.
TEST(TokenInt, ANanElementIsTheLowestCodeOnEveryPath) {
  Matrix x(2, 16);
  for (int64_t i = 0; i < x.size(); ++i) x.data()[i] = 0.25f * float(i % 7) - 0.6f;
  x(0, 3) = std::nanf("");
  x(1, 15) = std::nanf("");
  // A NaN first makes the row's extremes NaN: its scale is NaN, so the row decodes to NaN (which
  // NaN may differ by path), and zero=int's zero point clamps to 0 instead of converting the NaN.
  Matrix first(1, 16);
  std::copy(x.row(0), x.row(0) + 16, first.data());
  first(0, 0) = std::nanf("");
  for (const char* zero : {"", ",zero=min", ",zero=mid", ",zero=float", ",zero=int"}) {
    for (const char* round : {"", ",round=away", ",round=trunc", ",round=up"}) {
      const bool signed_codes = std::string(zero).empty() || std::string(zero) == ",zero=mid";
      if (signed_codes && std::string(round) == ",round=up") continue;  // refused: unsigned codes only
      const std::string spec = std::string("tokenint:bits=8") + zero + round;
      const Matrix y = both_paths(spec, x);
      EXPECT_TRUE(std::isfinite(y(0, 3))) << spec;
      EXPECT_TRUE(std::isfinite(y(1, 15))) << spec;
      EXPECT_LE(std::fabs(y(0, 3)), 1.5f) << spec;  // the row spans [-0.6, 0.9]; its lowest code near it
      const SchemePtr s = make_scheme(spec);
      Matrix fused(1, 16), packed(1, 16);
      s->roundtrip(first, {}, fused);
      s->dequantize(s->quantize(first, {}), {}, packed);
      for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(std::isnan(fused(0, i)), std::isnan(packed(0, i))) << spec << " " << i;
    }
  }
}

// ---- the vectorized round trip against the per-element reference --------------------------------

// row_extremes (sixteen lanes) is the sequential std::min / std::max from x[0], bit for bit: with
// +0 and -0 as the minimum or maximum in either order, a NaN first or later, infinities, and
// lengths around the lane count.
TEST(TokenInt, RowExtremesAreTheSequentialOnes) {
  const float nan = std::nanf(""), inf = INFINITY;
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.0f, 1.0f);
  int checked = 0;
  for (const int64_t d : {1, 5, 16, 17, 33, 131}) {
    for (int kind = 0; kind < 8; ++kind) {
      std::vector<float> x(static_cast<size_t>(d));
      for (float& v : x) v = kind < 4 ? std::fabs(n(rng)) : n(rng);
      const size_t a = size_t(d) / 3, b = size_t(d) - 1;
      switch (kind) {
        case 0: x[a] = 0.0f, x[b] = -0.0f; break;   // minimum +0 before -0
        case 1: x[a] = -0.0f, x[b] = 0.0f; break;   // minimum -0 before +0
        case 2: x[0] = -0.0f, x[b] = 0.0f; break;
        case 3: for (float& v : x) v = (&v - x.data()) % 2 ? 0.0f : -0.0f; break;  // all zeros
        case 4: for (float& v : x) v = -std::fabs(v); x[a] = -0.0f, x[b] = 0.0f; break;  // maximum a zero
        case 5: x[0] = nan; break;
        case 6: x[b] = nan, x[a] = inf; break;
        case 7: x[a] = -inf; break;
      }
      float lo = 0.0f, hi = 0.0f;
      builtin::tokenint::row_extremes(x.data(), d, lo, hi);
      float want_lo = x[0], want_hi = x[0];
      for (int64_t i = 1; i < d; ++i) want_lo = std::min(want_lo, x[size_t(i)]), want_hi = std::max(want_hi, x[size_t(i)]);
      EXPECT_EQ(float_bits(lo), float_bits(want_lo)) << "d " << d << " kind " << kind;
      EXPECT_EQ(float_bits(hi), float_bits(want_hi)) << "d " << d << " kind " << kind;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 48);
}

// Rows of d channels for the fused paths: first sixteen Gaussian rows of magnitudes 0.01 to 100
// (a batch that fit_rows takes wholly in vector lanes), then rows of fifteen kinds in turn, so
// that each later batch of sixteen mixes rows fit in lanes with rows that need fit_row: exact
// half-step ties, a minimum or maximum that is a zero of either sign, constant and all-zero rows,
// rows near float's largest value (saturating spans), rows small enough that the scale is
// subnormal in float (the reciprocal is not finite: divide) or in f16, offsets beyond f16's range,
// an outlier, all-positive rows, rows whose integer zero point -lo / s is a tie (0.5). 53 rows:
// three batches and a tail of five.
Matrix mixed_rows(int64_t d, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  Matrix x(53, d);
  for (int64_t r = 0; r < x.rows(); ++r) {
    const int kind = r < 16 ? -1 : int((r - 16) % 15);
    for (int64_t e = 0; e < d; ++e) {
      const float g = n(rng);
      float v = g;
      switch (kind) {
        case -1: v = g * std::pow(10.0f, float(r % 5) - 2.0f); break;
        case 0: break;
        case 1: v = 0.5f * float(e % 17) - 4.0f; break;  // absmax 4: half-step ties for most scales
        case 2: v = std::fabs(g); break;
        case 3: v = -std::fabs(g); break;
        case 4: v = 1.75f; break;
        case 5: v = e % 2 ? 0.0f : -0.0f; break;
        case 6: v = 3.0e38f * (e % 3 ? 1.0f : -1.0f) * (0.5f + 0.5f * float(e) / float(d)); break;
        case 7: v = 1.0e-39f * g; break;
        case 8: v = g * (e == 5 ? 40.0f : 1.0f); break;
        case 9: v = 1.0e-4f * g; break;
        case 10: v = g + 1000.0f; break;
        case 11: v = 3.0e4f * g + 5.0e4f; break;
        case 12: v = std::fabs(g) + 0.5f; break;
        case 13: v = -0.5f + 255.0f * float(e) / float(d - 1); break;  // 8 bits, zero=int: s = 1, z = 0.5
        case 14: v = -0.5f + 15.0f * float(e) / float(d - 1); break;   // 4 bits, the same tie
      }
      x(r, e) = v;
    }
    if (kind == 2) x(r, 3) = 0.0f, x(r, 7) = -0.0f;
    if (kind == 3) x(r, 3) = -0.0f, x(r, 7) = 0.0f;
  }
  return x;
}

// The fused round trip (roundtrip_rows: the rows' parameters sixteen at a time in vector lanes,
// each convention's element loop vectorized) against dequantize(quantize()) (the per-element
// reference) on mixed_rows of 32, 128 and 131 channels, for every zero mode and rounding with and
// without the reciprocal, f16 and bf16 storage, min_scale, 4 bits and vLLM's zero-in-scale.
TEST(TokenInt, FusedRoundTripIsTheReferenceOnEveryConvention) {
  std::vector<Matrix> blocks;
  for (const int64_t d : {32, 128, 131}) blocks.push_back(mixed_rows(d, 9));
  int specs = 0;
  for (const char* zero : {"none", "min", "float", "int", "mid"}) {
    const bool signed_codes = std::string(zero) == "none" || std::string(zero) == "mid";
    for (const char* round : {"even", "away", "trunc", "up"}) {
      if (signed_codes && std::string(round) == "up") continue;  // refused
      for (const char* extra : {"", ",reciprocal", ",scale=f16", ",scale=bf16,reciprocal",
                                ",min_scale=1e-6,reciprocal", ",bits=4"}) {
        const std::string spec = std::string("tokenint:zero=") + zero + ",round=" + round + extra;
        for (const Matrix& x : blocks) both_paths(spec, x);
        ++specs;
      }
    }
  }
  for (const Matrix& x : blocks) both_paths("tokenint:bits=4,zero=int,round=away,min_scale=1e-6,reciprocal,zero_in_scale", x);
  EXPECT_EQ(specs, 108);
}

// fit_rows (sixteen rows at a time in AVX-512 lanes where the machine has them) gives each row
// fit_row's parameters, every field bit for bit, on mixed_rows with rows holding a NaN first or
// later and an infinity added, for every convention. Without AVX-512 both are fit_row.
TEST(TokenInt, SixteenRowFitIsFitRowFieldForField) {
  namespace ti = builtin::tokenint;
  Matrix x = mixed_rows(128, 11);
  x(17, 0) = std::nanf("");
  x(18, 40) = std::nanf("");
  x(19, 9) = INFINITY;
  x(20, 100) = -INFINITY;
  const auto bits_of = [](const ti::RowParams& p) {
    return std::vector<uint32_t>{float_bits(p.s), float_bits(p.r), float_bits(p.offset), float_bits(p.s_dec),
                                 float_bits(p.offset_dec), p.scale_word, float_bits(p.fixed_code)};
  };
  int configs = 0;
  for (const ti::Zero zero : {ti::Zero::none, ti::Zero::min, ti::Zero::real, ti::Zero::integer, ti::Zero::mid}) {
    for (const ti::Round round : {ti::Round::even, ti::Round::away, ti::Round::trunc, ti::Round::up}) {
      for (const ScaleType scale : {ScaleType::f32, ScaleType::f16, ScaleType::bf16}) {
        for (int variant = 0; variant < 4; ++variant) {
          ti::Config c;
          c.zero = zero, c.round = round, c.scale = scale;
          c.bits = variant % 2 ? 4 : 8;
          c.reciprocal = variant >= 2;
          c.min_scale = variant == 3 ? 1e-6f : 0.0f;
          c.zero_in_scale = zero == ti::Zero::integer && c.bits == 4 && scale == ScaleType::f32 && variant == 3;
          std::vector<ti::RowParams> p(size_t(x.rows()));
          ti::fit_rows(x.data(), x.rows(), x.cols(), c, p.data());
          for (int64_t r = 0; r < x.rows(); ++r) {
            EXPECT_EQ(bits_of(p[size_t(r)]), bits_of(ti::fit_row(x.row(r), x.cols(), c))) << "config " << configs << " row " << r;
          }
          ++configs;
        }
      }
    }
  }
  EXPECT_EQ(configs, 240);
}

// roundtrip_rows (sixteen rows' parameters at a time, then their elements) is each row's
// roundtrip_fitted_row(fit_row(row)), bit for bit, NaN rows included: rows holding a NaN or an
// infinity in the second and third batches, 53 rows (a tail of five), into another block and in
// place, for every zero mode, multiplying by fl(1/s) and dividing.
TEST(TokenInt, RoundTripRowsIsEachRowsFitAndElements) {
  namespace ti = builtin::tokenint;
  Matrix x = mixed_rows(128, 13);
  x(17, 0) = std::nanf("");
  x(31, 127) = std::nanf("");
  x(40, 64) = std::nanf("");
  x(33, 9) = INFINITY;
  x(50, 100) = -INFINITY;
  for (const ti::Zero zero : {ti::Zero::none, ti::Zero::min, ti::Zero::real, ti::Zero::integer, ti::Zero::mid}) {
    for (const bool reciprocal : {true, false}) {
      ti::Config c;
      c.zero = zero, c.round = zero == ti::Zero::none || zero == ti::Zero::mid ? ti::Round::away : ti::Round::up;
      c.scale = ScaleType::f16, c.reciprocal = reciprocal;
      Matrix want(x.rows(), x.cols()), got(x.rows(), x.cols()), in_place = x;
      for (int64_t r = 0; r < x.rows(); ++r) {
        ti::roundtrip_fitted_row(x.row(r), x.cols(), c, ti::fit_row(x.row(r), x.cols(), c), want.row(r));
      }
      ti::roundtrip_rows(x.data(), x.rows(), x.cols(), c, got.data());
      ti::roundtrip_rows(in_place.data(), x.rows(), x.cols(), c, in_place.data());
      for (int64_t i = 0; i < x.size(); ++i) {
        ASSERT_EQ(float_bits(got.data()[i]), float_bits(want.data()[i])) << "zero " << int(zero) << " reciprocal " << reciprocal << " at " << i;
        ASSERT_EQ(float_bits(in_place.data()[i]), float_bits(want.data()[i])) << "zero " << int(zero) << " reciprocal " << reciprocal << " in place at " << i;
      }
    }
  }
}

// The conventions that divide (x / s) have their element loops multiply by fl(1 / s) where no code
// can change (tokenint_kernels.cpp, roundtrip_rows16). Rows whose extremes fix s, filled with the
// floats near each code step (every half-integer of the code range) at which the multiplication and
// the division give different codes, so the guard band must catch each one: the fused round trip is
// the reference (division per element) bit for bit, for SGLang's and LMDeploy's PyTorch conventions
// and four more. Without the guard 1 000 or more elements would come out one code off. zero=float
// also gets rows far from 0, whose quotients are too large for the guard (they must divide).
TEST(TokenInt, ReciprocalStandInKeepsDivisionsCodesAtEveryStep) {
  namespace ti = builtin::tokenint;
  struct Convention {
    const char* spec;
    ti::Config c;
  };
  const auto config = [](int bits, ti::Zero zero, ti::Round round, ScaleType scale) {
    ti::Config c;
    c.bits = bits, c.zero = zero, c.round = round, c.scale = scale;
    return c;
  };
  const Convention conventions[] = {
      {"tokenint:bits=8,zero=mid,scale=f16", config(8, ti::Zero::mid, ti::Round::even, ScaleType::f16)},
      {"tokenint:bits=4,zero=float,round=up,scale=f16", config(4, ti::Zero::real, ti::Round::up, ScaleType::f16)},
      {"tokenint:bits=8,zero=float,round=up", config(8, ti::Zero::real, ti::Round::up, ScaleType::f32)},
      {"tokenint:bits=8,round=away", config(8, ti::Zero::none, ti::Round::away, ScaleType::f32)},
      {"tokenint:bits=8,zero=min,round=away", config(8, ti::Zero::min, ti::Round::away, ScaleType::f32)},
      {"tokenint:bits=4,zero=min,scale=bf16", config(4, ti::Zero::min, ti::Round::even, ScaleType::bf16)},
  };
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> u(0.2f, 3.0f);
  for (const Convention& conv : conventions) {
    const ti::Config& c = conv.c;
    const int64_t d = 128;
    Matrix x(c.bits == 8 ? 40 : 240, d);  // a 4-bit row has 15 steps, an 8-bit one 255
    int64_t off_by_one = 0;
    for (int64_t r = 0; r < x.rows(); ++r) {
      float* row = x.row(r);
      // zero=float: every fourth row all positive, far from 0 (z near -1000 N / span), so quotients
      // reach thousands and multiplying may miss by several of v's ulps.
      const bool offset_row = c.zero == ti::Zero::real && r % 4 == 3;
      const float lo = offset_row ? 1000.0f + u(rng) : -u(rng), hi = offset_row ? lo + u(rng) : u(rng);
      for (int64_t e = 0; e < d; ++e) row[e] = lo + (hi - lo) * float(e) / float(d - 1);  // extremes first and last
      const ti::RowParams p = ti::fit_row(row, d, c);
      ti::RowParams by_reciprocal = p;
      by_reciprocal.r = 1.0f / p.s;
      ASSERT_EQ(p.r, 0.0f) << conv.spec;
      // x at each step h: h s + m (none: m = 0), or (h - z) s for zero=float.
      const float qmin = ti::code_min(c), qmax = ti::code_max(c);
      int64_t slot = 1;
      for (float h = qmin + 0.5f; h < qmax && slot < d - 1; h += 1.0f) {
        const float center = c.zero == ti::Zero::real ? (h - p.offset) * p.s : h * p.s + p.offset;
        float up = center, down = center;
        int at_step = 0;  // at most eight a step, so that a 4-bit row's fifteen steps fill it too
        for (int i = 0; i < 256 && at_step < 8 && slot < d - 1; ++i) {
          for (const float v : {up, down}) {
            if (v <= lo || v >= hi || slot >= d - 1) continue;
            if (ti::level(v, c, p) != ti::level(v, c, by_reciprocal)) row[slot++] = v, ++off_by_one, ++at_step;
          }
          up = std::nextafter(up, INFINITY), down = std::nextafter(down, -INFINITY);
        }
      }
      ASSERT_EQ(float_bits(ti::fit_row(row, d, c).s), float_bits(p.s)) << conv.spec << " row " << r;
    }
    EXPECT_GE(off_by_one, 1000) << conv.spec;
    both_paths(conv.spec, x);
  }
}

// ---- 16-bit storage of the parameters ----------------------------------------------------------

TEST(TokenInt, SixteenBitStorageChangesDecodeButNotCodes) {
  const Matrix x = testing::normal_matrix(32, 64, 17, 3.0f);
  for (const char* zero : {"none", "min", "float", "int", "mid"}) {
    const std::string base = std::string("tokenint:bits=8,zero=") + zero;
    const SchemePtr f32 = make_scheme(base), f16 = make_scheme(base + ",scale=f16");
    const std::vector<std::byte> p32 = f32->quantize(x, {}), p16 = f16->quantize(x, {});
    const bool has_offset = std::string(zero) != "none";
    const size_t off32 = has_offset ? (std::string(zero) == "int" ? 1 : 4) : 0;
    const size_t off16 = has_offset ? (std::string(zero) == "int" ? 1 : 2) : 0;
    const size_t rec32 = 4 + off32 + 64, rec16 = 2 + off16 + 64;
    ASSERT_EQ(p32.size(), 32 * rec32) << zero;
    ASSERT_EQ(p16.size(), 32 * rec16) << zero;
    Matrix y32(32, 64), y16(32, 64);
    f32->dequantize(p32, {}, y32);
    f16->dequantize(p16, {}, y16);
    int differ = 0;
    for (int64_t r = 0; r < 32; ++r) {
      // The codes are the same bytes: computed from the float32 parameters either way.
      EXPECT_EQ(0, std::memcmp(p32.data() + r * rec32 + 4 + off32, p16.data() + r * rec16 + 2 + off16, 64)) << zero << r;
      uint16_t hs;
      std::memcpy(&hs, p16.data() + r * rec16, 2);
      EXPECT_EQ(f16_bits_to_f32(hs), round_to_f16(f32_at(p32, r * rec32))) << zero << r;  // the f16 of the f32 scale
      for (int64_t c = 0; c < 64; ++c) differ += y32(r, c) != y16(r, c);
    }
    EXPECT_GT(differ, 32 * 64 / 2) << zero;  // decoding with the rounded parameters moves most values
  }
}

// ---- footprints and refusals -----------------------------------------------------------------------

TEST(TokenInt, FootprintIsWhatQuantizeReturns) {
  struct Case {
    const char* spec;
    size_t per_token_d128;
  };
  const Case cases[] = {
      {"tokenint:bits=8", 128 + 4},
      {"tokenint:bits=4", 64 + 4},
      {"tokenint:bits=8,zero=min,scale=f16", 128 + 2 + 2},
      {"tokenint:bits=4,zero=float,scale=bf16", 64 + 2 + 2},
      {"tokenint:bits=4,zero=int", 64 + 4 + 1},
      {"tokenint:bits=4,zero=int,zero_in_scale", 64 + 4},
      {"tokenint:bits=2,zero=int,scale=f16", 32 + 2 + 1},
      {"tokenint:bits=3,zero=mid", 48 + 4 + 4},
  };
  for (const Case& c : cases) {
    const SchemePtr s = make_scheme(c.spec);
    EXPECT_EQ(s->footprint(1, 128), c.per_token_d128) << c.spec;
    for (auto [t, d] : {std::pair<int64_t, int64_t>{1, 128}, {7, 5}, {33, 64}, {3, 1}, {2, 127}}) {
      EXPECT_EQ(s->quantize(testing::normal_matrix(t, d, 4), {}).size(), s->footprint(t, d)) << c.spec << " " << t << "x" << d;
      EXPECT_EQ(s->footprint(t, d), size_t(t) * s->footprint(1, d)) << c.spec;  // one record per token
    }
  }
  // A row's codes are byte-aligned per token: 3 bits x 5 channels = 15 bits -> 2 bytes.
  EXPECT_EQ(make_scheme("tokenint:bits=3")->footprint(7, 5), 7u * (4u + 2u));
}

TEST(TokenInt, RefusalsNameTheSpecAndTheKey) {
  EXPECT_EQ(spec_refusal("tokenint:zero=min,zero_in_scale,bits=4"),
            "scheme spec 'tokenint:bits=4,zero=min,zero_in_scale': 'zero_in_scale' needs zero=int (vLLM hides its "
            "integer zero point in the scale's 4 low mantissa bits); found zero=min");
  EXPECT_EQ(spec_refusal("tokenint:bits=8,zero=int,zero_in_scale"),
            "scheme spec 'tokenint:bits=8,zero=int,zero_in_scale': 'zero_in_scale' needs bits <= 4: the zero point "
            "(0..255 at bits=8) must fit the scale's 4 low mantissa bits");
  EXPECT_EQ(spec_refusal("tokenint:bits=4,zero=int,zero_in_scale,scale=f16"),
            "scheme spec 'tokenint:bits=4,zero=int,scale=f16,zero_in_scale': 'zero_in_scale' needs scale=f32: the "
            "zero point lives in the low mantissa bits of a float32 scale; found scale=f16");
  EXPECT_THAT(spec_refusal("tokenint:round=up"),
              ::testing::StartsWith("scheme spec 'tokenint:bits=8,zero=none,round=up': 'round=up' is LMDeploy's"));
  EXPECT_THAT(spec_refusal("tokenint:zero=mid,round=up"), ::testing::HasSubstr("zero=mid has signed codes"));
  EXPECT_THAT(spec_refusal("tokenint:min_scale=-1"), ::testing::HasSubstr("'min_scale' must be >= 0 (found -1)"));
  EXPECT_THAT(spec_refusal("tokenint:min_scale=1e-60"),
              ::testing::HasSubstr("'min_scale' = 1e-60 does not fit a float32"));
  EXPECT_THAT(spec_refusal("tokenint:bits=9"),
              ::testing::HasSubstr("parameter 'bits' = '9' is not valid; expected 2..8"));
  EXPECT_THAT(spec_refusal("tokenint:zero=asym"), ::testing::HasSubstr("expected none|min|float|int|mid"));
}

TEST(TokenInt, CanonicalSpelling) {
  EXPECT_EQ(make_scheme("tokenint")->spec(), "tokenint:bits=8,zero=none");
  EXPECT_EQ(make_scheme("tokenint:round=even,scale=f32,min_scale=0.0")->spec(), "tokenint:bits=8,zero=none");
  EXPECT_EQ(make_scheme("tokenint:min_scale=0.000001")->spec(), make_scheme("tokenint:min_scale=1e-6")->spec());
  EXPECT_EQ(make_scheme("tokenint:min_scale=1e-6")->spec(), "tokenint:bits=8,zero=none,min_scale=1e-06");
  // The examples of docs/schemes.md's canonical-spelling table.
  EXPECT_EQ(make_scheme("tokenint:reciprocal,min_scale=0.000001,round=trunc")->spec(),
            "tokenint:bits=8,zero=none,round=trunc,min_scale=1e-06,reciprocal");
  EXPECT_EQ(make_scheme("tokenint:rotation=rht,zero=int,bits=4,zero_in_scale")->spec(),
            "tokenint:bits=4,zero=int,zero_in_scale,rotation=rht");
  EXPECT_FALSE(make_scheme("tokenint:bits=4,zero=int")->device_format().has_value());
  EXPECT_FALSE(make_scheme("tokenint:bits=4,zero=int")->traits().device_format);
  EXPECT_TRUE(make_scheme("tokenint:round=trunc")->traits().requantize_drifts);
  EXPECT_TRUE(make_scheme("tokenint:zero=mid")->traits().requantize_drifts);
  EXPECT_FALSE(make_scheme("tokenint:bits=4,zero=int,round=away")->traits().requantize_drifts);
}

// ---- the runtime settings of docs/schemes.md ---------------------------------------------------------

TEST(TokenInt, RuntimeSpecsParseWithTheirFootprints) {
  struct Runtime {
    const char* written;
    const char* canonical;
    size_t bytes_per_token_d128;
  };
  const Runtime runtimes[] = {
      // vLLM int8_per_token_head (@055e47c2: +-0.5, then the truncating int8 store): 128 int8
      // codes + an f32 scale; and the truncating variant (no +-0.5), the string of the brief.
      {"tokenint:bits=8,round=away,min_scale=1e-6,reciprocal",
       "tokenint:bits=8,zero=none,round=away,min_scale=1e-06,reciprocal", 128 + 4},
      {"tokenint:bits=8,round=trunc,min_scale=1e-6,reciprocal",
       "tokenint:bits=8,zero=none,round=trunc,min_scale=1e-06,reciprocal", 128 + 4},
      // vLLM int4_per_token_head: 64 bytes of nibbles + an f32 scale holding the zero point.
      {"tokenint:bits=4,zero=int,round=away,min_scale=1e-6,reciprocal,zero_in_scale,rotation=rht",
       "tokenint:bits=4,zero=int,round=away,min_scale=1e-06,reciprocal,zero_in_scale,rotation=rht", 64 + 4},
      // LMDeploy PyTorch engine, quant-policy 8 and 4: codes + f16 scale + f16 zero.
      {"tokenint:bits=8,zero=float,round=up,scale=f16", "tokenint:bits=8,zero=float,round=up,scale=f16", 128 + 4},
      {"tokenint:bits=4,zero=float,round=up,scale=f16", "tokenint:bits=4,zero=float,round=up,scale=f16", 64 + 4},
      // LMDeploy TurboMind: codes + f16 scale + f16 minimum; its quantization.h rounds with
      // cvt.rni (ties to even) after multiplying by 1/scale: the second pair. The first pair is
      // the spelling with round=away.
      {"tokenint:bits=8,zero=min,round=away,scale=f16", "tokenint:bits=8,zero=min,round=away,scale=f16", 128 + 4},
      {"tokenint:bits=4,zero=min,round=away,scale=f16", "tokenint:bits=4,zero=min,round=away,scale=f16", 64 + 4},
      {"tokenint:bits=8,zero=min,round=even,scale=f16,reciprocal", "tokenint:bits=8,zero=min,scale=f16,reciprocal",
       128 + 4},
      {"tokenint:bits=4,zero=min,round=even,scale=f16,reciprocal", "tokenint:bits=4,zero=min,scale=f16,reciprocal",
       64 + 4},
      // SGLang PR #22004's --int8-kv-cache (never merged): codes + f16 scale + f16 midpoint.
      {"tokenint:bits=8,zero=mid,round=even,scale=f16", "tokenint:bits=8,zero=mid,scale=f16", 128 + 4},
  };
  for (const Runtime& r : runtimes) {
    const SchemePtr s = make_scheme(r.written);
    EXPECT_EQ(s->spec(), r.canonical) << r.written;
    EXPECT_EQ(make_scheme(s->spec())->spec(), s->spec());
    EXPECT_EQ(s->footprint(1, 128), r.bytes_per_token_d128) << r.written;
    EXPECT_EQ(s->footprint(4096, 128), 4096 * r.bytes_per_token_d128) << r.written;
    // Every conformance check (the enumerated suite has min_scale 0 and no rht).
    for (const conformance::Result& c : conformance::check_scheme(*s, builtin_registry())) {
      EXPECT_TRUE(c.passed) << r.written << " " << c.check << ": " << c.message;
    }
  }
}

// ---- error on N(0, 1) data -----------------------------------------------------------------------------

// Relative RMS error of the round trip, ||x' - x|| / ||x||, on 4096 x 128 N(0, 1) values (seed
// 2026), against the uniform-error prediction: rounding to nearest leaves an error uniform on
// [-s/2, s/2] (variance s^2/12), truncation one on [0, s) toward zero (variance s^2/3: twice the
// RMS), so the prediction is P = sqrt(mean over rows of s_r^2 / 12 / mean x^2), each row's own s_r.
// The elements that land exactly on a code carry no error: symmetric absmax puts 1 of 128 there
// (factor sqrt(127/128)), a float minimum 2 (the minimum on code 0 and the maximum on the top:
// sqrt(126/128)); an integer zero point moves the grid off both extremes, so all 128 err.
// Measured at this seed: P = 0.006493 (8 bits) and 0.100695 (4 bits); relative RMS error 0.006467
// (8 bits, even), 0.012913 (trunc: 1.997x), 0.099980 (4 bits, zero=min), 0.100647 (zero=int,
// 0.9995 P). The bands below are 0.5 % (1 % for truncation) around those predictions.
TEST(TokenInt, ErrorOnGaussianRows) {
  const Matrix x = testing::normal_matrix(4096, 128, 2026);
  double sym_s2 = 0, asym_s2 = 0, x2 = 0;  // sums of s_r^2 (8-bit symmetric, 4-bit min/max) and x^2
  for (int64_t r = 0; r < x.rows(); ++r) {
    float lo = x(r, 0), hi = x(r, 0);
    for (int64_t c = 0; c < x.cols(); ++c) {
      lo = std::min(lo, x(r, c)), hi = std::max(hi, x(r, c));
      x2 += double(x(r, c)) * x(r, c);
    }
    sym_s2 += std::pow(std::max(-lo, hi) / 127.0, 2);
    asym_s2 += std::pow((hi - lo) / 15.0, 2);
  }
  const double inv_mean_x2 = double(x.size()) / x2;
  const double predicted8 = std::sqrt(sym_s2 / double(x.rows()) / 12 * inv_mean_x2);
  const double predicted4 = std::sqrt(asym_s2 / double(x.rows()) / 12 * inv_mean_x2);
  const double even8 = testing::roundtrip_rel_err("tokenint:bits=8", x);
  const double trunc8 = testing::roundtrip_rel_err("tokenint:bits=8,round=trunc", x);
  const double trunc8_rec = testing::roundtrip_rel_err("tokenint:bits=8,round=trunc,min_scale=1e-6,reciprocal", x);
  const double vllm8 = testing::roundtrip_rel_err("tokenint:bits=8,round=away,min_scale=1e-6,reciprocal", x);
  const double int4 = testing::roundtrip_rel_err("tokenint:bits=4,zero=int,round=away", x);
  const double vllm4 =
      testing::roundtrip_rel_err("tokenint:bits=4,zero=int,round=away,min_scale=1e-6,reciprocal,zero_in_scale", x);
  const double min4 = testing::roundtrip_rel_err("tokenint:bits=4,zero=min,round=away", x);
  SCOPED_TRACE("predicted 8-bit " + std::to_string(predicted8) + ", 4-bit " + std::to_string(predicted4) +
               "; even8 " + std::to_string(even8) + " trunc8 " + std::to_string(trunc8) + " int4 " +
               std::to_string(int4) + " min4 " + std::to_string(min4));
  // Truncation is biased: twice the error of rounding to nearest.
  EXPECT_GT(trunc8, 1.9 * even8);
  EXPECT_NEAR(trunc8 / even8, 2.0, 0.03);
  EXPECT_NEAR(even8 / (predicted8 * std::sqrt(127.0 / 128)), 1.0, 0.005);
  EXPECT_NEAR(trunc8 / (2 * predicted8 * std::sqrt(127.0 / 128)), 1.0, 0.01);
  // The floor never binds here, and x * (1/s) moves only a few codes.
  EXPECT_NEAR(trunc8_rec, trunc8, 1e-3 * trunc8);
  EXPECT_NEAR(vllm8, even8, 1e-3 * even8);  // ties are rare: away and even err alike
  // 4 bits: the integer zero point errs on every element, the float minimum on all but two.
  EXPECT_NEAR(int4 / predicted4, 1.0, 0.005);
  EXPECT_NEAR(min4 / (predicted4 * std::sqrt(126.0 / 128)), 1.0, 0.005);
  EXPECT_GT(int4, min4);
  EXPECT_NEAR(vllm4, int4, 1e-3 * int4);  // reciprocal and the cleared scale bits change almost nothing
}

// zero_in_scale, round=trunc and zero=mid declare requantize_drifts (the conformance fixed-point
// check does not apply); what re-quantizing a round trip does instead, on keys-like data:
TEST(TokenInt, HowRequantizingDrifts) {
  const Matrix x = conformance::keys_like({64, 128}, 4);
  auto worst_move = [&](const std::string& spec, double& amax) {
    const SchemePtr s = make_scheme(spec);
    Matrix once(64, 128), twice(64, 128);
    s->roundtrip(x, {}, once);
    s->roundtrip(once, {}, twice);
    double worst = 0;
    amax = 0;
    for (int64_t i = 0; i < once.size(); ++i) {
      worst = std::max(worst, double(std::abs(twice.data()[i] - once.data()[i])));
      amax = std::max(amax, double(std::abs(once.data()[i])));
    }
    return worst;
  };
  double amax = 0;
  // The cleared scale: values move by at most 16 ulps of the scale times 15 steps, 2^-19 * 15 * s.
  const double zis = worst_move("tokenint:bits=4,zero=int,round=away,zero_in_scale,rotation=rht", amax);
  EXPECT_LT(zis, 15 * std::ldexp(1.0, -19) * amax);
  EXPECT_LT(worst_move("tokenint:bits=4,zero=int,round=away,zero_in_scale", amax), 15 * std::ldexp(1.0, -19) * amax);
  // Truncation and the midpoint move values by up to one code step (s = amax / 127 or range / 255).
  const double trunc8 = worst_move("tokenint:bits=8,round=trunc", amax);
  EXPECT_LE(trunc8, 1.01 * amax / 127);
  EXPECT_GT(trunc8, 1e-6 * amax);  // really not a fixed point
  const double mid8 = worst_move("tokenint:bits=8,zero=mid", amax);
  EXPECT_LE(mid8, 1.01 * 2 * amax / 255);
  EXPECT_GT(mid8, 1e-6 * amax);
  // Rounding to nearest with a float or integer zero point is a fixed point (the suite checks it).
  EXPECT_LT(worst_move("tokenint:bits=4,zero=int,round=away", amax), 1e-6 * amax);
  EXPECT_LT(worst_move("tokenint:bits=8,zero=float,round=up,scale=f16", amax), 1e-6 * amax);
}

}  // namespace
}  // namespace kvtune
