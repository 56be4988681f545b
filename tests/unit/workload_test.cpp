// The synthetic generator: determinism, planted structure, RoPE, sinks, needles, GQA, layers with
// overrides, recency and calibration samples.
#include "kvtune/workload.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "kvtune/attention.h"
#include "kvtune/error.h"
#include "kvtune/rope.h"
#include "test_support.h"

namespace kvtune {
namespace {

WorkloadConfig small() {
  WorkloadConfig cfg;
  cfg.tokens = 512;
  cfg.head_dim = 64;
  cfg.queries = 4;
  return cfg;
}

double column_rms(const Matrix& m, int64_t c) {
  double s = 0;
  for (int64_t r = 0; r < m.rows(); ++r) s += double(m(r, c)) * m(r, c);
  return std::sqrt(s / double(m.rows()));
}

TEST(Workload, SameSeedSameCaseOtherSeedOtherCase) {
  WorkloadConfig cfg = small();
  cfg.layers = 2;
  cfg.kv_heads = 2;
  EXPECT_EQ(generate_case(cfg, 5).keys, generate_case(cfg, 5).keys);
  EXPECT_EQ(generate_case(cfg, 5).queries, generate_case(cfg, 5).queries);
  EXPECT_NE(generate_case(cfg, 5).keys, generate_case(cfg, 6).keys);
  EXPECT_NE(generate_case(cfg, 5, 1).keys, generate_case(cfg, 5, 0).keys);
  EXPECT_NE(generate_case(cfg, 5, 0, 1).keys, generate_case(cfg, 5, 0, 0).keys);
}

TEST(Workload, OutlierChannelsAndOffsetsArePlanted) {
  WorkloadConfig cfg = small();
  cfg.keys.outlier_channels = {3, 40};
  cfg.keys.outlier_scale = 20.0;
  const Case c = generate_case(cfg, 1);
  EXPECT_NEAR(column_rms(c.keys, 3), 20.0, 2.0);
  EXPECT_NEAR(column_rms(c.keys, 40), 20.0, 2.0);
  EXPECT_NEAR(column_rms(c.keys, 4), 1.0, 0.1);
  EXPECT_NEAR(column_rms(c.values, 3), 1.0, 0.1);  // values carry no channel structure

  cfg.keys.outlier_channels.clear();
  cfg.keys.outlier_count = 5;
  const Case d = generate_case(cfg, 2);
  ASSERT_EQ(d.outlier_channels.size(), 5u);
  for (int64_t ch : d.outlier_channels) EXPECT_GT(column_rms(d.keys, ch), 10.0);

  cfg.keys.outlier_count = 0;
  cfg.keys.channel_offset = 5.0;
  const Case e = generate_case(cfg, 3);
  double mean_abs_offset = 0;
  for (int64_t ch = 0; ch < cfg.head_dim; ++ch) {
    double mean = 0;
    for (int64_t r = 0; r < cfg.tokens; ++r) mean += e.keys(r, ch);
    mean_abs_offset += std::abs(mean / double(cfg.tokens));
  }
  EXPECT_NEAR(mean_abs_offset / double(cfg.head_dim), 5.0 * std::sqrt(2.0 / M_PI), 1.2);
}

double column_mean(const Matrix& m, int64_t c) {
  double s = 0;
  for (int64_t r = 0; r < m.rows(); ++r) s += m(r, c);
  return s / double(m.rows());
}

// outlier_offset: a constant of +-offset on each outlier channel, the same on every token (and on
// every draw of the head), on top of the channel's own variation.
TEST(Workload, OutlierOffsetsAreConstantPerChannel) {
  WorkloadConfig cfg = small();
  cfg.keys.outlier_channels = {3, 40};
  cfg.keys.outlier_offset = 20.0;
  const Case c = generate_case(cfg, 1);
  for (int64_t ch : {3, 40}) {
    EXPECT_NEAR(std::abs(column_mean(c.keys, ch)), 20.0, 0.2) << ch;
    double var = 0;
    for (int64_t r = 0; r < c.keys.rows(); ++r) var += std::pow(c.keys(r, ch) - column_mean(c.keys, ch), 2);
    EXPECT_NEAR(std::sqrt(var / double(c.keys.rows())), 1.0, 0.1) << ch;  // outlier_scale 1: unit variation
  }
  EXPECT_NEAR(column_mean(c.keys, 4), 0.0, 0.2);
  // The sign is structure of (seed, layer, head): a fresh calibration draw of the head has it too.
  cfg.calibration = {.tokens = 256, .source = CalibrationSource::fresh};
  const Case d = generate_case(cfg, 1);
  double cal = 0;
  for (int64_t r = 0; r < d.calibration.keys.rows(); ++r) cal += d.calibration.keys(r, 3);
  EXPECT_GT(cal / double(d.calibration.keys.rows()) * column_mean(d.keys, 3), 0.0);
  // Without the knob the draws are what they were before it existed: the structure stream is apart.
  cfg = small();
  cfg.keys.outlier_channels = {3, 40};
  const Case plain = generate_case(cfg, 1);
  const double sign = std::copysign(1.0, column_mean(c.keys, 3));
  for (int64_t r = 0; r < 8; ++r) EXPECT_NEAR(c.keys(r, 3) - plain.keys(r, 3), 20.0 * sign, 1e-4) << r;
  EXPECT_EQ(c.values, plain.values);
}

// outlier_band and outlier_pairs: drawn channels in the slowest quarter of the RoPE spectrum, whole
// rotary pairs (rotate_half pairs channel i with i + D/2, interleaved 2p with 2p + 1).
TEST(Workload, OutlierBandAndPairsPlaceTheDrawnChannels) {
  WorkloadConfig cfg = small();  // head_dim 64: pairs 0..31, the band [0.75, 1] is pairs 24..31
  cfg.rope.enabled = true;
  cfg.keys.outlier_count = 4;
  cfg.keys.outlier_band_low = 0.75;
  cfg.keys.outlier_band_high = 1.0;
  cfg.keys.outlier_pairs = true;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const std::vector<int64_t> ch = generate_case(cfg, seed).outlier_channels;
    ASSERT_EQ(ch.size(), 4u);
    for (int64_t e : ch) {
      EXPECT_GE(e % 32, 24) << e;
      EXPECT_NE(std::find(ch.begin(), ch.end(), e < 32 ? e + 32 : e - 32), ch.end()) << e;  // its partner too
    }
  }
  cfg.rope.convention = RopeConvention::interleaved;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const std::vector<int64_t> ch = generate_case(cfg, seed).outlier_channels;
    for (int64_t e : ch) {
      EXPECT_GE(e / 2, 24) << e;
      EXPECT_NE(std::find(ch.begin(), ch.end(), e ^ 1), ch.end()) << e;
    }
  }
  cfg.keys.outlier_count = 3;  // pairs need an even count
  EXPECT_THROW(generate_case(cfg, 0), InputError);
  cfg.keys.outlier_count = 18;  // the band holds 16 channels
  EXPECT_THROW(generate_case(cfg, 0), InputError);
  cfg.keys.outlier_count = 2;
  cfg.keys.outlier_band_low = 0.9;
  cfg.keys.outlier_band_high = 0.8;
  EXPECT_THROW(generate_case(cfg, 0), InputError);
}

