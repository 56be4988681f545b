// The int family against hand-computed blocks: scales, levels, round half to even, clamping,
// grouping, bit packing and the footprint.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "kvtune/codecs/int_codec.h"
#include "kvtune/codecs/scale_storage.h"
#include "kvtune/error.h"
#include "kvtune/numeric/bits.h"
#include "kvtune/numeric/half.h"
#include "test_support.h"

namespace kvtune {
namespace {

using testing::block;
using testing::make_scheme;
using testing::read_f32;
using testing::roundtrip;

TEST(IntScheme, SymmetricPerTensorTwoBitsHandComputed) {
  // 2 bits symmetric: levels -1, 0, 1; s = amax / 1 = 4.
  const Matrix x = block(1, 4, {4.0f, -1.9f, 2.0f, -2.1f});
  const Matrix y = roundtrip("int:bits=2", x);
  // x/s = 1, -0.475, 0.5 (tie -> 0), -0.525 -> 1, 0, 0, -1
  EXPECT_EQ(y(0, 0), 4.0f);
  EXPECT_EQ(y(0, 1), 0.0f);
  EXPECT_EQ(y(0, 2), 0.0f);
  EXPECT_EQ(y(0, 3), -4.0f);
}

TEST(IntScheme, RoundHalfToEvenOnExactTies) {
  // 3 bits: qmax = 3, s = 3/3 = 1: x/s are exact ties 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -1.5 -> -2.
  const Matrix x = block(1, 5, {3.0f, 0.5f, 1.5f, 2.5f, -1.5f});
  const Matrix y = roundtrip("int:bits=3", x);
  EXPECT_EQ(y(0, 1), 0.0f);
  EXPECT_EQ(y(0, 2), 2.0f);
  EXPECT_EQ(y(0, 3), 2.0f);
  EXPECT_EQ(y(0, 4), -2.0f);
}

TEST(IntScheme, EightBitMatchesTheArticleFormula) {
  const Matrix x = testing::normal_matrix(16, 8, 3);
  float amax = 0;
  for (int64_t i = 0; i < x.size(); ++i) amax = std::max(amax, std::abs(x.data()[i]));
  const float s = amax / 127.0f;
  const Matrix y = roundtrip("int:bits=8", x);
  for (int64_t i = 0; i < x.size(); ++i) {
    const float expected = std::nearbyint(std::clamp(x.data()[i] / s, -127.0f, 127.0f)) * s;
    ASSERT_EQ(y.data()[i], expected) << i;
  }
}

TEST(IntScheme, PerChannelAndPerTokenUseTheirOwnScales) {
  // Column 1 is 100x column 0: per channel keeps column 0 exact, per tensor zeroes it at 2 bits.
  const Matrix x = block(2, 2, {1.0f, 100.0f, -1.0f, -100.0f});
  EXPECT_EQ(roundtrip("int:bits=2,axis=channel", x), x);
  EXPECT_EQ(roundtrip("int:bits=2,axis=tensor", x)(0, 0), 0.0f);
  const Matrix rows = block(2, 2, {1.0f, -1.0f, 100.0f, -100.0f});
  EXPECT_EQ(roundtrip("int:bits=2,axis=token", rows), rows);
}

TEST(IntScheme, ChannelGroupsAreBlocksOfTokens) {
  // axis=channel,group=2: rows {0,1} and {2} of each column get their own scale.
  const Matrix x = block(3, 1, {1.0f, 0.4f, 50.0f});
  const Matrix y = roundtrip("int:bits=2,axis=channel,group=2", x);
  EXPECT_EQ(y(0, 0), 1.0f);
  EXPECT_EQ(y(1, 0), 0.0f);  // 0.4 / 1 rounds to 0
  EXPECT_EQ(y(2, 0), 50.0f);
  // One f32 scale per (token block, channel): 2 blocks x 1 channel.
  EXPECT_EQ(make_scheme("int:bits=2,axis=channel,group=2")->footprint(3, 1), 2u * 4u + 1u);
}

TEST(IntScheme, TokenGroupsAreBlocksOfChannels) {
  const Matrix x = block(1, 4, {1.0f, 0.5f, 8.0f, -8.0f});
  const Matrix y = roundtrip("int:bits=2,axis=token,group=2", x);
  EXPECT_EQ(y(0, 0), 1.0f);
  EXPECT_EQ(y(0, 1), 0.0f);  // 0.5 ties to even 0
  EXPECT_EQ(y(0, 2), 8.0f);
  EXPECT_EQ(y(0, 3), -8.0f);
  EXPECT_NE(make_scheme("int:bits=4,axis=token,group=48")->check_shape(4, 128), "");
  EXPECT_THROW(make_scheme("int:bits=4,axis=token,group=3")->quantize(x, {}), InputError);
}

TEST(IntScheme, AsymmetricKeepsAnOffsetChannel) {
  // Values in [10, 13]: 2-bit asym gives levels 10, 11, 12, 13 exactly; symmetric cannot.
  const Matrix x = block(4, 1, {10.0f, 11.0f, 12.0f, 13.0f});
  EXPECT_EQ(roundtrip("int:bits=2,axis=channel,asym", x), x);
  EXPECT_NE(roundtrip("int:bits=2,axis=channel", x), x);
}

TEST(IntScheme, ConstantAndZeroBlocks) {
  const Matrix zeros(3, 4);
  EXPECT_EQ(roundtrip("int:bits=4,axis=token", zeros), zeros);
  EXPECT_EQ(roundtrip("int:bits=4,axis=token,asym", zeros), zeros);
  const Matrix constant(3, 4, 2.5f);
  EXPECT_EQ(roundtrip("int:bits=4,axis=channel,asym", constant), constant);  // minimum is exact
  EXPECT_EQ(roundtrip("int:bits=4,axis=channel", constant), constant);       // 7 * (2.5/7) == 2.5 here
}

TEST(IntScheme, PackedLayoutSymmetricFourBits) {
  // s = 7/7 = 1, codes = level + 8 packed two per byte, element 0 in the low nibble.
  const Matrix x = block(1, 4, {7.0f, -7.0f, 0.0f, 3.0f});
  const auto packed = make_scheme("int:bits=4")->quantize(x, {});
  ASSERT_EQ(packed.size(), 4u + 2u);
  EXPECT_EQ(read_f32(packed, 0), 1.0f);
  EXPECT_EQ(std::to_integer<int>(packed[4]), (15 << 0) | (1 << 4));
  EXPECT_EQ(std::to_integer<int>(packed[5]), (8 << 0) | (11 << 4));
}

TEST(IntScheme, PackedLayoutAsymmetricThreeBitsCrossesBytes) {
  // min 0, max 7: s = 1, codes = x; stream of 3-bit codes 1,2,...: bits LSB first.
  const Matrix x = block(1, 8, {0, 1, 2, 3, 4, 5, 6, 7});
  const auto packed = make_scheme("int:bits=3,asym")->quantize(x, {});
  ASSERT_EQ(packed.size(), 4u + 4u + 3u);  // scale, minimum, 24 bits of codes
  EXPECT_EQ(read_f32(packed, 0), 1.0f);
  EXPECT_EQ(read_f32(packed, 4), 0.0f);
  uint32_t stream = 0;
  for (int i = 0; i < 3; ++i) stream |= std::to_integer<uint32_t>(packed[8 + i]) << (8 * i);
  for (uint32_t i = 0; i < 8; ++i) EXPECT_EQ((stream >> (3 * i)) & 7u, i);
}

TEST(IntScheme, F16ScalesAreRoundedBeforeQuantizing) {
  // amax 1 / 127 is not an f16 value; the stored scale is, and dequantize reproduces roundtrip.
  const Matrix x = testing::normal_matrix(8, 8, 11);
  const SchemePtr s = make_scheme("int:bits=8,axis=token,scale=f16");
  const auto packed = s->quantize(x, {});
  EXPECT_EQ(packed.size(), 8u * 2u + 64u);
  Matrix a(8, 8), b(8, 8);
  s->dequantize(packed, {}, a);
  s->roundtrip(x, {}, b);
  EXPECT_EQ(a, b);
  uint16_t h;
  std::memcpy(&h, packed.data(), 2);
  float amax = 0;
  for (int c = 0; c < 8; ++c) amax = std::max(amax, std::abs(x(0, c)));
  EXPECT_EQ(f16_bits_to_f32(h), round_to_f16(amax / 127.0f));
}

TEST(IntScheme, FootprintCountsScalesMinimaAndPackedCodes) {
  EXPECT_EQ(make_scheme("int:bits=8,axis=channel")->footprint(4096, 128), 4096u * 128u + 128u * 4u);
  EXPECT_EQ(make_scheme("int:bits=4,axis=token,group=32,scale=f16")->footprint(10, 128), 10u * 64u + 40u * 2u);
  EXPECT_EQ(make_scheme("int:bits=2,axis=channel,group=32,asym")->footprint(33, 4), 33u + 8u * 4u * 2u);
  EXPECT_NEAR(make_scheme("int:bits=4,axis=token,group=32,scale=f16")->bits_per_element(4096, 128), 4.5, 1e-12);
  EXPECT_EQ(make_scheme("int:bits=3")->footprint(1, 3), 4u + 2u);  // 9 bits round up to 2 bytes
}

TEST(IntScheme, DescribesItselfToKernels) {
  const auto f = make_scheme("int:bits=4,axis=channel,group=32,asym,scale=f16")->device_format();
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, CodecKind::integer);
  EXPECT_EQ(f->bits, 4);
  EXPECT_EQ(f->axis, GroupAxis::channel);
  EXPECT_EQ(f->group, 32);
  EXPECT_TRUE(f->asymmetric);
  EXPECT_EQ(f->scale_type, ScaleType::f16);
}

}  // namespace
}  // namespace kvtune

