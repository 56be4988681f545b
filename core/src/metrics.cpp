#include "kvtune/metrics.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace kvtune {
namespace {

// The bootstrap's fixed seed: every interval is reproducible, and every record resamples the same
// cases in the same order (common random numbers, so two pairs' intervals compare fairly).
constexpr uint64_t kBootstrapSeed = 0x6b7674756e65ULL;  // "kvtune"

// Linear-interpolated quantile of sorted values.
double sorted_quantile(const std::vector<double>& s, double q) {
  const double pos = q * double(s.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, s.size() - 1);
  return s[lo] + (pos - double(lo)) * (s[hi] - s[lo]);
}

Interval percentile_interval(std::vector<double>& stats, double level) {
  std::sort(stats.begin(), stats.end());
  return {sorted_quantile(stats, (1.0 - level) / 2.0), sorted_quantile(stats, (1.0 + level) / 2.0)};
}

// The percentile bootstrap of p95 over cases (`sizes[c]` samples of case c, in order): each resample
// draws as many cases as there are, with replacement, and reads p95 off the samples sorted once,
// each weighted by how often its case was drawn (no copy, no sort per resample).
Interval bootstrap_p95(std::span<const double> samples, std::span<const size_t> sizes, double level) {
  const size_t n = samples.size(), groups = sizes.size();
  std::vector<uint32_t> case_of(n);
  for (size_t c = 0, i = 0; c < groups; ++c) {
    for (size_t k = 0; k < sizes[c]; ++k) case_of[i++] = static_cast<uint32_t>(c);
  }
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return samples[a] < samples[b]; });
  std::vector<double> sorted(n);
  std::vector<uint32_t> group_of(n);  // of each sorted sample
  for (size_t k = 0; k < n; ++k) {
    sorted[k] = samples[order[k]];
    group_of[k] = case_of[order[k]];
  }

  std::mt19937_64 rng(kBootstrapSeed);
  const size_t resamples = bootstrap_resamples(level);
  std::vector<double> p95s(resamples);
  std::vector<uint32_t> drawn(groups);
  for (size_t b = 0; b < resamples; ++b) {
    std::fill(drawn.begin(), drawn.end(), 0u);
    size_t total = 0;  // samples in this resample: cases differ in size
    for (size_t g = 0; g < groups; ++g) {
      const size_t pick = static_cast<size_t>(rng() % groups);
      ++drawn[pick];
      total += sizes[pick];
    }
    const double pos = 0.95 * double(total - 1);
    const size_t lo_rank = static_cast<size_t>(std::floor(pos)), hi_rank = std::min(lo_rank + 1, total - 1);
    // The order statistics at lo_rank and hi_rank of the resample (each sample as often as its case
    // was drawn), counted down from the largest since p95 lies near the top.
    double at_lo = 0.0, at_hi = 0.0;
    size_t above = total;  // ascending rank just past the samples visited so far
    for (size_t k = n; k-- > 0;) {
      const size_t w = drawn[group_of[k]];
      if (w == 0) continue;
      const size_t first = above - w;  // this sample holds ranks [first, above)
      if (first <= hi_rank && hi_rank < above) at_hi = sorted[k];
      if (first <= lo_rank && lo_rank < above) {
        at_lo = sorted[k];
        break;
      }
      above = first;
    }
    p95s[b] = at_lo + (pos - double(lo_rank)) * (at_hi - at_lo);
  }
  return percentile_interval(p95s, level);
}

// The means and counts of the cases that have samples, in case order.
std::vector<CaseMean> case_means(std::span<const double> samples, std::span<const size_t> sizes) {
  std::vector<CaseMean> out;
  size_t at = 0;
  for (size_t size : sizes) {
    if (size == 0) continue;
    double sum = 0.0;
    for (size_t k = 0; k < size; ++k) sum += samples[at + k];
    out.push_back({sum / double(size), size});
    at += size;
  }
  return out;
}

}  // namespace

size_t bootstrap_resamples(double level) {
  return std::max(kBootstrapResamples, static_cast<size_t>(std::ceil(20.0 / (1.0 - level))));
}

