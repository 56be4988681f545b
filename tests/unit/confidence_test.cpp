// Confidence intervals (metrics.h): the normal quantile against Python's statistics.NormalDist,
// Wilson intervals against Newcombe's (1998) worked examples, a bootstrap with a hand-computed
// answer, which method each summary uses, and coverage of the true value over fixed-seed
// replications (a statistical band).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kvtune/metrics.h"

namespace kvtune {
namespace {

TEST(Confidence, NormalQuantileMatchesPythonsNormalDist) {
  // statistics.NormalDist().inv_cdf(p), Python 3.11.
  const std::vector<std::pair<double, double>> cases = {{0.975, 1.9599639845400536}, {0.95, 1.6448536269514715},
                                                        {0.995, 2.5758293035489},     {0.5, 0.0},
                                                        {1e-10, -6.361340902404056},  {0.01, -2.3263478740408408},
                                                        {0.99999, 4.26489079392384}};
  for (const auto& [p, z] : cases) EXPECT_NEAR(normal_quantile(p), z, 1e-13 * std::max(1.0, std::fabs(z))) << p;
  EXPECT_THROW(normal_quantile(0.0), std::invalid_argument);
  EXPECT_THROW(normal_quantile(1.0), std::invalid_argument);
}

TEST(Confidence, WilsonMatchesNewcombesExamples) {
  // Newcombe, "Two-sided confidence intervals for the single proportion", Stat. Med. 1998, table I
  // (method 3, the score interval), 95 %.
  struct Example {
    double successes;
    size_t n;
    double lo, hi;
  };
  for (const Example& e : {Example{81, 263, 0.2553, 0.3662}, Example{15, 148, 0.0624, 0.1605},
                           Example{0, 20, 0.0, 0.1611}, Example{1, 29, 0.0061, 0.1718}}) {
    const Interval ci = wilson_interval(e.successes, e.n, 0.95);
    EXPECT_NEAR(ci.lo, e.lo, 5e-5) << e.successes << "/" << e.n;
    EXPECT_NEAR(ci.hi, e.hi, 5e-5) << e.successes << "/" << e.n;
  }
  // 0 of 10: the upper end is z^2/n / (1 + z^2/n) exactly.
  const double z2 = 1.9599639845400536 * 1.9599639845400536;
  EXPECT_NEAR(wilson_interval(0, 10, 0.95).hi, (z2 / 10) / (1 + z2 / 10), 1e-15);
  EXPECT_EQ(wilson_interval(120, 120, 0.95).hi, 1.0);
}

TEST(Confidence, TwoConstantCasesGiveTheirValuesAsTheBootstrapInterval) {
  // Resampling two cases draws (a, a), (a, b), (b, a), (b, b): a quarter of the means are a and a
  // quarter b, so the 2.5th and 97.5th percentiles are a and b themselves.
  const std::vector<double> samples = {0.1, 0.1, 0.1, 0.3, 0.3, 0.3};
  const Summary s = summarize(samples, {.level = 0.95, .cases = 2});
  EXPECT_EQ(s.mean_method, IntervalMethod::bootstrap_cases);
  EXPECT_EQ(s.p95_method, IntervalMethod::bootstrap_cases);
  EXPECT_DOUBLE_EQ(s.mean_ci.lo, 0.1);
  EXPECT_DOUBLE_EQ(s.mean_ci.hi, 0.3);
  EXPECT_DOUBLE_EQ(s.p95_ci.lo, 0.1);
  EXPECT_DOUBLE_EQ(s.p95_ci.hi, 0.3);
  EXPECT_EQ(s.level, 0.95);
}

TEST(Confidence, EachSummaryNamesItsMethod) {
  const std::vector<double> hits = {1, 1, 0, 1, 1, 1, 1, 1};
  const Summary rate = summarize(hits, {.cases = 4, .rate = true});
  EXPECT_EQ(rate.mean_method, IntervalMethod::wilson);
  EXPECT_EQ(rate.p95_method, IntervalMethod::bootstrap_cases);
  const Interval w = wilson_interval(7, 8, kDefaultConfidence);
  EXPECT_EQ(rate.mean_ci.lo, w.lo);
  EXPECT_EQ(rate.mean_ci.hi, w.hi);
  // One case, or samples that do not split into the cases: single samples are resampled.
  EXPECT_EQ(summarize(hits, {.cases = 1}).mean_method, IntervalMethod::bootstrap_samples);
  EXPECT_EQ(summarize(hits, {.cases = 3}).mean_method, IntervalMethod::bootstrap_samples);
  const Summary one = summarize(std::vector<double>{0.25}, {.cases = 1});
  EXPECT_EQ(one.mean_ci.lo, 0.25);
  EXPECT_EQ(one.mean_ci.hi, 0.25);
  EXPECT_FALSE(summarize(std::vector<double>{}, {}).has_intervals());
  EXPECT_FALSE(summarize(hits).has_intervals());
  EXPECT_THROW(summarize(hits, {.level = 1.0}), std::invalid_argument);
}

TEST(Confidence, TheBootstrapIsReproducible) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0.0, 1.0);
  std::vector<double> x(60);
  for (double& v : x) v = noise(rng);
  const Summary a = summarize(x, {.cases = 6}), b = summarize(x, {.cases = 6});
  EXPECT_EQ(a.mean_ci.lo, b.mean_ci.lo);
  EXPECT_EQ(a.mean_ci.hi, b.mean_ci.hi);
  EXPECT_EQ(a.p95_ci.lo, b.p95_ci.lo);
  EXPECT_EQ(a.p95_ci.hi, b.p95_ci.hi);
  EXPECT_LT(a.mean_ci.lo, a.mean);
  EXPECT_GT(a.mean_ci.hi, a.mean);
  EXPECT_LE(a.p95_ci.lo, a.p95_ci.hi);
}