// queries_profile.outlier_scale multiplies the queries' components on the keys' outlier channels.
TEST(Workload, QueryOutlierScaleWeightsTheKeysOutlierChannels) {
  WorkloadConfig cfg = small();
  cfg.queries = 4096;
  cfg.keys.outlier_channels = {5};
  cfg.query.outlier_scale = 4.0;
  const Case c = generate_case(cfg, 1);
  EXPECT_NEAR(column_rms(c.queries, 5), 4.0, 0.2);
  EXPECT_NEAR(column_rms(c.queries, 6), 1.0, 0.05);
}

TEST(Workload, DistributionsHaveUnitVarianceTimesScale) {
  for (Distribution d : {Distribution::normal, Distribution::uniform, Distribution::laplace}) {
    WorkloadConfig cfg = small();
    cfg.values.distribution = d;
    cfg.values.scale = 2.0;
    const Case c = generate_case(cfg, 4);
    double s = 0;
    for (int64_t i = 0; i < c.values.size(); ++i) s += double(c.values.data()[i]) * c.values.data()[i];
    EXPECT_NEAR(std::sqrt(s / double(c.values.size())), 2.0, 0.05) << distribution_name(d);
  }
}

TEST(Rope, RotatesPairsByPositionTimesFrequency) {
  RopeConfig rope{true, 100.0, RopeConvention::rotate_half};
  Matrix x(1, 4);
  x(0, 0) = 1.0f;  // pair (0, 2) at frequency 1; pair (1, 3) at 100^(-1/2)
  x(0, 1) = 1.0f;
  const int64_t pos = 3;
  apply_rope(x, std::span<const int64_t>(&pos, 1), rope);
  EXPECT_NEAR(x(0, 0), std::cos(3.0), 1e-6);
  EXPECT_NEAR(x(0, 2), std::sin(3.0), 1e-6);
  EXPECT_NEAR(x(0, 1), std::cos(0.3), 1e-6);
  EXPECT_NEAR(x(0, 3), std::sin(0.3), 1e-6);

  rope.convention = RopeConvention::interleaved;
  Matrix y(1, 4);
  y(0, 0) = 1.0f;  // pair (0, 1)
  apply_rope(y, std::span<const int64_t>(&pos, 1), rope);
  EXPECT_NEAR(y(0, 0), std::cos(3.0), 1e-6);
  EXPECT_NEAR(y(0, 1), std::sin(3.0), 1e-6);
  apply_rope(y, std::span<const int64_t>(&pos, 1), rope, /*inverse=*/true);
  EXPECT_NEAR(y(0, 0), 1.0, 1e-6);
  EXPECT_NEAR(y(0, 1), 0.0, 1e-6);
}

