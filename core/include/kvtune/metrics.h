// The metric names of DESIGN §5, used verbatim in every output (JSON key = name), and their
// aggregation over queries and cases.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

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
  bool share;             // every sample lies in [0, 1] (a rate, or an overlap)
  double upper() const { return share ? 1.0 : std::numeric_limits<double>::infinity(); }
};
inline constexpr std::array<MetricInfo, kMetricCount> kMetricInfo = {{
    {Metric::rel_out_err, false, false, "", false, false},
    {Metric::max_logit_err, false, false, "", false, false},
    {Metric::shift_logit_err, false, false, "", false, false},
    {Metric::attn_kl, false, false, "nats", false, false},
    {Metric::top1_agree, true, false, "", true, true},
    {Metric::topk_overlap, true, false, "", false, true},
    {Metric::needle_hit, true, true, "", true, true},
    {Metric::needle_mass_ratio, true, true, "", false, false},
}};
constexpr const MetricInfo& metric_info(Metric m) { return kMetricInfo[static_cast<size_t>(m)]; }

// How a confidence interval was found. A case is one seed x sampled layer x KV head: its queries
// share its keys and its needles their workload, so the samples of one case are correlated and the
// cases, not the samples, are the independent draws.
enum class IntervalMethod : uint8_t {
  none,               // no interval (no samples, or results written before intervals existed)
  wilson,             // Wilson score interval of a proportion over independent samples (one case)
  bootstrap_cases,    // percentile bootstrap resampling whole cases (every p95 over several cases)
  bootstrap_samples,  // percentile bootstrap over single samples (one case: nothing else to resample)
  mixture_bound,      // a derived record (layer exemption) read without its cases: its layers'
                      // intervals mixed end by end, as if the layers moved together
  t_cases,            // Student-t interval of the mean over the cases' means (cluster-robust
                      // variance of a ratio mean when cases differ in size; C - 1 degrees of freedom)
  t_samples,          // Student-t interval over single samples (one case)
  wilson_cases,       // Wilson score interval with the sample count divided by the cases' design
                      // effect (between-case variance over the binomial variance, at least 1)
};
const char* interval_method_name(IntervalMethod method);
std::optional<IntervalMethod> interval_method_from_name(std::string_view name);

struct Interval {
  double lo = 0.0, hi = 0.0;
  bool contains(double v) const { return lo <= v && v <= hi; }
};

// The confidence level of every interval unless a sweep's budget.confidence says otherwise.
inline constexpr double kDefaultConfidence = 0.95;
// Resamples of each bootstrap interval at most levels (its seed is fixed, so an interval is
// reproducible); a level above 0.98 takes 20 / (1 - level), so 10 resamples lie beyond each end.
inline constexpr size_t kBootstrapResamples = 1000;
size_t bootstrap_resamples(double level);

// One case's share of a summary: its samples' mean and count. A derived record (layer exemption)
// mixes its parts case by case and finds its interval from these.
struct CaseMean {
  double mean = 0.0;
  size_t count = 0;
  bool operator==(const CaseMean&) const = default;
};

struct Summary {
  double mean = 0.0;
  double p95 = 0.0;  // linear interpolation between order statistics (numpy's default)
  double max = 0.0;
  size_t count = 0;  // 0: the metric does not apply (no needles)
  // Confidence intervals of the mean and of p95 at `level` (0: none, see IntervalMethod::none).
  double level = 0.0;
  Interval mean_ci, p95_ci;
  IntervalMethod mean_method = IntervalMethod::none, p95_method = IntervalMethod::none;
  std::vector<CaseMean> cases;  // with intervals over two or more cases, in case order
  bool has_intervals() const { return level > 0.0; }
};

// Mean, p95, max and count; no intervals.
Summary summarize(std::span<const double> samples);

// What summarize needs for intervals. The samples come case by case: case_sizes[c] samples of case
// c, in order (they must add up to the samples; empty, or one case: every sample is its own case).
// A rate (0/1 samples) gets Wilson for its mean, every other metric Student's t; every p95 the
// bootstrap. `upper` is the largest value a sample can take (1 for a share), where a t interval is
// clipped, as it is at 0: every metric kvtune summarizes is non-negative.
struct IntervalOptions {
  double level = kDefaultConfidence;
  std::span<const size_t> case_sizes;
  bool rate = false;
  double upper = std::numeric_limits<double>::infinity();
};
Summary summarize(std::span<const double> samples, const IntervalOptions& options);

// A metric's samples summarized with their intervals: its MetricInfo says whether it is a rate and
// the largest value it can take.
Summary summarize_metric(std::span<const double> samples, std::span<const size_t> case_sizes, Metric metric,
                         double level = kDefaultConfidence);

// The interval of the mean of cases with these means and counts (at least two cases with samples):
// Wilson with the design effect for a rate, Student's t otherwise. Sets mean_ci and mean_method.
void mean_interval_over_cases(std::span<const CaseMean> cases, double level, bool rate, double upper, Summary& out);

// The Wilson score interval of `successes` of `n` trials at `level` (n > 0; an effective n after a
// design effect need not be whole).
Interval wilson_interval(double successes, double n, double level);

// Student's t quantile with `df` degrees of freedom at p in (0, 1), to about 1e-12.
double t_quantile(double p, size_t df);

// The standard normal quantile (inverse CDF) at p in (0, 1), to double precision.
double normal_quantile(double p);

// Linear-interpolated quantile, q in [0, 1]; samples need not be sorted.
double quantile(std::span<const double> samples, double q);

}  // namespace kvtune
