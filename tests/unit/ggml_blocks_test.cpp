// llama.cpp's cache types against ggml's own output: round trips of a [256, 128] tensor with outlier
// and offset channels bit for bit, packed q4_0 and iq4_nl blocks byte for byte, and hand-computed
// blocks for the rules that matter (ties, zero blocks, first max wins, f16 scale overflow, the two
// q8_0 variants).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kvtune/codecs/ggml_blocks.h"
#include "kvtune/file_io.h"
#include "kvtune/npy.h"
#include "kvtune/numeric/bits.h"
#include "test_support.h"

namespace kvtune {
namespace {

using testing::data_path;
using testing::make_scheme;
using testing::roundtrip;

Matrix ggml_input() { return read_npy(data_path("ggml/input.npy")).values; }

void expect_bits_equal(const Matrix& got, const Matrix& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  int64_t mismatches = 0, first = -1;
  for (int64_t i = 0; i < got.size(); ++i) {
    if (float_bits(got.data()[i]) != float_bits(want.data()[i])) {
      if (first < 0) first = i;
      ++mismatches;
    }
  }
  EXPECT_EQ(mismatches, 0) << what << ": first mismatch at " << first << " got " << got.data()[first] << " want "
                           << want.data()[first];
}

class GgmlReference : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(GgmlReference, RoundTripMatchesGgmlBitForBit) {
  const auto& [spec, file] = GetParam();
  expect_bits_equal(roundtrip(spec, ggml_input()), read_npy(data_path("ggml/" + file)).values, spec);
}

INSTANTIATE_TEST_SUITE_P(
    CacheTypes, GgmlReference,
    ::testing::Values(std::pair{"q8_0", "roundtrip_q8_0.npy"}, std::pair{"q8_0:variant=x86", "roundtrip_q8_0_x86cpu.npy"},
                      std::pair{"q4_0", "roundtrip_q4_0.npy"}, std::pair{"q4_1", "roundtrip_q4_1.npy"},
                      std::pair{"q5_0", "roundtrip_q5_0.npy"}, std::pair{"q5_1", "roundtrip_q5_1.npy"},
                      std::pair{"iq4_nl", "roundtrip_iq4_nl.npy"}, std::pair{"f16", "roundtrip_f16.npy"},
                      std::pair{"bf16", "roundtrip_bf16.npy"}),
    [](const auto& param) {
      std::string name = param.param.first;
      for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name;
    });

TEST(GgmlPacked, Q4_0AndIq4nlBytesMatchGgml) {
  for (const std::string type : {"q4_0", "iq4_nl"}) {
    const auto packed = make_scheme(type)->quantize(ggml_input(), {});
    const auto want = read_file(data_path("ggml/packed_" + type + ".bin"));
    ASSERT_EQ(packed.size(), want.size()) << type;
    EXPECT_EQ(packed, want) << type;
  }
}

TEST(GgmlFootprint, BitsPerElementAreGgmlBlockSizes) {
  EXPECT_EQ(make_scheme("q8_0")->bits_per_element(4, 128), 8.5);
  EXPECT_EQ(make_scheme("q4_0")->bits_per_element(4, 128), 4.5);
  EXPECT_EQ(make_scheme("q4_1")->bits_per_element(4, 128), 5.0);
  EXPECT_EQ(make_scheme("q5_0")->bits_per_element(4, 128), 5.5);
  EXPECT_EQ(make_scheme("q5_1")->bits_per_element(4, 128), 6.0);
  EXPECT_EQ(make_scheme("iq4_nl")->bits_per_element(4, 128), 4.5);
  EXPECT_NE(make_scheme("q4_0")->check_shape(4, 80), "");  // 80 channels are not whole blocks
}

float block_scale(const uint8_t* block) { return ggml::get_half(block); }

TEST(GgmlBlocks, Q4_0FirstMaxWinsAndCodesTruncate) {
  float x[32] = {};
  x[3] = -6.0f;  // |-6| == |6|: the first one (negative) sets d = -6 / -8 = 0.75
  x[9] = 6.0f;
  x[4] = 0.375f;  // x/d = 0.5 -> trunc(0.5 + 8.5) = 9
  uint8_t block[18];
  ggml::quantize_q4_0(x, block);
  EXPECT_EQ(block_scale(block), 0.75f);
  EXPECT_EQ(block[2 + 3] & 0x0f, 0);          // -6/0.75 = -8 -> code 0
  EXPECT_EQ(block[2 + 9] & 0x0f, 15);         // +8 + 8.5 = 16.5 -> 16 -> clamped to 15
  EXPECT_EQ(block[2 + 4] & 0x0f, 9);
  float y[32];
  ggml::dequantize_q4_0(block, y);
  EXPECT_EQ(y[3], -6.0f);
  EXPECT_EQ(y[9], 5.25f);  // the positive extreme loses a step: (15 - 8) * 0.75
  EXPECT_EQ(y[4], 0.75f);
}

TEST(GgmlBlocks, AllZeroBlocksDecodeToZero) {
  const float x[32] = {};
  float y[32];
  uint8_t block[34];
  using Quantize = void (*)(const float*, uint8_t*);
  using Dequantize = void (*)(const uint8_t*, float*);
  const std::pair<Quantize, Dequantize> codecs[] = {{ggml::quantize_q8_0, ggml::dequantize_q8_0},
                                                    {ggml::quantize_q4_0, ggml::dequantize_q4_0},
                                                    {ggml::quantize_q4_1, ggml::dequantize_q4_1},
                                                    {ggml::quantize_q5_0, ggml::dequantize_q5_0},
                                                    {ggml::quantize_q5_1, ggml::dequantize_q5_1}};
  for (auto [q, dq] : codecs) {
    q(x, block);
    EXPECT_EQ(block_scale(block), 0.0f);
    dq(block, y);
    for (float v : y) EXPECT_EQ(v, 0.0f);
  }
}

TEST(GgmlBlocks, Q8_0VariantsRoundTiesDifferently) {
  float x[32] = {};
  x[0] = 127.0f;  // amax 127: d = 1, both multipliers are exactly 1
  x[1] = 2.5f;    // a tie: ref rounds away from zero (3), x86 to even (2)
  x[2] = -3.5f;   // ref -4, x86 -4
  x[3] = -0.5f;   // ref -1, x86 -0
  uint8_t ref[34], x86[34];
  ggml::quantize_q8_0(x, ref);
  ggml::quantize_q8_0_x86(x, x86);
  EXPECT_EQ(int8_t(ref[2 + 1]), 3);
  EXPECT_EQ(int8_t(x86[2 + 1]), 2);
  EXPECT_EQ(int8_t(ref[2 + 2]), -4);
  EXPECT_EQ(int8_t(x86[2 + 2]), -4);
  EXPECT_EQ(int8_t(ref[2 + 3]), -1);
  EXPECT_EQ(int8_t(x86[2 + 3]), 0);
}

TEST(GgmlBlocks, F16ScaleOverflowBecomesInfinite) {
  float x[32] = {};
  x[0] = 1e7f;  // d = 1e7 / 127 > 65504: the f16 scale is +inf, as in ggml
  x[1] = 5.0f;
  uint8_t block[34];
  ggml::quantize_q8_0(x, block);
  EXPECT_TRUE(std::isinf(block_scale(block)));
  float y[32];
  ggml::dequantize_q8_0(block, y);
  EXPECT_TRUE(std::isinf(y[0]));
  EXPECT_TRUE(std::isnan(y[1]));  // code 0 times inf
}

// A block below about 1e-37: its scale's reciprocal overflows, so x / d is infinite (NaN for a 0),
// which C++ cannot convert to int. Every conversion gives x86's INT_MIN, on the host and on the
// device alike (PTX would saturate): q8_0 stores code 0 (INT_MIN's low byte), q4_0 clamps INT_MIN to
// nothing and keeps its nibble 0, and the f16 scale flushes to 0, so the block decodes to zeros.
TEST(GgmlBlocks, ATinyBlockConvertsAsX86Does) {
  EXPECT_EQ(ggml::truncate_to_int(std::numeric_limits<float>::infinity()), std::numeric_limits<int>::min());
  EXPECT_EQ(ggml::truncate_to_int(-std::numeric_limits<float>::infinity()), std::numeric_limits<int>::min());
  EXPECT_EQ(ggml::truncate_to_int(std::numeric_limits<float>::quiet_NaN()), std::numeric_limits<int>::min());
  EXPECT_EQ(ggml::truncate_to_int(2147483648.0f), std::numeric_limits<int>::min());
  EXPECT_EQ(ggml::truncate_to_int(-2147483648.0f), std::numeric_limits<int>::min());
  EXPECT_EQ(ggml::truncate_to_int(2147483520.0f), 2147483520);  // the largest float below 2^31
  EXPECT_EQ(ggml::truncate_to_int(-7.9f), -7);
  float x[ggml::kBlock];
  for (int j = 0; j < ggml::kBlock; ++j) x[j] = (j % 3 - 1) * 1e-38f * float(j);  // zeros and +-tiny values
  uint8_t block[ggml::kMaxBlockBytes];
  ggml::quantize_q8_0(x, block);
  for (int j = 0; j < ggml::kBlock; ++j) EXPECT_EQ(block[2 + j], 0u) << j;
  ggml::quantize_q8_0_x86(x, block);
  for (int j = 0; j < ggml::kBlock; ++j) EXPECT_EQ(block[2 + j], 0u) << j;
  float y[ggml::kBlock];
  ggml::quantize_q4_0(x, block);
  ggml::dequantize_q4_0(block, y);
  for (int j = 0; j < ggml::kBlock; ++j) EXPECT_EQ(y[j], 0.0f) << j;
}

TEST(GgmlBlocks, Q5FifthBitsLiveInALittleEndianWord) {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = float(j);  // min 0, max 31: d = 1, codes = j
  uint8_t block[24];
  ggml::quantize_q5_1(x, block);
  uint32_t qh;
  std::memcpy(&qh, block + 4, 4);
  EXPECT_EQ(qh, 0xffff0000u);             // elements 16..31 have the fifth bit
  EXPECT_EQ(block[8 + 1], 1 | (1 << 4));  // element 1 low, element 17 (= 0x11) high nibble
  float y[32];
  ggml::dequantize_q5_1(block, y);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], float(j));
}