// Llama 3.1's rope_scaling (llama3, factor 8, low 1, high 4, original 8192) at theta 500000 and
// D = 128. The expected values come from a separate transcription of transformers'
// _compute_llama3_parameters (src/transformers/modeling_rope_utils.py) in Python doubles: pairs with
// wavelengths below 2048 tokens (i <= 28) keep theta^(-2i/D), those above 8192 (i >= 35) are divided
// by 8, and those between (i = 29..34) interpolate by 8192 / wavelength.
TEST(Rope, Llama3ScalingGivesTransformersFrequencies) {
  RopeConfig rope{true, 500000.0, RopeConvention::rotate_half};
  rope.scaling = {RopeScalingType::llama3, 8.0, 1.0, 4.0, 8192.0};
  const std::vector<double> f = rope_inverse_frequencies(rope, 128);
  ASSERT_EQ(f.size(), 64u);
  const std::pair<int, double> expected[] = {
      {0, 1.0},
      {28, 0.003211445994752591},     // wavelength 1956: kept
      {29, 0.002166570763503359},     // 2402: interpolated
      {31, 0.0008567514129196321},    // 3619
      {34, 0.0001785078127679964},    // 6695
      {35, 9.556212353964683e-05},    // 8219: divided by 8
      {40, 3.428102195952591e-05},
      {63, 3.068925988914511e-07},
  };
  for (const auto& [i, want] : expected) EXPECT_DOUBLE_EQ(f[size_t(i)], want) << "pair " << i;
  // linear: every frequency divided by its factor.
  rope.scaling = {RopeScalingType::linear, 4.0};
  const std::vector<double> linear = rope_inverse_frequencies(rope, 128);
  for (int i = 0; i < 64; ++i) EXPECT_DOUBLE_EQ(linear[size_t(i)], std::pow(500000.0, -i / 64.0) / 4.0) << i;
  // And a rotation uses them: a pair-63 channel at position 10000 turns by 10000 x its frequency.
  rope.scaling = {RopeScalingType::llama3, 8.0, 1.0, 4.0, 8192.0};
  Matrix x(1, 128);
  x(0, 63) = 1.0f;
  const int64_t pos = 10000;
  apply_rope(x, std::span<const int64_t>(&pos, 1), rope);
  EXPECT_NEAR(x(0, 63), std::cos(10000 * 3.068925988914511e-07), 1e-7);
  EXPECT_NEAR(x(0, 127), std::sin(10000 * 3.068925988914511e-07), 1e-7);
}

// apply_rope keeps the cos and sin of the positions it rotates in a table shared across calls
// (up to 2^21 angles each, then computed per row): the rows must come out with the bits of the
// rotation computed directly, angle by angle, forward and inverse, in both conventions, at two
// bases; at D = 256 on both sides of the table's end (16 384 positions); and in 64-row calls at
// positions in no particular order, a third of them below the end of the table they read and the
// rest beyond it, which they compute.
bool same_bits(const Matrix& a, const Matrix& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), static_cast<size_t>(a.size()) * sizeof(float)) == 0;
}

Matrix rotated_directly(Matrix x, const std::vector<int64_t>& positions, const RopeConfig& rope, bool inverse) {
  const int64_t d = x.cols(), half = d / 2;
  const std::vector<double> inv_freq = rope_inverse_frequencies(rope, d);  // checked above
  for (int64_t r = 0; r < x.rows(); ++r) {
    for (int64_t i = 0; i < half; ++i) {
      const double a = (inverse ? -1.0 : 1.0) * double(positions[r]) * inv_freq[i];
      const int64_t ia = rope.convention == RopeConvention::rotate_half ? i : 2 * i;
      const int64_t ib = rope.convention == RopeConvention::rotate_half ? i + half : 2 * i + 1;
      const double xa = x(r, ia), xb = x(r, ib), c = std::cos(a), s = std::sin(a);
      x(r, ia) = static_cast<float>(xa * c - xb * s);
      x(r, ib) = static_cast<float>(xb * c + xa * s);
    }
  }
  return x;
}

TEST(Rope, TheSharedAngleTablesGiveTheDirectRotationsBits) {
  std::mt19937 values(17);
  std::mt19937_64 engine(5);
  // A third below the 3000-row tables' end; past twice that end, so these calls do not grow them.
  std::uniform_int_distribution<int64_t> anywhere(0, 8999);
  std::vector<int64_t> shuffled(64);
  for (int64_t& p : shuffled) p = anywhere(engine);
  const auto in_order = [](int64_t first, int64_t rows) {
    std::vector<int64_t> p(static_cast<size_t>(rows));
    std::iota(p.begin(), p.end(), first);
    return p;
  };
  const auto check = [&](const Matrix& x, const std::vector<int64_t>& positions, const RopeConfig& rope, bool inverse) {
    Matrix y = x;
    apply_rope(y, positions, rope, inverse);
    EXPECT_TRUE(same_bits(y, rotated_directly(x, positions, rope, inverse)))
        << "D " << x.cols() << ", " << x.rows() << " rows, theta " << rope.theta << (inverse ? ", inverse" : "");
  };
  // Past the end of a table at D = 256: 2^21 angles are 16 384 positions. A call builds a table
  // when it rotates a quarter of the positions below its last, as these 4 100 rows do.
  const Matrix wide = testing::random_matrix(4100, 256, values);
  check(wide, in_order(12300, 4100), {true, 500000.0, RopeConvention::rotate_half}, false);
  check(wide, in_order(12300, 4100), {true, 10000.0, RopeConvention::interleaved}, true);
  const Matrix x = testing::random_matrix(3000, 64, values), few = testing::random_matrix(64, 64, values);
  for (const double theta : {10000.0, 500000.0}) {
    for (const RopeConvention convention : {RopeConvention::rotate_half, RopeConvention::interleaved}) {
      for (const bool inverse : {false, true}) {
        check(x, in_order(0, 3000), {true, theta, convention}, inverse);  // builds a table
        check(few, shuffled, {true, theta, convention}, inverse);         // reads it below 3000
      }
    }
  }
  // A scaled RoPE at a base an unscaled table already holds gets a table of its own.
  RopeConfig scaled{true, 500000.0, RopeConvention::rotate_half};
  scaled.scaling = {RopeScalingType::llama3, 32.0, 1.0, 4.0, 8192.0};
  check(x, in_order(0, 3000), scaled, false);
  check(few, shuffled, scaled, false);
}

