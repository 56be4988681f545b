// The attention products against exact sums, and the evaluator's independence from stacking,
// threads and reused storage (kvtune/attention.h states the bound tested here).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kvtune/attention.h"
#include "kvtune/evaluator.h"
#include "kvtune/scenario.h"
#include "test_support.h"

namespace kvtune {
namespace {

using testing::random_matrix;

// Every product of two float32 numbers is exact in float64, so a sum of n of them computed in
// float64 is within n · 2^-53 · Σ|terms| of the exact sum; long double (64-bit significand) holds
// the exact products and sums them 2^11 times more finely, which is what we compare against.
TEST(Attention, LogitsAndOutputsStayWithinTheFloat64SumBound) {
  std::mt19937 rng(7);
  for (const int64_t d : {1, 3, 8, 13, 64, 128, 131}) {
    for (const int64_t nq : {1, 3, 4, 9}) {
      const int64_t t = 37;
      const Matrix q = random_matrix(nq, d, rng), k = random_matrix(t, d, rng, 4.0f), v = random_matrix(t, d, rng);
      const AttentionScores s = attention_scores(q, k);
      const double scale = 1.0 / std::sqrt(double(d));
      for (int64_t i = 0; i < nq; ++i) {
        for (int64_t j = 0; j < t; ++j) {
          long double exact = 0, magnitude = 0;
          for (int64_t e = 0; e < d; ++e) {
            const long double term = (long double)q(i, e) * (long double)k(j, e);
            exact += term;
            magnitude += std::fabs(term);
          }
          const double bound = double(d) * std::ldexp(1.0, -53) * double(magnitude) * scale * 1.01;
          ASSERT_LE(std::abs(s.logits[size_t(i * t + j)] - double(exact) * scale), bound + 1e-300)
              << "d " << d << " nq " << nq << " [" << i << ", " << j << "]";
        }
      }
      const std::vector<double> o = attention_output(s, v);
      for (int64_t i = 0; i < nq; ++i) {
        for (int64_t e = 0; e < d; ++e) {
          long double exact = 0, magnitude = 0;
          for (int64_t j = 0; j < t; ++j) {
            const long double term = (long double)s.prob_row(i)[j] * (long double)v(j, e);
            exact += term;
            magnitude += std::fabs(term);
          }
          // The probability times a float32 is not exact in float64: one more rounding per term.
          const double bound = double(t + 1) * std::ldexp(1.0, -53) * double(magnitude) * 1.01;
          ASSERT_LE(std::abs(o[size_t(i * d + e)] - double(exact)), bound) << "d " << d << " [" << i << ", " << e << "]";
        }
      }
    }
  }
}

TEST(Attention, ProbabilitiesSumToOneAndLogNormMatches) {
  std::mt19937 rng(3);
  const Matrix q = random_matrix(5, 24, rng), k = random_matrix(1000, 24, rng, 3.0f);
  const AttentionScores s = attention_scores(q, k);
  for (int64_t i = 0; i < 5; ++i) {
    double sum = 0, lse = 0;
    for (int64_t j = 0; j < 1000; ++j) sum += s.prob_row(i)[j];
    for (int64_t j = 0; j < 1000; ++j) lse += std::exp(s.logit_row(i)[j]);
    EXPECT_NEAR(sum, 1.0, 1e-12);
    EXPECT_NEAR(s.log_norm[size_t(i)], std::log(lse), 1e-12);
    EXPECT_NEAR(std::log(s.prob_row(i)[17]), s.logit_row(i)[17] - s.log_norm[size_t(i)], 1e-12);
  }
}

// Gemma 2's softcap: each logit becomes c · tanh(l / c) before the softmax. With q = 1 and
// D = 1 the logits are the keys: 60, 0 and -60 under c = 50 give ±50 · tanh(1.2) (tanh(1.2) =
// 0.83365460701215525...), and the softmax is taken over those.
TEST(Attention, ASoftcapCapsEveryLogitBeforeTheSoftmax) {
  Matrix q(1, 1, 1.0f), k(3, 1);
  k(0, 0) = 60.0f;
  k(1, 0) = 0.0f;
  k(2, 0) = -60.0f;
  const AttentionScores s = attention_scores(q, k, 50.0);
  const double top = 50.0 * 0.83365460701215525;
  EXPECT_NEAR(s.logits[0], top, 1e-12);
  EXPECT_EQ(s.logits[1], 0.0);
  EXPECT_NEAR(s.logits[2], -top, 1e-12);
  const double z = std::exp(top) + 1.0 + std::exp(-top);
  EXPECT_NEAR(s.probs[1], 1.0 / z, 1e-12 / z);
  EXPECT_NEAR(s.log_norm[0], std::log(z), 1e-12);
  // Without a cap the logits stay; capped_logit is the identity at 0.
  EXPECT_EQ(attention_scores(q, k).logits[0], 60.0);
  EXPECT_EQ(capped_logit(60.0, 0.0), 60.0);
  // The float32 path and a scheme's raw logits take the same cap.
  AttentionScores narrow;
  attention_scores(q, k, narrow, Precision::float32, 50.0);
  EXPECT_NEAR(narrow.logits[0], top, 1e-12);
  Matrix raw(1, 3);
  raw(0, 0) = 60.0f;  // raw logits are divided by sqrt(head_dim) = 1 first
  EXPECT_NEAR(scores_from_raw_logits(raw, 1, Precision::float64, 50.0).logits[0], top, 1e-12);
}

// Softmax's exp is kvtune's own (eight at a time, kernels::exp_shifted): over logits from 0 down to
// -700 every probability is exp(logit - log_norm) to within a few ulp of its own plus what rounding
// the argument costs (an argument of size a is known to a · 2^-53, which exp turns into that
// relative error, in both computations), and past the normal range (-708.39) it is 0.
TEST(Attention, SoftmaxProbabilitiesAreExpOfLogitMinusLogNorm) {
  const int64_t t = 20011;
  Matrix q(1, 1, 1.0f), k(t, 1);
  for (int64_t j = 0; j < t; ++j) k(j, 0) = -700.0f * float(j) / float(t - 11) + (j % 7 == 0 ? 1e-3f : 0.0f);
  for (int64_t j = t - 10; j < t; ++j) k(j, 0) = -709.0f - float(j - (t - 10)) * 5.0f;  // exp underflows
  const AttentionScores s = attention_scores(q, k);
  for (int64_t j = 0; j < t - 10; ++j) {
    const double expected = std::exp(s.logits[size_t(j)] - s.log_norm[0]);
    const double argument_ulps = 2.0 * (std::abs(s.logits[size_t(j)]) + std::abs(s.log_norm[0])) * std::ldexp(1.0, -53);
    ASSERT_NEAR(s.probs[size_t(j)], expected, (4 * std::ldexp(1.0, -52) + argument_ulps) * expected)
        << "token " << j << " logit " << s.logits[size_t(j)];
  }
  for (int64_t j = t - 10; j < t; ++j) EXPECT_EQ(s.probs[size_t(j)], 0.0) << j;
}

// Softmax shifts each row by its largest logit, found eight at a time: with one logit 1000 above
// the others at every position of a row of 37 (each lane, the tail), a shift by anything smaller
// would overflow exp. The float32 probabilities are the float64 ones rounded.
TEST(Attention, SoftmaxShiftsByTheLargestLogitWhereverItIs) {
  const int64_t t = 37;
  for (int64_t at = 0; at < t; ++at) {
    Matrix q(1, 1, 1.0f), k(t, 1, 0.0f);
    for (int64_t j = 0; j < t; ++j) k(j, 0) = -float(j % 5);
    k(at, 0) = 1000.0f;
    for (const Precision precision : {Precision::float64, Precision::float32}) {
      AttentionScores s;
      attention_scores(q, k, s, precision);
      EXPECT_EQ(s.log_norm[0], 1000.0) << at;
      for (int64_t j = 0; j < t; ++j) {
        ASSERT_EQ(s.probs[size_t(j)], j == at ? 1.0 : 0.0) << at << " " << j;
        if (precision == Precision::float32) {
          ASSERT_EQ(s.probs32[size_t(j)], static_cast<float>(s.probs[size_t(j)])) << at << " " << j;
        }
      }
    }
  }
}

// Each output element is one in-order chain: stacking rows of several key configurations into one
// pass over the values (what the evaluator does per V configuration) changes no bit.
TEST(Attention, OutputRowsAreTheSameStackedOrAlone) {
  std::mt19937 rng(11);
  const Matrix q = random_matrix(7, 40, rng), k = random_matrix(301, 40, rng), v = random_matrix(301, 40, rng);
  const AttentionScores a = attention_scores(q, k);
  const AttentionScores b = attention_scores(q.view().row_range(2, 3), k);
  std::vector<const double*> rows;
  for (int64_t i = 0; i < 7; ++i) rows.push_back(a.prob_row(i));
  for (int64_t i = 0; i < 3; ++i) rows.push_back(b.prob_row(i));
  std::vector<double> stacked(rows.size() * 40);
  attention_outputs(rows, v, stacked.data());
  const std::vector<double> alone_a = attention_output(a, v), alone_b = attention_output(b, v);
  EXPECT_EQ(std::vector<double>(stacked.begin(), stacked.begin() + 7 * 40), alone_a);
  EXPECT_EQ(std::vector<double>(stacked.begin() + 7 * 40, stacked.end()), alone_b);
  // The rows of b are rows 2..4 of a: the same logits bit for bit.
  EXPECT_EQ(std::vector<double>(b.logits.begin(), b.logits.end()),
            std::vector<double>(a.logits.begin() + 2 * 301, a.logits.begin() + 5 * 301));
}

// Keys are taken two at a time on AVX-512: dropping the first key pairs every other key
// differently, and no logit moves.
TEST(Attention, LogitsDoNotDependOnHowKeysArePaired) {
  std::mt19937 rng(13);
  const Matrix q = random_matrix(5, 131, rng), k = random_matrix(64, 131, rng, 3.0f);
  const AttentionScores all = attention_scores(q, k);
  const AttentionScores rest = attention_scores(q, k.view().row_range(1, 63));
  for (int64_t i = 0; i < 5; ++i) {
    for (int64_t j = 0; j < 63; ++j) {
      ASSERT_EQ(rest.logits[size_t(i * 63 + j)], all.logits[size_t(i * 64 + j + 1)]) << i << ", " << j;
    }
  }
}

// A 3 K × 2 V grid over cases of two lengths: the same samples on 1 and 3 threads, and the same
// again after the threads' reused storage served a longer evaluation in between, with either
// precision of the products.
TEST(Evaluator, GridResultsDoNotDependOnThreadsOrReusedStorage) {
  WorkloadConfig cfg;
  cfg.tokens = 300;
  cfg.head_dim = 96;
  cfg.queries = 3;
  cfg.keys.outlier_count = 2;
  cfg.keys.outlier_scale = 12;
  std::vector<PairRequest> req;
  for (const char* k : {"int:bits=4,axis=channel", "q4_0", "fp8:format=e4m3,scale=unit"}) {
    for (const char* v : {"int:bits=3,axis=token", "q8_0"}) req.push_back({"", k, v, ""});
  }
  for (const Precision precision : {Precision::float64, Precision::float32}) {
    EvalPlan plan = build_plan(req, builtin_registry(), 8);
    plan.precision = precision;
    auto source = [&](size_t i) { return generate_case(cfg, 40 + i); };
    const EvalResult one = evaluate(plan, 5, source, 1);
    WorkloadConfig longer = cfg;
    longer.tokens = 1100;
    evaluate(plan, 3, [&](size_t i) { return generate_case(longer, i); }, 3);
    const EvalResult three = evaluate(plan, 5, source, 3);
    const EvalResult again = evaluate(plan, 5, source, 1);
    ASSERT_EQ(one.pairs.size(), 6u);
    for (size_t p = 0; p < 6; ++p) {
      for (size_t m = 0; m < kMetricCount; ++m) {
        EXPECT_EQ(one.pairs[p].samples[m], three.pairs[p].samples[m]) << p << " " << m;
        EXPECT_EQ(one.pairs[p].samples[m], again.pairs[p].samples[m]) << p << " " << m;
      }
    }
  }
}

}  // namespace
}  // namespace kvtune