// ggml's best_index_int8 picks the lower entry only when strictly nearer: ties go up.
TEST(GgmlBlocks, Iq4nlPicksNearestCodebookEntryUpperOnTies) {
  EXPECT_EQ(ggml::iq4nl_nearest(-200.0f), 0);
  EXPECT_EQ(ggml::iq4nl_nearest(200.0f), 15);
  EXPECT_EQ(ggml::iq4nl_nearest(1.0f), 8);
  EXPECT_EQ(ggml::iq4nl_nearest(7.0f), 9);   // midway between 1 and 13
  EXPECT_EQ(ggml::iq4nl_nearest(6.9f), 8);
  EXPECT_EQ(ggml::iq4nl_nearest(-4.5f), 8);  // midway between -10 and 1
}

// ggml's best_index_int8 (ggml-quants.c) as written there: a binary search, then the nearer of the
// two neighbours.
int best_index_int8_as_ggml(float x) {
  static const int8_t val[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  if (x <= val[0]) return 0;
  if (x >= val[15]) return 15;
  int ml = 0, mu = 15;
  while (mu - ml > 1) {
    const int mav = (ml + mu) / 2;
    if (x < val[mav]) {
      mu = mav;
    } else {
      ml = mav;
    }
  }
  return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

// The branch-free count gives ggml's index for every float from -160 to 160 in steps of 1/64, at
// every entry and midpoint and one float either side of each, and at ±inf and NaN.
TEST(GgmlBlocks, Iq4nlBranchFreeSearchIsGgmlsBinarySearch) {
  std::vector<float> probes = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(), 0.0f, -0.0f};
  for (int i = -160 * 64; i <= 160 * 64; ++i) probes.push_back(float(i) / 64.0f);
  for (int e = 0; e < 16; ++e) {
    const float entry = ggml::iq4nl_value(e);
    const float mid = e < 15 ? (entry + ggml::iq4nl_value(e + 1)) / 2.0f : entry;
    for (const float v : {entry, mid}) {
      probes.insert(probes.end(), {v, std::nextafter(v, -1e9f), std::nextafter(v, 1e9f)});
    }
  }
  for (const float v : probes) EXPECT_EQ(ggml::iq4nl_nearest(v), best_index_int8_as_ggml(v)) << v;
}

}  // namespace
}  // namespace kvtune

namespace kvtune {
namespace {

// round_half_away is the inlined stand-in for C's roundf in the q8_0 reference quantizer.
TEST(Rounding, HalfAwayFromZeroMatchesRoundf) {
  std::mt19937 engine(3);
  std::uniform_real_distribution<float> any(-300.0f, 300.0f);
  std::vector<float> values = {0.5f, -0.5f, 1.5f, -1.5f, 2.5f, -2.5f, 126.5f, -126.5f, 0.49999997f, -0.49999997f,
                               0.0f, -0.0f, 1.0f, 4194303.5f, -4194303.5f};
  for (int i = 0; i < 200000; ++i) values.push_back(any(engine));
  for (int k = -300; k <= 300; ++k) values.push_back(float(k) + 0.5f);
  for (float v : values) ASSERT_EQ(float_bits(round_half_away(v)), float_bits(std::roundf(v))) << v;
}

}  // namespace
}  // namespace kvtune