TEST(Rope, AttentionDependsOnlyOnRelativePosition) {
  WorkloadConfig cfg = small();
  cfg.rope = {true, 10000.0, RopeConvention::rotate_half};
  const Case c = generate_case(cfg, 8);
  EXPECT_NE(c.keys, c.keys_pre_rope);
  // q_T · k_j after RoPE equals the unrotated query against k_j rotated by j - T.
  Matrix q = copy_of(c.queries.view().row_range(0, 1));
  const int64_t t = c.query_position;
  apply_rope(q, std::span<const int64_t>(&t, 1), cfg.rope, /*inverse=*/true);
  for (int64_t j : {0, 17, 511}) {
    Matrix k(1, cfg.head_dim);
    std::copy(c.keys_pre_rope.row(j), c.keys_pre_rope.row(j) + cfg.head_dim, k.data());
    const int64_t relative = j - t;
    apply_rope(k, std::span<const int64_t>(&relative, 1), cfg.rope);
    double cached = 0, relative_dot = 0;
    for (int64_t e = 0; e < cfg.head_dim; ++e) {
      cached += double(c.queries(0, e)) * c.keys(j, e);
      relative_dot += double(q(0, e)) * k(0, e);
    }
    EXPECT_NEAR(cached, relative_dot, 1e-3) << j;
  }
}

// Every query, tilted toward the sinks or away from them: a sink key is 8x longer than the median
// key, so about half of the untilted random queries would give the sinks nearly all their mass.
TEST(Workload, SinksHoldTheirTargetMass) {
  WorkloadConfig cfg = small();
  cfg.queries = 32;
  cfg.sinks = {4, 8.0, 0.1, 0.4};
  cfg.rope = {true, 10000.0, RopeConvention::rotate_half};
  const Case c = generate_case(cfg, 9);
  const AttentionScores s = attention_scores(c.queries, c.keys);
  for (int64_t i = 0; i < cfg.queries; ++i) {
    double mass = 0;
    for (int64_t j = 0; j < 4; ++j) mass += s.prob_row(i)[j];
    EXPECT_NEAR(mass, 0.4, 1e-3) << "query " << i;
  }
}

// A seed names a case: results that cite a seed mean the same thing in a later version only if it
// draws the same bits. These FNV-1a hashes of the keys', values' and queries' bits were taken from
// the code before the sink tilt's bisection learned to stop early (f89afcf), on cases whose tilt runs
// both ways (toward and away from the sinks), with RoPE, recency and needles.
uint64_t fnv1a(const Matrix& m, uint64_t h = 1469598103934665603ull) {
  for (int64_t i = 0; i < m.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, m.data() + i, sizeof bits);
    for (int b = 0; b < 4; ++b) h = (h ^ ((bits >> (8 * b)) & 0xffu)) * 1099511628211ull;
  }
  return h;
}

TEST(Workload, CasesAreTheBitsEarlierVersionsDrewForTheirSeed) {
  WorkloadConfig cfg = small();
  cfg.queries = 8;
  cfg.sinks = {4, 8.0, 0.1, 0.4};
  cfg.rope = {true, 10000.0, RopeConvention::rotate_half};
  cfg.recency = {2.0, 32.0};
  cfg.needles = {{0.3, 0.7}, 0.5};
  const uint64_t expected[] = {6098995184135918815ull, 5150484645561717231ull};
  for (uint64_t seed : {uint64_t(9), uint64_t(21)}) {
    const Case c = generate_case(cfg, seed);
    const uint64_t h = fnv1a(c.queries, fnv1a(c.values, fnv1a(c.keys)));
    EXPECT_EQ(h, expected[seed == 9 ? 0 : 1]) << "seed " << seed;
  }
}

TEST(Workload, NeedlesHoldTheirTargetMassAtTheirDepth) {
  WorkloadConfig cfg = small();
  cfg.needles = {{0.25, 0.5, 0.75}, 0.6};
  cfg.rope = {true, 10000.0, RopeConvention::interleaved};
  const Case c = generate_case(cfg, 10);
  const AttentionScores s = attention_scores(c.queries, c.keys);
  ASSERT_EQ(c.needles.size(), 4u);
  EXPECT_EQ(c.needles[0].token, std::llround(0.25 * 511));
  EXPECT_EQ(c.needles[1].token, std::llround(0.5 * 511));
  EXPECT_EQ(c.needles[3].depth, 0);  // the fourth query wraps to depth 0.25...
  EXPECT_NE(c.needles[3].token, c.needles[0].token);  // ...on another token
  EXPECT_EQ(c.needle_depths, cfg.needles.depths);
  for (int64_t i = 0; i < cfg.queries; ++i) {
    EXPECT_EQ(c.needles[i].query, i);
    EXPECT_NEAR(s.prob_row(i)[c.needles[i].token], 0.6, 0.02) << i;
  }
  // The pre-RoPE key was written back consistently.
  Matrix again = c.keys_pre_rope;
  apply_rope(again, c.positions, cfg.rope);
  const int64_t t0 = c.needles[0].token;
  for (int64_t e = 0; e < cfg.head_dim; ++e) EXPECT_NEAR(again(t0, e), c.keys(t0, e), 1e-4);
}

