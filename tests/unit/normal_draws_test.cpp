// NormalDraws and Mt19937_64 against libstdc++'s own std::normal_distribution<double> and
// std::mt19937_64 (the outside reference): every value compared bit for bit, through bulk fills of
// every length around a block's 156 candidate pairs, single draws, and other distributions
// drawing from the same engine in between (which shifts the pairs against the blocks).
#include "kvtune/numeric/normal_draws.h"

#include <gtest/gtest.h>

#include <bit>
#include <random>
#include <vector>

namespace kvtune {
namespace {

// The one-at-a-time draws NormalDraws must reproduce.
struct StdDraws {
  explicit StdDraws(uint64_t seed) : engine(seed) {}
  std::mt19937_64 engine;
  std::normal_distribution<double> normal{0.0, 1.0};
};

TEST(NormalDraws, TheEngineIsStdMt19937_64) {
  for (uint64_t seed : {uint64_t(0), uint64_t(1), uint64_t(5489), uint64_t(0x9e3779b97f4a7c15ull), ~uint64_t(0)}) {
    std::mt19937_64 reference(seed);
    Mt19937_64 engine(seed);
    for (int i = 0; i < 5 * 312 + 7; ++i) ASSERT_EQ(engine(), reference()) << "seed " << seed << ", output " << i;
  }
}

TEST(NormalDraws, SingleDrawsAreStdNormalDistributions) {
  for (uint64_t seed : {uint64_t(3), uint64_t(0xdeadbeefull)}) {
    StdDraws reference(seed);
    NormalDraws draws(seed);
    for (int i = 0; i < 200000; ++i) {
      const double want = reference.normal(reference.engine), got = draws.next();
      ASSERT_EQ(std::bit_cast<uint64_t>(got), std::bit_cast<uint64_t>(want)) << "seed " << seed << ", draw " << i;
    }
  }
}

// Fills of every length from 0 to 700 (up to two blocks' pairs and more), each followed by an
// odd or even number of uniform draws from the engine and sometimes a single normal draw, on both
// sides; then the engines must stand at the same output.
TEST(NormalDraws, FillsMatchOneAtATimeDrawsWhateverDrawsComeBetween) {
  const uint64_t seed = 11;
  StdDraws reference(seed);
  NormalDraws draws(seed);
  std::uniform_real_distribution<double> uniform_ref(0.0, 1.0), uniform(0.0, 1.0);
  std::vector<float> want, got;
  for (size_t n = 0; n <= 700; ++n) {
    const double scale = n % 3 == 0 ? 1.0 : (n % 3 == 1 ? 0.37 : -2.5e3);
    want.resize(n);
    got.assign(n, 0.0f);
    for (float& v : want) v = static_cast<float>(scale * reference.normal(reference.engine));
    draws.fill(got.data(), n, scale);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
          << "fill of " << n << ", value " << i;
    }
    for (size_t k = 0; k < n % 4; ++k) {
      ASSERT_EQ(std::bit_cast<uint64_t>(uniform(draws.engine())),
                std::bit_cast<uint64_t>(uniform_ref(reference.engine)));
    }
    if (n % 5 == 0) {
      ASSERT_EQ(std::bit_cast<uint64_t>(draws.next()), std::bit_cast<uint64_t>(reference.normal(reference.engine)));
    }
  }
  EXPECT_EQ(draws.engine()(), reference.engine());
}

// One large fill (the size of a case's keys at 4k tokens) against the same number of single draws.
TEST(NormalDraws, ALargeFillIsTheSingleDraws) {
  const size_t n = 4096 * 128 + 1;
  StdDraws reference(2026);
  NormalDraws draws(2026);
  std::vector<float> got(n);
  draws.fill(got.data(), n, 0.5);
  for (size_t i = 0; i < n; ++i) {
    const auto want = static_cast<float>(0.5 * reference.normal(reference.engine));
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want)) << "value " << i;
  }
  // The fill's last pair left its second value for the next draw, as the std distribution keeps it.
  EXPECT_EQ(std::bit_cast<uint64_t>(draws.next()), std::bit_cast<uint64_t>(reference.normal(reference.engine)));
  EXPECT_EQ(draws.engine()(), reference.engine());
}

}  // namespace
}  // namespace kvtune
