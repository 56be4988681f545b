// The AVX2 fused round trips of the ggml blocks (plugins/ggml/ggml_avx2.cpp) against the scalar
// fused round trips of ggml_blocks.h, bit for bit, on blocks chosen to break a careless vector
// version: exact rounding ties, zero blocks and blocks of mixed signed zeros, the largest
// magnitude present with both signs, f16-overflowing and subnormal scales, saturating codes, and
// blocks below iq4_nl's smallest maximum, values a float either side of a half-integer, and block counts that leave a tail for the scalar loop.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "ggml/ggml_avx2.h"
#include "ggml/ggml_kernels.h"
#include "kvtune/codecs/ggml_blocks.h"

namespace kvtune {
namespace {

using builtin::ggml_kernels::Type;

std::vector<float> adversarial_blocks() {
  std::vector<float> x;
  auto block = [&](auto value) {
    for (int j = 0; j < 32; ++j) x.push_back(value(j));
  };
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float scale : {1e-9f, 1e-6f, 1e-3f, 1.0f, 100.0f, 3e4f, 1e7f}) {  // subnormal to f16-overflowing scales
    for (int b = 0; b < 6; ++b) block([&](int) { return scale * normal(rng); });
  }
  block([](int) { return 0.0f; });
  block([](int) { return -0.0f; });
  block([](int j) { return j % 3 == 0 ? -0.0f : 0.0f; });                     // mixed zeros
  block([](int j) { return j == 5 ? 1.0f : (j % 2 ? -0.0f : 0.0f); });        // min is a zero
  block([](int j) { return j == 7 ? -2.0f : (j % 2 ? 0.0f : -0.0f); });       // max is a zero
  block([](int j) { return j == 3 ? -5.0f : j == 20 ? 5.0f : 0.25f * j - 4; });  // +-max, first is negative
  block([](int j) { return j == 3 ? 5.0f : j == 20 ? -5.0f : 0.25f * j - 4; });  // +-max, first is positive
  // amax 127 makes q8_0's d = 1: every half-integer is an exact tie; for q4_0 / q5_0 a max of
  // -8 / -16 makes d = 1 too.
  block([](int j) { return j == 0 ? 127.0f : float(j) - 15.5f; });
  block([](int j) { return j == 0 ? -127.0f : 0.5f - float(j); });
  block([](int j) { return j == 0 ? -8.0f : 0.5f * float(j % 17) - 4.0f; });
  block([](int j) { return j == 0 ? -16.0f : float(j % 33) * 0.5f - 8.0f; });
  block([](int j) { return j == 31 ? 8.0f : -0.5f * float(j % 9); });         // codes that saturate
  block([](int j) { return float(j) * 0.5f; });                               // min-max ties: d = 0.5
  block([](int j) { return 1000.0f + float(j); });                            // offset blocks
  block([](int) { return 3.0f; });                                            // constant: d = 0
  block([](int j) { return j == 9 ? -6e-16f : 1e-17f * float(j); });         // below iq4_nl's 1e-15: d = 0
  // With amax 127 q8_0's x / d is x itself: one float either side of each half-integer, where a
  // careless round-half-away goes wrong.
  block([](int j) { return j == 0 ? 127.0f : std::nextafter(float(j) - 15.5f, -1000.0f); });
  block([](int j) { return j == 0 ? -127.0f : std::nextafter(float(j) - 15.5f, 1000.0f); });
  // A first element of -127 makes iq4_nl's id = 1, so id * x is x itself: elements at each codebook
  // entry, a float either side (where the count of entries not above changes), at each midpoint
  // between neighbouring entries and a float either side (the nearer-entry compare), and at the
  // integers and a float below them (the AVX-512 path counts by the integer part).
  auto iq4_entry = [](int j) { return ggml::iq4nl_value(j % 16); };
  auto iq4_midpoint = [](int j) { return 0.5f * (ggml::iq4nl_value(j % 15) + ggml::iq4nl_value(j % 15 + 1)); };
  auto first_is_minus_127 = [&](auto value) { block([&](int j) { return j == 0 ? -127.0f : value(j); }); };
  first_is_minus_127(iq4_entry);
  first_is_minus_127([&](int j) { return std::nextafter(iq4_entry(j), -1000.0f); });
  first_is_minus_127([&](int j) { return std::nextafter(iq4_entry(j), 1000.0f); });
  first_is_minus_127(iq4_midpoint);
  first_is_minus_127([&](int j) { return std::nextafter(iq4_midpoint(j), -1000.0f); });
  first_is_minus_127([&](int j) { return std::nextafter(iq4_midpoint(j), 1000.0f); });
  first_is_minus_127([](int j) { return float(8 * j - 127); });
  first_is_minus_127([](int j) { return std::nextafter(float(8 * j - 127), -1000.0f); });
  // Enough normal blocks that every block above falls in a group of eight (the vector path), and
  // a tail of 3 past the last multiple of 8 for the scalar loop.
  for (int b = 0; b < 7; ++b) block([&](int) { return normal(rng); });
  if (x.size() / 32 % 8 != 3) throw std::logic_error("adversarial_blocks: the tail must stay 3 blocks");
  return x;
}

void scalar(Type type, const float* x, float* y) {
  switch (type) {
    case Type::q8_0: return ggml::roundtrip_q8_0(x, y, false);
    case Type::q8_0_x86: return ggml::roundtrip_q8_0(x, y, true);
    case Type::q4_0: return ggml::roundtrip_q4_0(x, y);
    case Type::q4_1: return ggml::roundtrip_q4_1(x, y);
    case Type::q5_0: return ggml::roundtrip_q5_0(x, y);
    case Type::q5_1: return ggml::roundtrip_q5_1(x, y);
    case Type::iq4_nl: {
      uint8_t block[ggml::kIq4nlBytes];
      ggml::quantize_iq4_nl(x, block);
      return ggml::dequantize_iq4_nl(block, y);
    }
  }
  FAIL() << "no scalar round trip";
}

// The dispatched round trip of `x` against the scalar one, bit for bit.
void expect_scalar_bits(Type type, const std::vector<float>& x) {
  const int64_t blocks = int64_t(x.size() / 32);
  std::vector<float> want(x.size()), got(x.size(), 1234.5f);
  for (int64_t b = 0; b < blocks; ++b) scalar(type, x.data() + 32 * b, want.data() + 32 * b);
  builtin::ggml_kernels::roundtrip(type, x.data(), got.data(), blocks);  // dispatched: AVX2 where present
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t a, b;
    std::memcpy(&a, &want[i], 4);
    std::memcpy(&b, &got[i], 4);
    ASSERT_EQ(a, b) << "element " << i << " (block " << i / 32 << "): x " << x[i] << ", scalar " << want[i]
                    << ", dispatched " << got[i];
  }
}