TEST(Workload, MultiNeedleQueriesShareTheirMass) {
  WorkloadConfig cfg = small();
  cfg.queries = 2;
  cfg.needles = {{0.1, 0.4, 0.7, 0.9}, 0.6, 2};
  const Case c = generate_case(cfg, 12);
  const AttentionScores s = attention_scores(c.queries, c.keys);
  ASSERT_EQ(c.needles.size(), 4u);
  const int64_t expected_depth[4] = {0, 1, 2, 3};  // query 0: depths 0 and 1, query 1: 2 and 3
  for (size_t n = 0; n < 4; ++n) {
    EXPECT_EQ(c.needles[n].query, int64_t(n / 2));
    EXPECT_EQ(c.needles[n].depth, expected_depth[n]);
    EXPECT_EQ(c.needles[n].token, std::llround(cfg.needles.depths[n] * 511));
    // Each needle of a query holds half of the query's 0.6; moving one key along q_i changes
    // only its own logit for query i, so the shares are exact up to float rounding.
    EXPECT_NEAR(s.prob_row(c.needles[n].query)[c.needles[n].token], 0.3, 1e-3) << n;
  }
}

// Queries share directions (the sink tilt, the recency bias): each row's needle key moves only
// along the part of its query orthogonal to the other rows, so planting one row's needle does not
// change another row's attention, and every row ends with exactly its target mass.
TEST(Workload, NeedlesOfSeveralRowsDoNotDisturbEachOther) {
  WorkloadConfig cfg = small();
  cfg.queries = 2;
  cfg.q_per_kv = 4;  // 8 query rows
  cfg.sinks = {4, 8.0, 0.1, 0.3};
  cfg.recency = {3.0, 64.0};
  cfg.needles = {{0.2, 0.4, 0.6, 0.8}, 0.5, 1};
  const Case c = generate_case(cfg, 21);
  const AttentionScores s = attention_scores(c.queries, c.keys);
  ASSERT_EQ(c.needles.size(), 8u);
  for (const Needle& n : c.needles) {
    EXPECT_NEAR(s.prob_row(n.query)[n.token], 0.5, 2e-3) << "row " << n.query;
    // Another row's needle holds no special mass for this row.
    for (const Needle& other : c.needles) {
      if (other.query != n.query) {
        EXPECT_LT(s.prob_row(n.query)[other.token], 0.1) << n.query << " vs " << other.query;
      }
    }
  }
}

TEST(Workload, GqaGivesEveryQueryHeadItsOwnQueries) {
  WorkloadConfig cfg = small();
  cfg.queries = 3;
  cfg.q_per_kv = 4;
  const Case c = generate_case(cfg, 2);
  EXPECT_EQ(c.queries.rows(), 12);
  EXPECT_EQ(c.q_per_kv, 4);
  // The first query head's queries are the ones a one-head workload draws (same stream), and
  // the other heads' differ from them.
  WorkloadConfig one = cfg;
  one.q_per_kv = 1;
  const Case single = generate_case(one, 2);
  for (int64_t e = 0; e < cfg.head_dim; ++e) EXPECT_EQ(c.queries(0, e), single.queries(0, e));
  EXPECT_NE(c.queries(3, 0), c.queries(0, 0));
  EXPECT_NE(c.queries(9, 0), c.queries(3, 0));
}

TEST(Workload, LayerOverridesChangeOnlyTheirLayers) {
  WorkloadConfig cfg = small();
  cfg.layers = 4;
  cfg.keys.outlier_channels = {5};
  cfg.keys.outlier_scale = 10.0;
  LayerOverride o;
  o.layers = {2, 3};
  o.outlier_channels = std::vector<int64_t>{9, 10};
  o.outlier_scale = 30.0;
  o.sink_count = 2;
  cfg.overrides.push_back(o);
  LayerOverride later;
  later.layers = {3};
  later.outlier_scale = 50.0;  // later entries win
  cfg.overrides.push_back(later);
  EXPECT_EQ(layer_config(cfg, 0).keys.outlier_channels, std::vector<int64_t>{5});
  EXPECT_EQ(layer_config(cfg, 2).keys.outlier_channels, (std::vector<int64_t>{9, 10}));
  EXPECT_EQ(layer_config(cfg, 2).keys.outlier_scale, 30.0);
  EXPECT_EQ(layer_config(cfg, 3).keys.outlier_scale, 50.0);
  EXPECT_EQ(layer_config(cfg, 2).sinks.count, 2);
  EXPECT_EQ(layer_config(cfg, 1).sinks.count, 0);
  const Case c0 = generate_case(cfg, 1, 0), c2 = generate_case(cfg, 1, 2);
  EXPECT_EQ(c0.outlier_channels, std::vector<int64_t>{5});
  EXPECT_EQ(c2.outlier_channels, (std::vector<int64_t>{9, 10}));
  EXPECT_GT(column_rms(c2.keys_pre_rope, 9), 20.0);
  EXPECT_LT(column_rms(c0.keys_pre_rope, 9), 2.0);
  // Layers and KV heads outside the counts are refused.
  EXPECT_THROW(generate_case(cfg, 1, 4), InputError);
  EXPECT_THROW(generate_case(cfg, 1, 0, 1), InputError);
  cfg.overrides[0].layers = {7};
  EXPECT_THROW(validate(cfg), InputError);
}