void mean_interval_over_cases(std::span<const CaseMean> cases, double level, bool rate, double upper, Summary& out) {
  if (cases.size() < 2) throw std::invalid_argument("mean_interval_over_cases: needs two cases or more");
  double total = 0.0, sum = 0.0;
  for (const CaseMean& c : cases) {
    total += double(c.count);
    sum += c.mean * double(c.count);
  }
  const double mean = sum / total, groups = double(cases.size());
  // The cluster-robust variance of a ratio mean: sum of (case sum - mean x case count)^2, scaled by
  // C / (C - 1); for cases of one size it is the variance of the case means over C.
  double spread = 0.0;
  for (const CaseMean& c : cases) {
    const double d = double(c.count) * (c.mean - mean);
    spread += d * d;
  }
  const double variance = groups / (groups - 1.0) * spread / (total * total);
  if (rate) {
    const double binomial = mean * (1.0 - mean) / total;
    const double design_effect = binomial > 0.0 ? std::max(1.0, variance / binomial) : 1.0;
    const double effective = total / design_effect;
    out.mean_ci = wilson_interval(mean * effective, effective, level);
    out.mean_method = IntervalMethod::wilson_cases;
    return;
  }
  const double half = t_quantile((1.0 + level) / 2.0, cases.size() - 1) * std::sqrt(variance);
  out.mean_ci = {std::max(0.0, mean - half), std::min(upper, mean + half)};
  out.mean_method = IntervalMethod::t_cases;
}

const char* interval_method_name(IntervalMethod method) {
  switch (method) {
    case IntervalMethod::none: return "none";
    case IntervalMethod::wilson: return "wilson";
    case IntervalMethod::bootstrap_cases: return "bootstrap_cases";
    case IntervalMethod::bootstrap_samples: return "bootstrap_samples";
    case IntervalMethod::mixture_bound: return "mixture_bound";
    case IntervalMethod::t_cases: return "t_cases";
    case IntervalMethod::t_samples: return "t_samples";
    case IntervalMethod::wilson_cases: return "wilson_cases";
  }
  return "?";
}

std::optional<IntervalMethod> interval_method_from_name(std::string_view name) {
  for (IntervalMethod m : {IntervalMethod::none, IntervalMethod::wilson, IntervalMethod::bootstrap_cases,
                           IntervalMethod::bootstrap_samples, IntervalMethod::mixture_bound, IntervalMethod::t_cases,
                           IntervalMethod::t_samples, IntervalMethod::wilson_cases}) {
    if (name == interval_method_name(m)) return m;
  }
  return std::nullopt;
}

double quantile(std::span<const double> samples, double q) {
  if (samples.empty()) return 0.0;
  std::vector<double> s(samples.begin(), samples.end());
  std::sort(s.begin(), s.end());
  return sorted_quantile(s, q);
}

Summary summarize(std::span<const double> samples) {
  Summary out;
  out.count = samples.size();
  if (samples.empty()) return out;
  double sum = 0.0;
  out.max = samples[0];
  for (double v : samples) {
    sum += v;
    out.max = std::max(out.max, v);
  }
  out.mean = sum / double(samples.size());
  out.p95 = quantile(samples, 0.95);
  return out;
}

Summary summarize(std::span<const double> samples, const IntervalOptions& options) {
  if (!(options.level > 0.0 && options.level < 1.0)) {
    throw std::invalid_argument("summarize: a confidence level must lie in (0, 1)");
  }
  Summary out = summarize(samples);
  if (samples.empty()) return out;
  out.level = options.level;
  const size_t n = samples.size();
  size_t given = 0, with_samples = 0;
  for (size_t size : options.case_sizes) {
    given += size;
    with_samples += size > 0;
  }
  if (!options.case_sizes.empty() && given != n) {
    throw std::invalid_argument("summarize: the case sizes add up to " + std::to_string(given) + ", not to the " +
                                std::to_string(n) + " samples");
  }
  if (with_samples >= 2) {
    out.cases = case_means(samples, options.case_sizes);
    mean_interval_over_cases(out.cases, options.level, options.rate, options.upper, out);
    // The bootstrap draws among the cases that have samples: a resample of empty cases has no p95.
    std::vector<size_t> sizes;
    for (const CaseMean& c : out.cases) sizes.push_back(c.count);
    out.p95_ci = bootstrap_p95(samples, sizes, options.level);
    out.p95_method = IntervalMethod::bootstrap_cases;
    return out;
  }
  // One case: its samples are all there is to go on, each taken as independent.
  const std::vector<size_t> singles(n, 1);
  out.p95_ci = bootstrap_p95(samples, singles, options.level);
  out.p95_method = IntervalMethod::bootstrap_samples;
  if (options.rate) {
    out.mean_ci = wilson_interval(out.mean * double(n), double(n), options.level);
    out.mean_method = IntervalMethod::wilson;
  } else if (n == 1) {
    out.mean_ci = {out.mean, out.mean};
    out.mean_method = IntervalMethod::t_samples;
  } else {
    double spread = 0.0;
    for (double v : samples) spread += (v - out.mean) * (v - out.mean);
    const double half = t_quantile((1.0 + options.level) / 2.0, n - 1) * std::sqrt(spread / double(n - 1) / double(n));
    out.mean_ci = {std::max(0.0, out.mean - half), std::min(options.upper, out.mean + half)};
    out.mean_method = IntervalMethod::t_samples;
  }
  return out;
}

