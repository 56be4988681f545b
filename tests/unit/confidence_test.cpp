// Confidence intervals (metrics.h): the normal and t quantiles against Python's NormalDist and R's
// qt, Wilson intervals against Newcombe's (1998) worked examples, t, design-effect Wilson and
// bootstrap intervals with hand-computed answers, which method each summary uses, and coverage of
// the true value over fixed-seed replications (a statistical band).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>
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

TEST(Confidence, TQuantileMatchesTables) {
  // Student's t quantiles (R's qt; checked by integrating the density), small and large df.
  const std::vector<std::tuple<double, size_t, double>> cases = {
      {0.975, 1, 12.706204736174707}, {0.975, 2, 4.302652729749464},  {0.975, 5, 2.570581835636314},
      {0.995, 10, 3.169272672616951}, {0.975, 30, 2.042272456301238}, {0.95, 4, 2.131846786326649},
      {0.975, 5000, 1.9604385516948741}, {0.025, 3, -3.182446305284263}};
  for (const auto& [p, df, t] : cases) EXPECT_NEAR(t_quantile(p, df), t, 1e-9 * std::fabs(t)) << p << " " << df;
  EXPECT_EQ(t_quantile(0.5, 7), 0.0);
  EXPECT_THROW(t_quantile(0.975, 0), std::invalid_argument);
}

TEST(Confidence, TwoConstantCasesGiveAHandComputedTInterval) {
  // Case means 0.1 and 0.3 of 3 samples each: the variance of the mean is (0.1^2 + 0.1^2) / (2 - 1) / 2 =
  // 0.01, so the interval is 0.2 -+ t(0.975, 1) x 0.1, clipped at 0. The p95 bootstrap draws
  // (a, a), (a, b), (b, a), (b, b): a quarter of its p95s are 0.1 and a quarter 0.3.
  const std::vector<double> samples = {0.1, 0.1, 0.1, 0.3, 0.3, 0.3};
  const std::vector<size_t> sizes = {3, 3};
  const Summary s = summarize(samples, {.level = 0.95, .case_sizes = sizes});
  EXPECT_EQ(s.mean_method, IntervalMethod::t_cases);
  EXPECT_EQ(s.p95_method, IntervalMethod::bootstrap_cases);
  EXPECT_EQ(s.mean_ci.lo, 0.0);
  EXPECT_NEAR(s.mean_ci.hi, 0.2 + 12.706204736174707 * 0.1, 1e-12);
  EXPECT_DOUBLE_EQ(s.p95_ci.lo, 0.1);
  EXPECT_DOUBLE_EQ(s.p95_ci.hi, 0.3);
  EXPECT_EQ(s.level, 0.95);
  ASSERT_EQ(s.cases.size(), 2u);
  EXPECT_NEAR(s.cases[0].mean, 0.1, 1e-16);
  EXPECT_EQ(s.cases[0].count, 3u);
  // A share's interval stops at 1.
  EXPECT_EQ(summarize(std::vector<double>{0.9, 0.9, 1.0, 1.0}, {.case_sizes = std::vector<size_t>{2, 2}, .upper = 1.0})
                .mean_ci.hi,
            1.0);
}

