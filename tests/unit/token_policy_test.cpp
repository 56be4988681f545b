// The token policy around a scheme: sinks and a residual window kept as f16, append blocks
// quantized on their own, a partially filled block kept exact until it fills, and the footprint
// counting every stored byte.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "kvtune/error.h"
#include "kvtune/memory.h"
#include "kvtune/numeric/bits.h"
#include "kvtune/numeric/half.h"
#include "test_support.h"

namespace kvtune {
namespace {

using ::testing::HasSubstr;
using testing::make_scheme;

Matrix keys(int64_t t, int64_t d, uint64_t seed) {
  Matrix m = testing::normal_matrix(t, d, seed);
  for (int64_t r = 0; r < t; ++r) m(r, 1) = m(r, 1) * 20.0f + 3.0f;  // an outlier channel with an offset
  return m;
}

TEST(TokenPolicy, SpecIsCanonicalAndRoundTrips) {
  const SchemePtr s = make_scheme("int:block_tokens=32,bits=4,residual_window=8,axis=channel,sink_tokens=4");
  EXPECT_EQ(s->spec(), "int:bits=4,axis=channel,sink_tokens=4,residual_window=8,block_tokens=32");
  EXPECT_EQ(make_scheme(s->spec())->spec(), s->spec());
  EXPECT_EQ(make_scheme("f16:sink_tokens=2")->spec(), "f16:sink_tokens=2");
  EXPECT_EQ(make_scheme("q4_0:residual_window=16,rotation=hadamard")->spec(), "q4_0:rotation=hadamard,residual_window=16");
}

TEST(TokenPolicy, FootprintCountsF16TokensAndEachBlock) {
  const SchemePtr s = make_scheme("int:bits=4,axis=channel,sink_tokens=4,residual_window=8,block_tokens=32");
  // T = 100: 4 sinks, 88 tokens between -> 2 full blocks of 32, 24 partial + 8 window -> 36 f16 rows.
  const size_t inner = make_scheme("int:bits=4,axis=channel")->footprint(32, 16);
  EXPECT_EQ(inner, 32u * 16u / 2u + 16u * 4u);
  EXPECT_EQ(s->footprint(100, 16), 36u * 16u * 2u + 2u * inner);
  EXPECT_EQ(s->quantize(keys(100, 16, 1), {}).size(), s->footprint(100, 16));
}

TEST(TokenPolicy, ExactRegionsAreF16AndBlocksAreQuantizedAlone) {
  const SchemePtr s = make_scheme("int:bits=2,axis=channel,asym,sink_tokens=3,residual_window=5,block_tokens=16");
  const SchemePtr inner = make_scheme("int:bits=2,axis=channel,asym");
  const Matrix x = keys(60, 16, 2);  // 3 sinks, 52 between: 3 blocks of 16, 4 partial + 5 window
  Matrix y(60, 16);
  s->roundtrip(x, {}, y);
  for (int64_t r : {0, 1, 2, 51, 55, 59}) {
    for (int64_t c = 0; c < 16; ++c) ASSERT_EQ(y(r, c), round_to_f16(x(r, c))) << r << ", " << c;
  }
  for (int64_t b = 0; b < 3; ++b) {
    Matrix alone(16, 16);
    inner->roundtrip(x.view().row_range(3 + 16 * b, 16), {}, alone);
    for (int64_t r = 0; r < 16; ++r) {
      for (int64_t c = 0; c < 16; ++c) ASSERT_EQ(y(3 + 16 * b + r, c), alone(r, c)) << b << " " << r << " " << c;
    }
  }
  Matrix via_packed(60, 16);
  s->dequantize(s->quantize(x, {}), {}, via_packed);
  EXPECT_EQ(via_packed, y);
}

// The sink and window rows go through the bulk f16 conversion (F16C, eight lanes, then a scalar
// tail): every special value, f16's overflow and subnormal boundaries and exact ties, in rows whose
// length leaves a tail, come out as the scalar round_to_f16's bits in the round trip and in the
// packed path alike.
TEST(TokenPolicy, ExactRowsAreTheScalarF16BitsOnEveryKindOfValue) {
  const SchemePtr s = make_scheme("int:bits=8,axis=token,sink_tokens=3,residual_window=5");
  const float specials[] = {0.0f,     -0.0f,     INFINITY, -INFINITY, NAN,     -NAN,    65504.0f, 65519.99f,
                            65520.0f, -65520.0f, 6.1e-5f,  5.96e-8f,  2.98e-8f, 2.99e-8f, 1e-10f,  -3e-7f,
                            1.00048828125f, 1.00146484375f, 2049.0f, 2051.0f, 3.3333f, -1e30f, 7.0e-6f};
  const int64_t n = sizeof(specials) / sizeof(specials[0]);
  Matrix x = keys(40, 37, 5);  // 3 * 37 and 5 * 37 elements: eight-lane bodies and scalar tails
  const int64_t exact_rows[] = {0, 1, 2, 35, 36, 37, 38, 39};
  for (int64_t r : exact_rows) {
    for (int64_t c = 0; c < x.cols(); c += 2) x(r, c) = specials[(r * 7 + c) % n];
  }
  Matrix y(x.rows(), x.cols()), via_packed(x.rows(), x.cols());
  s->roundtrip(x, {}, y);
  s->dequantize(s->quantize(x, {}), {}, via_packed);
  for (int64_t r : exact_rows) {
    for (int64_t c = 0; c < x.cols(); ++c) {
      ASSERT_EQ(float_bits(y(r, c)), float_bits(round_to_f16(x(r, c)))) << r << ", " << c;
      ASSERT_EQ(float_bits(via_packed(r, c)), float_bits(y(r, c))) << r << ", " << c;
    }
  }
}

TEST(TokenPolicy, AResidualWindowLowersTheError) {
  const Matrix x = keys(512, 64, 3);
  auto rel_err = [&](const std::string& spec) { return testing::roundtrip_rel_err(spec, x); };
  const double none = rel_err("int:bits=2,axis=channel,group=32,asym");
  const double w128 = rel_err("int:bits=2,axis=channel,group=32,asym,residual_window=128");
  const double w256 = rel_err("int:bits=2,axis=channel,group=32,asym,residual_window=256");
  EXPECT_LT(w128, 0.9 * none);
  EXPECT_LT(w256, 0.9 * w128);
}

TEST(TokenPolicy, RefusesPoliciesThatCannotApply) {
  const SchemePtr s = make_scheme("int:bits=4,axis=token,sink_tokens=8,residual_window=8");
  EXPECT_THAT(s->check_shape(16, 32), HasSubstr("sink_tokens + residual_window = 16 leaves nothing to quantize"));
  EXPECT_EQ(s->check_shape(17, 32), "");
  const SchemePtr big = make_scheme("int:bits=4,axis=token,block_tokens=64");
  EXPECT_THAT(big->check_shape(63, 32), HasSubstr("block_tokens=64 is larger than the 63 tokens"));
  EXPECT_THROW(big->quantize(keys(63, 32, 4), {}), InputError);
  EXPECT_THAT(make_scheme("q4_0:sink_tokens=2")->check_shape(8, 48), HasSubstr("multiple of the 32-element"));
}

TEST(TokenPolicy, MemoryModelCountsTheExactTokens) {
  // 4 sinks + 128 window tokens of 4096 at f16 beside 2-bit codes: bits/element is measured.
  const SchemePtr s = make_scheme("int:bits=2,axis=token,sink_tokens=4,residual_window=128");
  const double bits = s->bits_per_element(4096, 128);
  const double expected = (132.0 * 128 * 16 + 3964.0 * (128 * 2 + 32)) / (4096.0 * 128);
  EXPECT_NEAR(bits, expected, 1e-12);
}

}  // namespace
}  // namespace kvtune