// Mean attention mass of the newest `window` tokens over the queries of a case.
double recent_mass(const Case& c, int64_t window) {
  const AttentionScores s = attention_scores(c.queries, c.keys);
  double mass = 0;
  for (int64_t i = 0; i < s.queries; ++i) {
    for (int64_t j = s.tokens - window; j < s.tokens; ++j) mass += s.prob_row(i)[j];
  }
  return mass / double(s.queries);
}

TEST(Workload, RecencyBiasDrawsAttentionToRecentTokens) {
  WorkloadConfig cfg = small();
  cfg.queries = 16;
  cfg.rope = {true, 10000.0, RopeConvention::rotate_half};
  const WorkloadConfig flat = cfg;
  cfg.recency = {4.0, 32.0};
  double with = 0, without = 0;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    with += recent_mass(generate_case(cfg, seed), 32);
    without += recent_mass(generate_case(flat, seed), 32);
  }
  // Without a bias the newest 32 of 512 tokens hold about 32/512 = 6 % of the attention; a boost
  // of 4 nats decaying over 32 tokens multiplies their weights by up to e^4.
  EXPECT_NEAR(without / 8, 32.0 / 512.0, 0.03);
  EXPECT_GT(with / 8, 3 * without / 8);
  // The pre-RoPE keys stay consistent with the cached ones.
  const Case c = generate_case(cfg, 3);
  Matrix again = c.keys_pre_rope;
  apply_rope(again, c.positions, cfg.rope);
  for (int64_t e = 0; e < cfg.head_dim; ++e) EXPECT_NEAR(again(511, e), c.keys(511, e), 1e-4);
}

TEST(Workload, CalibrationSamplesComeFromTheCaseOrAFreshDraw) {
  WorkloadConfig cfg = small();
  cfg.keys.outlier_count = 3;
  cfg.keys.outlier_scale = 20.0;
  cfg.keys.channel_offset = 1.0;
  cfg.sinks = {4, 8.0, 0.1, 0.3};
  cfg.calibration = {64, false, CalibrationSource::same};
  const Case same = generate_case(cfg, 4);
  ASSERT_EQ(same.calibration.keys.rows(), 64);
  EXPECT_EQ(same.calibration.positions.front(), 4);  // the window starts after the sinks
  for (int64_t e = 0; e < cfg.head_dim; ++e) EXPECT_EQ(same.calibration.keys(0, e), same.keys(4, e));
  for (int64_t e = 0; e < cfg.head_dim; ++e) EXPECT_EQ(same.calibration.values(63, e), same.values(67, e));

  cfg.calibration = {64, true, CalibrationSource::fresh};
  const Case fresh = generate_case(cfg, 4);
  ASSERT_EQ(fresh.calibration.keys.rows(), 64);
  EXPECT_EQ(fresh.calibration.positions.front(), 0);
  EXPECT_NE(fresh.calibration.keys(10, 0), fresh.keys(10, 0));  // other tokens...
  // ...of the same model: the outlier channels (drawn per seed, layer and head) are the same ones.
  for (int64_t ch : fresh.outlier_channels) EXPECT_GT(column_rms(fresh.calibration.keys, ch), 8.0) << ch;
  // The sinks are in the sample when include_sinks is set: the first rows carry the sink norm.
  double norm0 = 0, norm10 = 0;
  for (int64_t e = 0; e < cfg.head_dim; ++e) {
    norm0 += double(fresh.calibration.keys(0, e)) * fresh.calibration.keys(0, e);
    norm10 += double(fresh.calibration.keys(10, e)) * fresh.calibration.keys(10, e);
  }
  EXPECT_GT(std::sqrt(norm0), 4 * std::sqrt(norm10));
  // A window that does not fit the context is refused.
  cfg.calibration = {600, true, CalibrationSource::same};
  EXPECT_THROW(generate_case(cfg, 0), InputError);
}

// A sliding layer's case is the last window of the context its global twin sees: the same tokens
// bit for bit (positions T - W .. T - 1), without the sinks of the sequence's start, with its
// needles inside the window; a calibration sample still comes from the sequence's start (a
// calibration tool observes every key written). Other layers are untouched.
TEST(Workload, ASlidingLayerKeepsTheLastWindowOfTokens) {
  WorkloadConfig global = small();
  global.layers = 2;
  global.sinks = {2, 8.0, 0.1, 0.3};
  global.calibration = {32, true, CalibrationSource::same};
  WorkloadConfig sliding = global;
  sliding.sliding_window = 128;
  sliding.sliding_layers = {0};
  const Case full = generate_case(global, 3, 0), window = generate_case(sliding, 3, 0);
  ASSERT_EQ(window.keys.rows(), 128);
  EXPECT_EQ(window.positions.front(), 384);
  EXPECT_EQ(window.positions.back(), 511);
  EXPECT_EQ(window.query_position, 512);
  for (int64_t r = 0; r < 128; ++r) {
    for (int64_t e = 0; e < global.head_dim; ++e) {
      ASSERT_EQ(window.keys(r, e), full.keys(384 + r, e)) << r;
      ASSERT_EQ(window.values(r, e), full.values(384 + r, e)) << r;
      ASSERT_EQ(window.keys_pre_rope(r, e), full.keys_pre_rope(384 + r, e)) << r;
    }
  }
  for (int64_t e = 0; e < global.head_dim; ++e) {
    EXPECT_EQ(window.calibration.keys(0, e), full.keys(0, e));  // the sink is in the sample
  }
  EXPECT_EQ(window.calibration.positions.front(), 0);
  // Layer 1 does not slide, and a context within the window is whole.
  const Case other = generate_case(sliding, 3, 1);
  EXPECT_EQ(other.keys.rows(), 512);
  EXPECT_EQ(other.keys(100, 5), generate_case(global, 3, 1).keys(100, 5));
  sliding.tokens = 128;
  EXPECT_EQ(generate_case(sliding, 3, 0).keys.rows(), 128);

  // Needles go inside the window, at its depths.
  sliding.tokens = 512;
  sliding.needles = {{0.0, 0.5}, 0.5, 1};
  const Case needles = generate_case(sliding, 3, 0);
  ASSERT_EQ(needles.needles.size(), 4u);
  EXPECT_EQ(needles.needles[0].token, 0);   // no sink is left to protect
  EXPECT_EQ(needles.needles[1].token, 64);  // round(0.5 * 127)
  const AttentionScores s = attention_scores(needles.queries, needles.keys);
  EXPECT_NEAR(s.prob_row(0)[0], 0.5, 0.02);
  EXPECT_NEAR(s.prob_row(1)[64], 0.5, 0.02);

  sliding.sliding_layers = {2};
  EXPECT_THROW(generate_case(sliding, 0, 0), InputError);  // outside the 2 layers
  sliding.sliding_layers.clear();
  EXPECT_THROW(generate_case(sliding, 0, 0), InputError);  // a window without layers
}