// Cases of 1 and 3 samples: the mean is the ratio 1 / 4, and its variance the cluster-robust one,
// 2 / (2 - 1) x ((1 - 0.25)^2 + (3 x (0 - 0.25))^2) / 4^2 = 0.140625 (standard error 0.375).
TEST(Confidence, CasesOfDifferentSizesGiveTheRatioMeansInterval) {
  const std::vector<double> samples = {1.0, 0.0, 0.0, 0.0};
  const std::vector<size_t> sizes = {1, 3};
  const Summary s = summarize(samples, {.case_sizes = sizes});
  EXPECT_EQ(s.mean, 0.25);
  EXPECT_EQ(s.mean_ci.lo, 0.0);
  EXPECT_NEAR(s.mean_ci.hi, 0.25 + 12.706204736174707 * 0.375, 1e-12);
  EXPECT_EQ(s.cases[0], (CaseMean{1.0, 1}));
  EXPECT_EQ(s.cases[1], (CaseMean{0.0, 3}));
  // A case without samples (no needles at a depth, say) takes no part: the same summary as without it.
  const std::vector<size_t> with_empty = {0, 1, 0, 3, 0};
  const Summary same = summarize(samples, {.case_sizes = with_empty});
  EXPECT_EQ(same.mean_ci.hi, s.mean_ci.hi);
  EXPECT_EQ(same.p95_ci.lo, s.p95_ci.lo);
  EXPECT_EQ(same.p95_ci.hi, s.p95_ci.hi);
  EXPECT_EQ(same.cases, s.cases);
  // Sizes that do not add up to the samples are a caller's bug.
  EXPECT_THROW(summarize(samples, {.case_sizes = std::vector<size_t>{2, 3}}), std::invalid_argument);
}

TEST(Confidence, RatesOfUnevenCasesCountFewerEffectiveSamples) {
  // Four cases of 10 needles with 10, 10, 0 and 0 hits: p = 0.5, the cases' variance of p is
  // 4/3 x 4 x (10 x 0.5)^2 / 40^2 = 1/12 against the binomial 0.25 / 40, a design effect of 40/3,
  // so Wilson counts 3 samples with 1.5 hits.
  std::vector<double> hits(40, 0.0);
  std::fill(hits.begin(), hits.begin() + 20, 1.0);
  const std::vector<size_t> sizes = {10, 10, 10, 10};
  const Summary clustered = summarize(hits, {.case_sizes = sizes, .rate = true});
  EXPECT_EQ(clustered.mean_method, IntervalMethod::wilson_cases);
  const Interval w = wilson_interval(1.5, 3.0, kDefaultConfidence);
  EXPECT_NEAR(clustered.mean_ci.lo, w.lo, 1e-12);
  EXPECT_NEAR(clustered.mean_ci.hi, w.hi, 1e-12);
  // Hits spread evenly over the cases vary less than independent ones would: the design effect stays 1.
  std::vector<double> even(40, 0.0);
  for (size_t c = 0; c < 4; ++c) std::fill(even.begin() + 10 * c, even.begin() + 10 * c + 5, 1.0);
  const Summary spread = summarize(even, {.case_sizes = sizes, .rate = true});
  const Interval plain = wilson_interval(20, 40, kDefaultConfidence);
  EXPECT_EQ(spread.mean_ci.lo, plain.lo);
  EXPECT_EQ(spread.mean_ci.hi, plain.hi);
}

TEST(Confidence, EachSummaryNamesItsMethod) {
  const std::vector<double> hits = {1, 1, 0, 1, 1, 1, 1, 1};
  const std::vector<size_t> four = {2, 2, 2, 2};
  const Summary rate = summarize(hits, {.case_sizes = four, .rate = true});
  EXPECT_EQ(rate.mean_method, IntervalMethod::wilson_cases);
  EXPECT_EQ(rate.p95_method, IntervalMethod::bootstrap_cases);
  // One case: single samples, taken as independent.
  const Summary one_case = summarize(hits, {.rate = true});
  EXPECT_EQ(one_case.mean_method, IntervalMethod::wilson);
  const Interval w = wilson_interval(7, 8, kDefaultConfidence);
  EXPECT_EQ(one_case.mean_ci.lo, w.lo);
  EXPECT_EQ(one_case.mean_ci.hi, w.hi);
  EXPECT_EQ(one_case.p95_method, IntervalMethod::bootstrap_samples);
  EXPECT_EQ(summarize(hits, {.case_sizes = std::vector<size_t>{8}}).mean_method, IntervalMethod::t_samples);
  EXPECT_TRUE(summarize(hits, {}).cases.empty());
  const Summary one = summarize(std::vector<double>{0.25}, {});
  EXPECT_EQ(one.mean_ci.lo, 0.25);
  EXPECT_EQ(one.mean_ci.hi, 0.25);
  EXPECT_FALSE(summarize(std::vector<double>{}, {}).has_intervals());
  EXPECT_FALSE(summarize(hits).has_intervals());
  EXPECT_THROW(summarize(hits, {.level = 1.0}), std::invalid_argument);
}

