// The metric names of DESIGN §5, used verbatim in every output (JSON key = name), and their
// aggregation over queries and cases.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace kvtune {

enum class Metric : size_t {
  rel_out_err,        // ||o - o_ref|| / ||o_ref||
  max_logit_err,      // max_j |Δlogit_j|
  shift_logit_err,    // max_j |Δlogit_j - mean_j Δlogit| (softmax ignores a common shift)
  attn_kl,            // KL(p_ref || p), nats
  top1_agree,         // argmax p == argmax p_ref (1 or 0)
  topk_overlap,       // |topk(p) ∩ topk(p_ref)| / k
  needle_hit,         // the needle stays among the top n tokens of a query with n needles (n = 1: arg-max)
  needle_mass_ratio,  // p[needle] / p_ref[needle]; needle metrics: one sample per planted needle
};

inline constexpr size_t kMetricCount = 8;
inline constexpr std::array<std::string_view, kMetricCount> kMetricNames = {
    "rel_out_err", "max_logit_err", "shift_logit_err", "attn_kl",
    "top1_agree",  "topk_overlap",  "needle_hit",      "needle_mass_ratio"};

constexpr std::string_view metric_name(Metric m) { return kMetricNames[static_cast<size_t>(m)]; }

// What consumers need to know of each metric (budgets, reports): one table, indexed by Metric.
struct MetricInfo {
  Metric metric;
  bool higher_is_better;  // agreement and needle metrics; the error metrics are lower-is-better
  bool needs_needles;     // sampled only where the workload plants needles
  std::string_view unit;  // "" (a ratio or a count), "nats"
  bool rate;              // every sample is 0 or 1: the mean is a proportion (Wilson interval)
};
inline constexpr std::array<MetricInfo, kMetricCount> kMetricInfo = {{
    {Metric::rel_out_err, false, false, "", false},
    {Metric::max_logit_err, false, false, "", false},
    {Metric::shift_logit_err, false, false, "", false},
    {Metric::attn_kl, false, false, "nats", false},
    {Metric::top1_agree, true, false, "", true},
    {Metric::topk_overlap, true, false, "", false},
    {Metric::needle_hit, true, true, "", true},
    {Metric::needle_mass_ratio, true, true, "", false},
}};
constexpr const MetricInfo& metric_info(Metric m) { return kMetricInfo[static_cast<size_t>(m)]; }

// How a confidence interval was found.
enum class IntervalMethod : uint8_t {
  none,               // no interval (no samples, or results written before intervals existed)
  wilson,             // Wilson score interval of a proportion (a rate metric's mean; samples taken
                      // as independent, which needles of one case are not quite)
  bootstrap_cases,    // percentile bootstrap resampling whole cases (the samples of one case stay
                      // together, so within-case correlation is kept)
  bootstrap_samples,  // percentile bootstrap over single samples (one case: nothing else to resample)
  mixture_bound,      // a derived record (layer exemption): its layers' intervals mixed end by end,
                      // which bounds the mixture's interval as if the layers moved together
};
const char* interval_method_name(IntervalMethod method);
std::optional<IntervalMethod> interval_method_from_name(std::string_view name);

struct Interval {
  double lo = 0.0, hi = 0.0;
  bool contains(double v) const { return lo <= v && v <= hi; }
};

// The confidence level of every interval unless a sweep's budget.confidence says otherwise.
inline constexpr double kDefaultConfidence = 0.95;
// Resamples of each bootstrap interval (its seed is fixed, so an interval is reproducible).
inline constexpr size_t kBootstrapResamples = 1000;

struct Summary {
  double mean = 0.0;
  double p95 = 0.0;  // linear interpolation between order statistics (numpy's default)
  double max = 0.0;
  size_t count = 0;  // 0: the metric does not apply (no needles)
  // Confidence intervals of the mean and of p95 at `level` (0: none, see IntervalMethod::none).
  double level = 0.0;
  Interval mean_ci, p95_ci;
  IntervalMethod mean_method = IntervalMethod::none, p95_method = IntervalMethod::none;
  bool has_intervals() const { return level > 0.0; }
};

// Mean, p95, max and count; no intervals.
Summary summarize(std::span<const double> samples);

// What summarize needs for intervals: the samples come in `cases` equal runs, one per case (a
// count that does not divide the samples, or 1, resamples single samples), and the metric is or is
// not a rate (0/1 samples: Wilson for the mean; the bootstrap otherwise, and always for p95).
struct IntervalOptions {
  double level = kDefaultConfidence;
  size_t cases = 1;
  bool rate = false;
};
Summary summarize(std::span<const double> samples, const IntervalOptions& options);

// The Wilson score interval of `successes` of `n` trials at `level` (n > 0).
Interval wilson_interval(double successes, size_t n, double level);

// The standard normal quantile (inverse CDF) at p in (0, 1), to double precision.
double normal_quantile(double p);

// Linear-interpolated quantile, q in [0, 1]; samples need not be sorted.
double quantile(std::span<const double> samples, double q);

}  // namespace kvtune
