// The metric names of DESIGN §5, used verbatim in every output (JSON key = name), and their
// aggregation over queries and cases.
#pragma once

#include <array>
#include <cstddef>
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
};
inline constexpr std::array<MetricInfo, kMetricCount> kMetricInfo = {{
    {Metric::rel_out_err, false, false, ""},
    {Metric::max_logit_err, false, false, ""},
    {Metric::shift_logit_err, false, false, ""},
    {Metric::attn_kl, false, false, "nats"},
    {Metric::top1_agree, true, false, ""},
    {Metric::topk_overlap, true, false, ""},
    {Metric::needle_hit, true, true, ""},
    {Metric::needle_mass_ratio, true, true, ""},
}};
constexpr const MetricInfo& metric_info(Metric m) { return kMetricInfo[static_cast<size_t>(m)]; }

struct Summary {
  double mean = 0.0;
  double p95 = 0.0;  // linear interpolation between order statistics (numpy's default)
  double max = 0.0;
  size_t count = 0;  // 0: the metric does not apply (no needles)
};

Summary summarize(std::span<const double> samples);

// Linear-interpolated quantile, q in [0, 1]; samples need not be sorted.
double quantile(std::span<const double> samples, double q);

}  // namespace kvtune