TEST(Confidence, TheBootstrapIsReproducibleAndResamplesEnoughForItsLevel) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0.0, 1.0);
  std::vector<double> x(60);
  for (double& v : x) v = noise(rng) + 3.0;
  const std::vector<size_t> sizes(6, 10);
  const Summary a = summarize(x, {.case_sizes = sizes}), b = summarize(x, {.case_sizes = sizes});
  EXPECT_EQ(a.mean_ci.lo, b.mean_ci.lo);
  EXPECT_EQ(a.mean_ci.hi, b.mean_ci.hi);
  EXPECT_EQ(a.p95_ci.lo, b.p95_ci.lo);
  EXPECT_EQ(a.p95_ci.hi, b.p95_ci.hi);
  EXPECT_LT(a.mean_ci.lo, a.mean);
  EXPECT_GT(a.mean_ci.hi, a.mean);
  EXPECT_LE(a.p95_ci.lo, a.p95_ci.hi);
  EXPECT_EQ(bootstrap_resamples(0.95), kBootstrapResamples);
  EXPECT_EQ(bootstrap_resamples(0.999), 20000u);  // 10 resamples beyond each end
}

// Samples of one case share a case effect: an interval over cases keeps that correlation and is
// wider than one over single samples, which would pretend every sample is independent.
TEST(Confidence, IntervalsOverCasesKeepTheirCorrelation) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> x;
  for (int c = 0; c < 10; ++c) {
    const double effect = normal(rng);
    for (int q = 0; q < 20; ++q) x.push_back(5.0 + effect + 0.2 * normal(rng));
  }
  const Summary by_cases = summarize(x, {.case_sizes = std::vector<size_t>(10, 20)}), by_samples = summarize(x, {});
  EXPECT_GT(by_cases.mean_ci.hi - by_cases.mean_ci.lo, 3.0 * (by_samples.mean_ci.hi - by_samples.mean_ci.lo));
}

// Coverage over 400 fixed-seed replications: a 95 % interval holds the true value in 95 % of them.
// The binomial spread of 400 draws at 0.95 is +-0.011. Means: Student's t over 3, 6 and 12 cases with
// normal case effects is exact: 0.94, 0.94 and 0.96 here, band 0.92 to 0.98 (a percentile bootstrap
// of the cases covers 0.74, 0.87 and 0.90: it fails this). Rates: each case's hit rate is drawn
// around 0.9 (the cases differ, so the needles of one case are not independent); Wilson with the
// design effect covers 0.875, 0.91 and 0.92 (band from 0.85 over 3 cases, whose design effect rests
// on three values, and 0.88 over more), plain Wilson over all needles 0.77 to 0.79.
TEST(Confidence, IntervalsCoverTheTrueValueAtTheirLevel) {
  std::mt19937_64 rng(2026);
  std::normal_distribution<double> normal(0.0, 1.0);
  constexpr int kReps = 400;
  for (size_t cases : {size_t{3}, size_t{6}, size_t{12}}) {
    int mean_covered = 0, rate_covered = 0, plain_covered = 0;
    for (int rep = 0; rep < kReps; ++rep) {
      std::vector<double> x, h;
      for (size_t c = 0; c < cases; ++c) {
        const double effect = 0.5 * normal(rng);  // true mean 1.0
        for (int q = 0; q < 10; ++q) x.push_back(1.0 + effect + 0.3 * normal(rng));
        // A case's hit rate: 0.9 on average over cases (logit spread 1, mean fixed by construction).
        const double rate = 1.0 / (1.0 + std::exp(-(2.4 + normal(rng))));
        std::bernoulli_distribution hit(rate);
        for (int n = 0; n < 20; ++n) h.push_back(hit(rng) ? 1.0 : 0.0);
      }
      mean_covered += summarize(x, {.case_sizes = std::vector<size_t>(cases, 10)}).mean_ci.contains(1.0);
      // The true mean rate of this case distribution, by numerical integration over the logit.
      static const double true_rate = [] {
        double sum = 0.0, weight = 0.0;
        for (double z = -8.0; z <= 8.0; z += 1e-3) {
          const double w = std::exp(-z * z / 2.0);
          sum += w / (1.0 + std::exp(-(2.4 + z)));
          weight += w;
        }
        return sum / weight;
      }();
      const Summary rate = summarize(h, {.case_sizes = std::vector<size_t>(cases, 20), .rate = true});
      rate_covered += rate.mean_ci.contains(true_rate);
      plain_covered += wilson_interval(rate.mean * double(h.size()), double(h.size()), 0.95).contains(true_rate);
    }
    EXPECT_GE(mean_covered, int(0.92 * kReps)) << cases << " cases";
    EXPECT_LE(mean_covered, int(0.98 * kReps)) << cases << " cases";
    EXPECT_GE(rate_covered, int((cases < 6 ? 0.85 : 0.88) * kReps)) << cases << " cases";
    EXPECT_LE(plain_covered, int(0.82 * kReps)) << cases << " cases";  // the data are clustered enough to tell
    EXPECT_LE(rate_covered, int(0.99 * kReps)) << cases << " cases";
  }
}