Summary summarize_metric(std::span<const double> samples, std::span<const size_t> case_sizes, Metric metric,
                         double level) {
  const MetricInfo& info = metric_info(metric);
  return summarize(samples, {.level = level, .case_sizes = case_sizes, .rate = info.rate, .upper = info.upper()});
}

Interval wilson_interval(double successes, double n, double level) {
  if (!(n > 0.0)) throw std::invalid_argument("wilson_interval: no trials");
  const double z = normal_quantile((1.0 + level) / 2.0);
  const double trials = n, p = std::clamp(successes / trials, 0.0, 1.0), z2 = z * z;
  const double denom = 1.0 + z2 / trials;
  const double center = (p + z2 / (2.0 * trials)) / denom;
  const double half = z * std::sqrt(p * (1.0 - p) / trials + z2 / (4.0 * trials * trials)) / denom;
  return {std::max(0.0, center - half), std::min(1.0, center + half)};
}

double t_quantile(double p, size_t df) {
  if (!(p > 0.0 && p < 1.0)) throw std::invalid_argument("t_quantile: p must lie in (0, 1)");
  if (df == 0) throw std::invalid_argument("t_quantile: needs one degree of freedom or more");
  if (p < 0.5) return -t_quantile(1.0 - p, df);
  if (p == 0.5) return 0.0;
  const double z = normal_quantile(p), nu = double(df);
  if (df > 2000) {
    // Cornish-Fisher expansion in 1 / nu: its next term is below 1e-11 at the levels kvtune allows.
    const double z2 = z * z;
    return z + z * (z2 + 1.0) / (4.0 * nu) + z * ((5.0 * z2 + 16.0) * z2 + 3.0) / (96.0 * nu * nu) +
           z * (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) / (384.0 * nu * nu * nu);
  }
  // P(|T| < t) for whole degrees of freedom in closed form (Abramowitz & Stegun 26.7.3, 26.7.4),
  // solved by bisection on t: the root lies between the normal quantile and its Cauchy bound.
  const double two_sided = 2.0 * p - 1.0;
  auto within = [&](double t) {
    const double theta = std::atan(t / std::sqrt(nu)), c2 = std::cos(theta) * std::cos(theta);
    double term = 1.0, sum = 1.0;
    if (df % 2 == 0) {
      for (size_t k = 2; k < df; k += 2) {
        term *= c2 * double(k - 1) / double(k);
        sum += term;
      }
      return std::sin(theta) * sum;
    }
    if (df == 1) return 2.0 * theta / M_PI;
    for (size_t k = 3; k < df; k += 2) {
      term *= c2 * double(k - 1) / double(k);
      sum += term;
    }
    return 2.0 / M_PI * (theta + std::sin(theta) * std::cos(theta) * sum);
  };
  double lo = z, hi = std::tan(M_PI * (p - 0.5));  // t with nu >= 1 lies between z and the Cauchy's
  for (int i = 0; i < 200 && hi - lo > 1e-13 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (within(mid) < two_sided ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

double normal_quantile(double p) {
  if (!(p > 0.0 && p < 1.0)) throw std::invalid_argument("normal_quantile: p must lie in (0, 1)");
  // Acklam's rational approximation (relative error < 1.2e-9), then one Halley step on
  // Φ(x) - p, with Φ from erfc, which brings it to double precision.
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                                 1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                 6.680131188771972e+01,  -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                 -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                 3.754408661907416e+00};
  constexpr double p_low = 0.02425;
  double x = 0.0;
  if (p < p_low) {
    const double q = std::sqrt(-2.0 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
  } else if (p <= 1.0 - p_low) {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
  } else {
    const double q = std::sqrt(-2.0 * std::log(1.0 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
  }
  const double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  const double u = e * std::sqrt(2.0 * M_PI) * std::exp(x * x / 2.0);
  return x - u / (1.0 + x * u / 2.0);
}

}  // namespace kvtune