// Gemma 3 turns its sliding layers by rope_local_base_freq without the rope_scaling of its global
// layers: a sliding layer's case draws the same pre-RoPE keys and rotates them by its own base.
TEST(Workload, ASlidingLayerTurnsByItsOwnRopeBase) {
  WorkloadConfig cfg = small();
  cfg.layers = 2;
  cfg.rope = {true, 1e6, RopeConvention::rotate_half, {RopeScalingType::linear, 8.0}};
  cfg.sliding_window = 1024;  // longer than the context: only the RoPE differs
  cfg.sliding_layers = {0};
  WorkloadConfig plain = cfg;
  cfg.sliding_rope_theta = 10000.0;
  const Case local = generate_case(cfg, 5, 0), global = generate_case(cfg, 5, 1);
  EXPECT_EQ(local.rope.theta, 10000.0);
  EXPECT_EQ(local.rope.scaling.type, RopeScalingType::none);
  EXPECT_EQ(global.rope.theta, 1e6);
  EXPECT_EQ(global.rope.scaling.type, RopeScalingType::linear);
  Matrix turned = local.keys_pre_rope;
  apply_rope(turned, local.positions, {true, 10000.0, RopeConvention::rotate_half, {}});
  const Case same_base = generate_case(plain, 5, 0);
  for (int64_t r = 0; r < local.keys.rows(); ++r) {
    for (int64_t e = 0; e < cfg.head_dim; ++e) {
      ASSERT_EQ(local.keys(r, e), turned(r, e)) << r << "," << e;
      ASSERT_EQ(local.keys_pre_rope(r, e), same_base.keys_pre_rope(r, e)) << r << "," << e;
    }
  }
  EXPECT_NE(local.keys(300, 0), same_base.keys(300, 0));
  // The global layer is the workload's without the sliding base.
  EXPECT_EQ(global.keys(300, 0), generate_case(plain, 5, 1).keys(300, 0));
  cfg.sliding_rope_theta = 0.5;
  EXPECT_THAT([&] { generate_case(cfg, 5, 0); },
              ::testing::ThrowsMessage<InputError>(::testing::HasSubstr("the sliding layers' rope theta must be > 1")));
}

// Under a softcap the sinks and needles hold their mass of the capped attention, as the model
// computes it (a cap of 8 against needle logits near log T + 1 bends them hard); the cap reaches the
// case, and the uncapped attention gives the needles a different share.
TEST(Workload, SinksAndNeedlesHoldTheirMassOfTheCappedAttention) {
  WorkloadConfig cfg = small();
  cfg.sinks = {2, 8.0, 0.1, 0.3};
  cfg.needles = {{0.25, 0.75}, 0.4, 1};
  cfg.logit_softcap = 8.0;
  const Case c = generate_case(cfg, 7);
  EXPECT_EQ(c.logit_softcap, 8.0);
  const AttentionScores capped = attention_scores(c.queries, c.keys, 8.0), plain = attention_scores(c.queries, c.keys);
  ASSERT_EQ(c.needles.size(), 4u);
  for (const Needle& n : c.needles) {
    EXPECT_NEAR(capped.prob_row(n.query)[n.token], 0.4, 0.02) << n.query;
    EXPECT_GT(std::abs(plain.prob_row(n.query)[n.token] - 0.4), 0.05) << n.query;
  }
  cfg.needles = {};
  const Case sinks = generate_case(cfg, 7);
  const AttentionScores s = attention_scores(sinks.queries, sinks.keys, 8.0);
  for (int64_t i = 0; i < sinks.queries.rows(); ++i) EXPECT_NEAR(s.prob_row(i)[0] + s.prob_row(i)[1], 0.3, 0.01) << i;
  // A cap that keeps the sinks or a needle from their mass is said, not planted otherwise.
  cfg.logit_softcap = 0.5;
  EXPECT_THAT([&] { generate_case(cfg, 7); },
              ::testing::ThrowsMessage<InputError>(::testing::HasSubstr(
                  "workload: under a logit softcap of 0.5 the sinks hold at most 0.0")));
  cfg.sinks = {};
  cfg.needles = {{0.5}, 0.9, 1};
  EXPECT_THAT([&] { generate_case(cfg, 7); },
              ::testing::ThrowsMessage<InputError>(::testing::HasSubstr(
                  "workload: under a logit softcap of 0.5 no needle holds 0.9 of a query's attention over 512 tokens")));
  cfg.logit_softcap = -1.0;
  EXPECT_THAT([&] { generate_case(cfg, 7); },
              ::testing::ThrowsMessage<InputError>(::testing::HasSubstr("the logit softcap must be a finite number >= 0")));
}