// The p95 interval (the percentile bootstrap over cases) covers far less than its level when the
// cases differ more than the samples within a case, as layers and seeds do: the pooled p95 of few
// cases misses the population's tail (its estimate sits 0.5 standard deviations low over 6 cases),
// and resampling those few cases cannot show what they lack. The report says so beside a p95
// bound judged on its interval (docs/sweep-file.md, "Confidence intervals"); this test keeps the
// measured figures it cites. Same model as above: case effect 0.5, spread 0.3 within a case, 10
// samples per case, true p95 1 + 1.645 * sqrt(0.34). Measured: 3 cases 0.42, 6 cases 0.50, 12
// cases 0.68; the bands hold each within three binomial spreads of 400 draws (+-0.075).
// (Woodruff's inversion of the share below p95 with Student's t over the cases, and a
// bias-corrected bootstrap-t, reached at most 0.87 in a prototype: neither replaces it.)
TEST(Confidence, TheP95BootstrapCoversLessThanItsLevelOverFewCases) {
  std::mt19937_64 rng(2027);
  std::normal_distribution<double> normal(0.0, 1.0);
  constexpr int kReps = 400;
  const double true_p95 = 1.0 + normal_quantile(0.95) * std::sqrt(0.34);
  for (size_t cases : {size_t{3}, size_t{6}, size_t{12}}) {
    int covered = 0;
    for (int rep = 0; rep < kReps; ++rep) {
      std::vector<double> x;
      for (size_t c = 0; c < cases; ++c) {
        const double effect = 0.5 * normal(rng);
        for (int q = 0; q < 10; ++q) x.push_back(1.0 + effect + 0.3 * normal(rng));
      }
      covered += summarize(x, {.case_sizes = std::vector<size_t>(cases, 10)}).p95_ci.contains(true_p95);
    }
    RecordProperty("p95_coverage_" + std::to_string(cases) + "_cases", std::to_string(double(covered) / kReps));
    const double measured = cases == 3 ? 0.42 : cases == 6 ? 0.50 : 0.68;
    EXPECT_NEAR(double(covered) / kReps, measured, 0.075) << cases << " cases";
  }
}

TEST(Confidence, IntervalMethodNamesRoundTrip) {
  for (IntervalMethod m : {IntervalMethod::none, IntervalMethod::wilson, IntervalMethod::bootstrap_cases,
                           IntervalMethod::bootstrap_samples, IntervalMethod::mixture_bound, IntervalMethod::t_cases,
                           IntervalMethod::t_samples, IntervalMethod::wilson_cases}) {
    EXPECT_EQ(interval_method_from_name(interval_method_name(m)), m);
  }
  EXPECT_FALSE(interval_method_from_name("jackknife"));
}

}  // namespace
}  // namespace kvtune