namespace kvtune {
namespace {

// Values near the ends of the float range: the asymmetric span (6e38) overflows float and
// saturates to FLT_MAX, so the round trip stays finite instead of decoding 0 * inf; what lies
// beyond min + FLT_MAX clips there.
TEST(IntScheme, AsymmetricSpanNearFloatMaxStaysFinite) {
  Matrix x(1, 4);
  x(0, 0) = 3e38f;
  x(0, 1) = -3e38f;
  x(0, 2) = 1.0f;
  x(0, 3) = -2e38f;
  Matrix y(1, 4);
  testing::make_scheme("int:bits=8,asym")->roundtrip(x, {}, y);
  for (int c = 0; c < 4; ++c) EXPECT_TRUE(std::isfinite(y(0, c))) << c;
  EXPECT_EQ(y(0, 1), -3e38f);                           // the minimum is stored exactly
  EXPECT_NEAR(y(0, 0), -3e38f + 3.4028235e38f, 1e36f);  // clipped at min + FLT_MAX
}

}  // namespace
}  // namespace kvtune

namespace kvtune {
namespace {

// The fast paths take eight groups at a time (per token: eight groups of channels, sixteen on
// AVX-512 when a group is a multiple of 16 channels; per channel: eight channels), their scales
// and minimums as vectors by the scalar codec's operations in its order; the round trip must be
// dequantize ∘ quantize bit for bit, whatever the axis, scale dtype, bits, symmetry and group
// size, on rows scaled from float32's subnormals to past f16's and bf16's range, constant rows,
// zero rows of either sign, and rows with an infinity or a NaN (those batches take the one-group
// path; a per-channel NaN's own output is left out, below).
TEST(IntScheme, EightGroupsAtOnceAreTheGenericBits) {
  std::mt19937 engine(23);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t rows = 37, d = 128;
  Matrix x(rows, d);
  for (int64_t r = 0; r < rows; ++r) {
    const float scale = std::ldexp(1.0f, int(r % 19) * 14 - 140);  // 2^-140 .. 2^112
    for (int64_t c = 0; c < d; ++c) x(r, c) = normal(engine) * scale;
  }
  for (int64_t c = 0; c < d; ++c) {
    x(3, c) = 0.0f;
    x(4, c) = c % 2 ? -0.0f : 0.0f;
    x(5, c) = 1.5f;                                // constant
    x(6, c) = -2.5e-3f;                            // constant, negative
    x(7, c) = c % 3 ? 1e-3f * float(c) : 3.0e38f;  // one huge value per few channels
  }
  x(8, 17) = INFINITY;
  x(9, 90) = NAN;
  x(10, 5) = -INFINITY;
  x(11, 64) = NAN;  // a NaN first in its group: a scalar min/max keeps it, a vector one can lose it
  x(12, 0) = NAN;
  for (const char* scale : {"f32", "f16", "bf16"}) {
    for (const char* sym : {"", ",asym"}) {
      for (const int bits : {2, 3, 4, 8}) {
        for (const int group : {8, 16, 32, 64, 128}) {
          for (const char* axis : {"token", "channel"}) {
            const std::string spec = "int:bits=" + std::to_string(bits) + ",axis=" + axis +
                                     ",group=" + std::to_string(group) + sym + ",scale=" + scale;
            const SchemePtr s = make_scheme(spec);
            Matrix fast(rows, d), generic(rows, d);
            s->roundtrip(x, {}, fast);
            s->dequantize(s->quantize(x, {}), {}, generic);
            for (int64_t i = 0; i < fast.size(); ++i) {
              // A NaN input's own output differs by path on the per-channel axis (roundtrip passes the
              // NaN on, quantize stores a finite code); every other element must agree.
              if (std::isnan(x.data()[i]) && std::string(axis) == "channel") continue;
              ASSERT_EQ(float_bits(fast.data()[i]), float_bits(generic.data()[i]))
                  << spec << " at [" << i / d << ", " << i % d << "]: " << x.data()[i];
            }
          }
        }
      }
    }
  }
}

// Per channel, a group whose float32 scale is subnormal has no finite reciprocal, and then every
// level of the block must be divided. Round trip and packed path share the fit, so the expected
// values come from the codec's formulas, group by group: columns of values near 2^-135 beside
// ordinary ones, in several positions of an eight-group batch, whole and in groups of 32 tokens.
TEST(IntScheme, ChannelGroupsWithoutAReciprocalDivide) {
  std::mt19937 engine(31);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t rows = 96, d = 128;
  struct Case {
    const char* spec;
    int bits;
    bool asym;
    int64_t tokens_per_group;
  };
  for (const int64_t tiny_column : {int64_t(0), int64_t(5), int64_t(77), int64_t(127)}) {
    Matrix x(rows, d);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < d; ++c) x(r, c) = normal(engine) * (c == tiny_column ? std::ldexp(1.0f, -135) : 1.0f);
    }
    for (const Case& k : {Case{"int:bits=8,axis=channel,scale=f32", 8, false, rows},
                          Case{"int:bits=4,axis=channel,asym,scale=f32", 4, true, rows},
                          Case{"int:bits=4,axis=channel,group=32,asym,scale=f32", 4, true, 32},
                          Case{"int:bits=2,axis=channel,group=32,scale=f32", 2, false, 32}}) {
      SCOPED_TRACE(k.spec);
      const Matrix y = roundtrip(k.spec, x);
      const float qmax = codec::int_sym_qmax(k.bits), top = codec::int_asym_top(k.bits);
      for (int64_t c = 0; c < d; ++c) {
        for (int64_t r0 = 0; r0 < rows; r0 += k.tokens_per_group) {
          float lo = x(r0, c), hi = x(r0, c);
          for (int64_t r = r0; r < r0 + k.tokens_per_group; ++r) lo = std::min(lo, x(r, c)), hi = std::max(hi, x(r, c));
          const float m = k.asym ? codec::stored_minimum(lo, ScaleType::f32) : 0.0f;
          const float s = k.asym ? codec::int_asym_scale(m, hi, k.bits, ScaleType::f32)
                                 : codec::int_sym_scale(std::max(-lo, hi), k.bits, ScaleType::f32);
          if (c == tiny_column) {
            ASSERT_FALSE(std::isfinite(1.0f / codec::int_divisor(s))) << "the case needs a reciprocal that overflows";
          }
          for (int64_t r = r0; r < r0 + k.tokens_per_group; ++r) {
            const float level = k.asym ? codec::int_asym_level(x(r, c), m, codec::int_divisor(s), top)
                                       : codec::int_sym_level(x(r, c), codec::int_divisor(s), qmax);
            const float expected = k.asym ? level * s + m : level * s;
            ASSERT_EQ(float_bits(y(r, c)), float_bits(expected))
                << "column " << tiny_column << ", element [" << r << ", " << c << "]";
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvtune
