// The qjl family (plugins/qjl): the evaluator takes its logits path, the logits are QJL's
// estimator, dequantize is the estimator's reconstruction, and the estimator is unbiased.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "kvtune/evaluator.h"
#include "qjl/qjl_sketch.h"
#include "test_support.h"

namespace kvtune {
namespace {

using testing::make_scheme;

// c ||k|| <S q, sign(S k)>, computed here from the sketch matrix in double.
double estimate(const std::vector<double>& s, int64_t m, double c, const float* q, const float* k, int64_t d) {
  double norm = 0, dot = 0;
  for (int64_t i = 0; i < d; ++i) norm += double(k[i]) * k[i];
  for (int64_t r = 0; r < m; ++r) {
    double sq = 0, sk = 0;
    for (int64_t i = 0; i < d; ++i) sq += s[size_t(r * d + i)] * q[i], sk += s[size_t(r * d + i)] * k[i];
    dot += sq * (sk >= 0 ? 1.0 : -1.0);
  }
  return c * std::sqrt(norm) * dot;
}

TEST(Qjl, LogitsAreTheEstimatorAndDequantizeAgrees) {
  const int64_t d = 16, m = 24;
  const Matrix k = testing::normal_matrix(5, d, 1), q = testing::normal_matrix(3, d, 2);
  const SchemePtr s = make_scheme("qjl:sketch=24,norm=f32,seed=9");
  EXPECT_TRUE(s->estimates_logits());
  EXPECT_EQ(s->footprint(5, d), size_t(5 * 4 + (5 * 24 + 7) / 8));  // norms + sign bits
  const auto packed = s->quantize(k, {});
  Matrix logits(3, 5), keys(5, d);
  s->logits(q, packed, 5, {}, logits);
  s->dequantize(packed, {}, keys);
  const std::vector<double> proj = builtin::qjl::projection(m, d, 9, false);
  const double c = std::sqrt(std::numbers::pi / 2) / double(m);
  EXPECT_DOUBLE_EQ(builtin::qjl::estimator_constant(m, d, false), c);
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 5; ++j) {
      EXPECT_NEAR(logits(i, j), estimate(proj, m, c, q.row(i), k.row(j), d), 1e-5) << i << " " << j;
      double via_keys = 0;
      for (int64_t e = 0; e < d; ++e) via_keys += double(q(i, e)) * keys(j, e);
      EXPECT_NEAR(logits(i, j), via_keys, 1e-4) << i << " " << j;
    }
  }
}

// The evaluator asks the scheme for its logits: a scheme whose logits path differs from its
// dequantize path shows the logits path's scores.
TEST(Qjl, EvaluatorUsesTheLogitsPathUnderThePolicyToo) {
  for (const std::string spec : {"qjl", "qjl:rotation=hadamard", "qjl:sink_tokens=2,block_tokens=8"}) {
    EXPECT_TRUE(make_scheme(spec)->estimates_logits()) << spec;
  }
  // Under a token policy the exact rows are dotted as stored and the blocks are estimated.
  const Matrix k = testing::normal_matrix(20, 32, 3), q = testing::normal_matrix(2, 32, 4);
  for (const std::string spec : {"qjl:sink_tokens=2,block_tokens=8,residual_window=3", "qjl:rotation=random"}) {
    const SchemePtr s = make_scheme(spec);
    const auto packed = s->quantize(k, {});
    Matrix via_logits(2, 20), keys(20, 32);
    s->logits(q, packed, 20, {}, via_logits);
    s->dequantize(packed, {}, keys);
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < 20; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < 32; ++e) dot += double(q(i, e)) * keys(j, e);
        EXPECT_NEAR(via_logits(i, j), dot, 1e-3 * (1 + std::abs(dot))) << spec << " " << i << " " << j;
      }
    }
  }
  EXPECT_FALSE(make_scheme("qjl:rope_stage=pre")->estimates_logits());
}

// Unbiased: the mean of the estimate over many sketch seeds is q.k, within 5 standard errors of
// the mean (QJL Lemma 3.2; sd of one estimate <= sqrt(pi/2 - 1) ||q|| ||k|| / sqrt(m)... ).
TEST(Qjl, EstimatorIsUnbiasedOverSeeds) {
  const int64_t d = 32, seeds = 2000;
  const Matrix k = testing::normal_matrix(1, d, 5), q = testing::normal_matrix(1, d, 6);
  double exact = 0, nq = 0, nk = 0;
  for (int64_t i = 0; i < d; ++i) exact += double(q(0, i)) * k(0, i), nq += double(q(0, i)) * q(0, i), nk += double(k(0, i)) * k(0, i);
  for (const bool orthogonal : {false, true}) {
    const int64_t m = orthogonal ? d : 16;
    const double c = builtin::qjl::estimator_constant(m, d, orthogonal);
    const int64_t n = orthogonal ? 500 : seeds;
    double sum = 0;
    for (int64_t s = 0; s < n; ++s) {
      sum += estimate(builtin::qjl::projection(m, d, uint64_t(s), orthogonal), m, c, q.row(0), k.row(0), d);
    }
    const double bound = std::sqrt((std::numbers::pi / 2) * nq * nk / double(m)) / std::sqrt(double(n));
    EXPECT_NEAR(sum / double(n), exact, 5 * bound) << orthogonal << " exact " << exact;
  }
  EXPECT_NEAR(builtin::qjl::estimator_constant(4096, 1024, true) * 4096, std::sqrt(std::numbers::pi / 2), 1e-3);
}

}  // namespace
}  // namespace kvtune