// Samples of one case share a case effect: resampling cases keeps that correlation and gives a
// wider interval than resampling single samples, which would pretend every sample is independent.
TEST(Confidence, ResamplingCasesKeepsTheirCorrelation) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> x;
  for (int c = 0; c < 10; ++c) {
    const double effect = normal(rng);
    for (int q = 0; q < 20; ++q) x.push_back(effect + 0.2 * normal(rng));
  }
  const Summary by_cases = summarize(x, {.cases = 10}), by_samples = summarize(x, {.cases = 1});
  EXPECT_GT(by_cases.mean_ci.hi - by_cases.mean_ci.lo, 3.0 * (by_samples.mean_ci.hi - by_samples.mean_ci.lo));
}

// Coverage over 400 fixed-seed replications: a 95 % interval holds the true value in 95 % of them.
// Band: 0.90 to 0.99 (the binomial spread of 400 draws at 0.95 is ±0.011; the percentile bootstrap
// of 12 cases is known to under-cover a little).
TEST(Confidence, IntervalsCoverTheTrueValueAtTheirLevel) {
  std::mt19937_64 rng(2026);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::bernoulli_distribution hit(0.93);
  constexpr int kReps = 400;
  int mean_covered = 0, rate_covered = 0;
  for (int rep = 0; rep < kReps; ++rep) {
    std::vector<double> x, h;
    for (int c = 0; c < 12; ++c) {
      const double effect = 0.5 * normal(rng);  // true mean 1.0
      for (int q = 0; q < 10; ++q) x.push_back(1.0 + effect + 0.3 * normal(rng));
    }
    for (int n = 0; n < 120; ++n) h.push_back(hit(rng) ? 1.0 : 0.0);
    mean_covered += summarize(x, {.cases = 12}).mean_ci.contains(1.0);
    rate_covered += summarize(h, {.cases = 12, .rate = true}).mean_ci.contains(0.93);
  }
  EXPECT_GE(mean_covered, int(0.90 * kReps));
  EXPECT_LE(mean_covered, int(0.99 * kReps));
  EXPECT_GE(rate_covered, int(0.90 * kReps));
  EXPECT_LE(rate_covered, int(0.99 * kReps));
}

TEST(Confidence, IntervalMethodNamesRoundTrip) {
  for (IntervalMethod m : {IntervalMethod::none, IntervalMethod::wilson, IntervalMethod::bootstrap_cases,
                           IntervalMethod::bootstrap_samples, IntervalMethod::mixture_bound}) {
    EXPECT_EQ(interval_method_from_name(interval_method_name(m)), m);
  }
  EXPECT_FALSE(interval_method_from_name("jackknife"));
}

}  // namespace
}  // namespace kvtune