// A calibration set: `samples` fresh draws per head, every KV head of the layer with granularity =
// layer, so every head of a layer fits the same scale; a per-head scheme finds its own rows.
TEST(Workload, CalibrationSetsHoldEveryDrawOfEveryHeadTheyCover) {
  WorkloadConfig cfg = small();
  cfg.kv_heads = 4;
  cfg.sinks = {2, 8.0, 0.1, 0.3};
  cfg.calibration = {16, true, CalibrationSource::fresh};
  const Case one = generate_case(cfg, 7, 0, 2);
  cfg.calibration.samples = 3;
  const Case three = generate_case(cfg, 7, 0, 2);
  ASSERT_EQ(three.calibration.keys.rows(), 48);
  EXPECT_EQ(three.calibration.head_first, 0);
  EXPECT_EQ(three.calibration.head_rows, 48);
  // The first draw is the single-sample draw; the others are new tokens, each at positions 0..15
  // with its own sinks first.
  for (int64_t e = 0; e < cfg.head_dim; ++e) EXPECT_EQ(three.calibration.keys(5, e), one.calibration.keys(5, e));
  EXPECT_NE(three.calibration.keys(16 + 5, 0), three.calibration.keys(5, 0));
  for (int64_t draw = 0; draw < 3; ++draw) {
    EXPECT_EQ(three.calibration.positions[size_t(draw * 16)], 0);
    EXPECT_EQ(three.calibration.positions[size_t(draw * 16 + 15)], 15);
  }
  cfg.calibration.granularity = CalibrationGranularity::layer;
  const Case layer_wide = generate_case(cfg, 7, 0, 2);
  ASSERT_EQ(layer_wide.calibration.keys.rows(), 4 * 48);
  EXPECT_EQ(layer_wide.calibration.head_first, 2 * 48);
  EXPECT_EQ(layer_wide.calibration.head_rows, 48);
  // Its own rows are the per-head set; another head of the layer sees the very same set.
  for (int64_t r = 0; r < 48; ++r) {
    EXPECT_EQ(layer_wide.calibration.keys(2 * 48 + r, 3), three.calibration.keys(r, 3)) << r;
  }
  const Case other_head = generate_case(cfg, 7, 0, 0);
  EXPECT_EQ(other_head.calibration.head_first, 0);
  for (int64_t i = 0; i < layer_wide.calibration.keys.size(); ++i) {
    ASSERT_EQ(other_head.calibration.keys.data()[i], layer_wide.calibration.keys.data()[i]) << i;
  }
  // More than kMaxCalibrationRows rows are refused with the counts that make them.
  cfg.calibration.samples = 4096;
  cfg.calibration.tokens = 2048;
  try {
    generate_case(cfg, 7, 0, 0);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("4 head(s) x 4096 samples x 2048 tokens exceeds 4194304 rows"));
  }
  // Several samples, or a layer-wide set, need a calibration set apart from the context.
  cfg.calibration = {16, true, CalibrationSource::same, 2};
  EXPECT_THROW(generate_case(cfg, 0), InputError);
}

// Only a per-head static scale asks for its own head's rows (fp8 granularity=head, calibrated).
TEST(Workload, PerHeadCalibrationIsDeclaredByTheScheme) {
  EXPECT_TRUE(builtin_registry().make("fp8:format=e4m3,scale=calibrated,granularity=head")->traits().calibrates_per_head);
  EXPECT_FALSE(builtin_registry().make("fp8:format=e4m3,scale=calibrated")->traits().calibrates_per_head);
  EXPECT_FALSE(builtin_registry().make("fp8:format=e4m3,scale=unit,granularity=head")->traits().calibrates_per_head);
  EXPECT_FALSE(builtin_registry().make("nvfp4:scale=calibrated")->traits().calibrates_per_head);
}

TEST(Workload, RefusesConfigsItCannotGenerate) {
  WorkloadConfig cfg = small();
  cfg.keys.outlier_channels = {64};
  EXPECT_THROW(generate_case(cfg, 0), InputError);
  cfg = small();
  cfg.sinks.count = cfg.tokens;
  EXPECT_THROW(generate_case(cfg, 0), InputError);
  cfg = small();
  cfg.tokens = 1;
  cfg.needles.depths = {0.5};  // a needle needs another token to stand out from
  EXPECT_THROW(generate_case(cfg, 0), InputError);
  cfg = small();
  cfg.head_dim = 63;
  cfg.rope.enabled = true;
  EXPECT_THROW(generate_case(cfg, 0), InputError);
}

}  // namespace
}  // namespace kvtune

namespace kvtune {
namespace {

TEST(Workload, NeedlesNeedQueriesThatPointSomewhere) {
  WorkloadConfig cfg = small();
  cfg.needles.depths = {0.5};
  cfg.query.scale = 0.0;
  EXPECT_THROW(generate_case(cfg, 0), InputError);
}

}  // namespace
}  // namespace kvtune
