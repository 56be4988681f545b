#include "kvtune/metrics.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
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

// The percentile bootstrap of the mean and p95 over `groups` equal runs of the samples: each
// resample draws `groups` runs with replacement. p95 of a resample is read off the samples sorted
// once, each weighted by how often its run was drawn (no copy, no sort per resample).
void bootstrap(std::span<const double> samples, size_t groups, double level, Summary& out) {
  const size_t n = samples.size(), per = n / groups;
  std::vector<double> group_sum(groups, 0.0);
  for (size_t i = 0; i < n; ++i) group_sum[i / per] += samples[i];
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return samples[a] < samples[b]; });
  std::vector<double> sorted(n);
  std::vector<uint32_t> group_of(n);  // of each sorted sample
  for (size_t k = 0; k < n; ++k) {
    sorted[k] = samples[order[k]];
    group_of[k] = static_cast<uint32_t>(order[k] / per);
  }

  std::mt19937_64 rng(kBootstrapSeed);
  std::vector<double> means(kBootstrapResamples), p95s(kBootstrapResamples);
  std::vector<uint32_t> drawn(groups);
  const double pos = 0.95 * double(n - 1);
  const size_t lo_rank = static_cast<size_t>(std::floor(pos)), hi_rank = std::min(lo_rank + 1, n - 1);
  for (size_t b = 0; b < kBootstrapResamples; ++b) {
    std::fill(drawn.begin(), drawn.end(), 0u);
    double sum = 0.0;
    for (size_t g = 0; g < groups; ++g) {
      const size_t pick = static_cast<size_t>(rng() % groups);
      ++drawn[pick];
      sum += group_sum[pick];
    }
    means[b] = sum / double(n);
    // The order statistics at lo_rank and hi_rank of the resample (n values: each sample as often
    // as its case was drawn), counted down from the largest since p95 lies near the top.
    double at_lo = 0.0, at_hi = 0.0;
    size_t above = n;  // ascending rank just past the samples visited so far
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
  out.mean_ci = percentile_interval(means, level);
  out.p95_ci = percentile_interval(p95s, level);
}

}  // namespace

const char* interval_method_name(IntervalMethod method) {
  switch (method) {
    case IntervalMethod::none: return "none";
    case IntervalMethod::wilson: return "wilson";
    case IntervalMethod::bootstrap_cases: return "bootstrap_cases";
    case IntervalMethod::bootstrap_samples: return "bootstrap_samples";
    case IntervalMethod::mixture_bound: return "mixture_bound";
  }
  return "?";
}

std::optional<IntervalMethod> interval_method_from_name(std::string_view name) {
  for (IntervalMethod m : {IntervalMethod::none, IntervalMethod::wilson, IntervalMethod::bootstrap_cases,
                           IntervalMethod::bootstrap_samples, IntervalMethod::mixture_bound}) {
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
  const bool by_cases = options.cases >= 2 && n % options.cases == 0;
  bootstrap(samples, by_cases ? options.cases : n, options.level, out);
  out.mean_method = out.p95_method = by_cases ? IntervalMethod::bootstrap_cases : IntervalMethod::bootstrap_samples;
  if (options.rate) {
    out.mean_ci = wilson_interval(out.mean * double(n), n, options.level);
    out.mean_method = IntervalMethod::wilson;
  }
  return out;
}

Interval wilson_interval(double successes, size_t n, double level) {
  if (n == 0) throw std::invalid_argument("wilson_interval: no trials");
  const double z = normal_quantile((1.0 + level) / 2.0);
  const double trials = double(n), p = std::clamp(successes / trials, 0.0, 1.0), z2 = z * z;
  const double denom = 1.0 + z2 / trials;
  const double center = (p + z2 / (2.0 * trials)) / denom;
  const double half = z * std::sqrt(p * (1.0 - p) / trials + z2 / (4.0 * trials * trials)) / denom;
  return {std::max(0.0, center - half), std::min(1.0, center + half)};
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
