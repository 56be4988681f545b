// The synthetic generator: determinism, planted structure, RoPE, sinks and needles.
#include <gtest/gtest.h>

#include <cmath>

#include "kvtune/attention.h"
#include "kvtune/error.h"
#include "kvtune/rope.h"
#include "kvtune/workload.h"

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
  const WorkloadConfig cfg = small();
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

TEST(Workload, SinksHoldTheirTargetMass) {
  WorkloadConfig cfg = small();
  cfg.sinks = {4, 8.0, 0.1, 0.4};
  cfg.rope = {true, 10000.0, RopeConvention::rotate_half};
  const Case c = generate_case(cfg, 9);
  const AttentionScores s = attention_scores(c.queries, c.keys);
  for (int64_t i = 0; i < cfg.queries; ++i) {
    double mass = 0;
    for (int64_t j = 0; j < 4; ++j) mass += s.prob_row(i)[j];
    EXPECT_NEAR(mass, 0.4, 1e-3);
  }
}

TEST(Workload, NeedlesHoldTheirTargetMassAtTheirDepth) {
  WorkloadConfig cfg = small();
  cfg.needles = {{0.25, 0.5, 0.75}, 0.6};
  cfg.rope = {true, 10000.0, RopeConvention::interleaved};
  const Case c = generate_case(cfg, 10);
  const AttentionScores s = attention_scores(c.queries, c.keys);
  ASSERT_EQ(c.needles.size(), 4u);
  EXPECT_EQ(c.needles[0], std::llround(0.25 * 511));
  EXPECT_EQ(c.needles[1], std::llround(0.5 * 511));
  EXPECT_NE(c.needles[3], c.needles[0]);  // the fourth query wraps to depth 0.25, on another token
  for (int64_t i = 0; i < cfg.queries; ++i) EXPECT_NEAR(s.prob_row(i)[c.needles[i]], 0.6, 0.02) << i;
  // The pre-RoPE key was written back consistently.
  Matrix again = c.keys_pre_rope;
  apply_rope(again, c.positions, cfg.rope);
  for (int64_t e = 0; e < cfg.head_dim; ++e) EXPECT_NEAR(again(c.needles[0], e), c.keys(c.needles[0], e), 1e-4);
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