// `x` after `lead` blocks of normal draws: with a lead of 8 every block takes the other half of
// iq4_nl's sixteen-block vectors.
std::vector<float> after_lead(const std::vector<float>& x, int lead) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> out(size_t(32 * lead));
  for (float& v : out) v = normal(rng);
  out.insert(out.end(), x.begin(), x.end());
  return out;
}

TEST(GgmlAvx2, FusedRoundTripsAreTheScalarBits) {
  const std::vector<float> x = adversarial_blocks();
  ASSERT_NE(x.size() / 32 % 8, 0u);  // a tail for the scalar loop
  ASSERT_GE(x.size() / 32, 16u + 8u);  // sixteen blocks at once, then eight
  for (int lead : {0, 8}) {
    for (Type type : {Type::q8_0, Type::q8_0_x86, Type::q4_0, Type::q4_1, Type::q5_0, Type::q5_1, Type::iq4_nl}) {
      SCOPED_TRACE(::testing::Message() << "type " << int(type) << ", lead " << lead);
      expect_scalar_bits(type, after_lead(x, lead));
    }
  }
}

// iq4_nl defines a NaN's code (15, as ggml's compares give it), so a block holding a NaN or an
// infinity has its scalar bits: all NaN, or zeros where the largest other magnitude is below
// 1e-15. The vector extremes must pass over a NaN as ggml::signed_absmax does, wherever it sits.
TEST(GgmlAvx2, Iq4nlBlocksWithNaNOrInfinityAreTheScalarBits) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> x;
  auto block = [&](auto value) {
    for (int j = 0; j < 32; ++j) x.push_back(value(j));
  };
  // The largest magnitude just before the NaN and a tiny one just after: an order that let the NaN
  // drop what came before it would take these blocks for tiny ones.
  for (int at : {0, 1, 9, 30, 31}) {
    const int before = (at + 31) % 32, after = (at + 1) % 32;
    block([&](int j) { return j == at ? nan : j == before ? 5.0f : 0.25f * float(j) - 4.0f; });
    block([&](int j) { return j == at ? nan : j == before ? 5.0f : j == after ? 1e-17f : 0.0f; });
    block([&](int j) { return j == at ? nan : j == before ? -5.0f : j == after ? 1e-17f : 0.0f; });
    block([&](int j) { return j == at ? nan : j == after ? 1e-16f : 0.0f; });
    // An infinity is the block's largest magnitude: id = -0 or +0, its own id * x a NaN.
    block([&](int j) { return j == at ? inf : j == before ? -inf : 0.25f * float(j) - 4.0f; });
    block([&](int j) { return j == at ? -inf : 0.25f * float(j) - 4.0f; });
    block([&](int j) { return j == at ? inf : j == after ? nan : 1.0f; });
  }
  for (int lead : {0, 8}) {
    SCOPED_TRACE(lead);
    expect_scalar_bits(Type::iq4_nl, after_lead(x, lead));
  }
}

// The blocks the adversarial set relies on reach the cases they name (so the test above can fail).
TEST(GgmlAvx2, TheAdversarialBlocksHitTheirCases) {
  const std::vector<float> x = adversarial_blocks();
  float y[32];
  ggml::roundtrip_q8_0(x.data() + 32 * 42, y, false);  // +-0 block, then the 127 block below
  const size_t tie_block = 7 * 6 + 7;
  ASSERT_EQ(x[32 * tie_block], 127.0f);
  ggml::roundtrip_q8_0(x.data() + 32 * tie_block, y, false);
  EXPECT_EQ(y[1], -15.0f);  // -14.5 rounds away from zero
  ggml::roundtrip_q8_0(x.data() + 32 * tie_block, y, true);
  EXPECT_EQ(y[1], -14.0f);  // the x86 variant rounds half to even
  float big[32];
  ggml::roundtrip_q8_0(x.data() + 32 * (6 * 6), big, false);  // scale 1e7: d overflows f16
  EXPECT_FALSE(std::isfinite(big[0]) && std::isfinite(big[1]) && std::isfinite(big[2]));
  // Where the machine has AVX2 the fast path must be the one that ran above (every x86 CPU with
  // AVX2 has F16C).
  EXPECT_EQ(builtin::ggml_avx2::available(), bool(__builtin_cpu_supports("avx2")));
}

}  // namespace
}  // namespace kvtune
