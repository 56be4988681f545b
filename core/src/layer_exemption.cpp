#include "kvtune/layer_exemption.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <utility>

namespace kvtune {
namespace {

// The worse of two values on the budget's side (a p95 bound of a mixture).
double worse(double a, double b, bool higher_is_better) { return higher_is_better ? std::min(a, b) : std::max(a, b); }

// The intervals of a mixture of summaries with these weights, read without their cases (files
// written before cases were kept): the mean's ends mixed end by end, as if the parts moved together.
// A rate's mean gets the Wilson interval of the mixture's rate over all its samples instead (mixing
// the parts' Wilson ends would count each part's few samples as if they were all).
void mix_interval_ends(Summary& out, const std::vector<std::pair<const Summary*, double>>& parts, bool rate) {
  out.mean_ci = {0.0, 0.0};
  for (const auto& [s, w] : parts) {
    out.mean_ci.lo += w * s->mean_ci.lo;
    out.mean_ci.hi += w * s->mean_ci.hi;
  }
  out.mean_method = IntervalMethod::mixture_bound;
  if (rate) {
    out.mean_ci = wilson_interval(out.mean * double(out.count), double(out.count), out.level);
    out.mean_method = IntervalMethod::wilson;
  }
}

// The mixture's intervals: the mean's from the mixed cases where they are known (`cases`, at least
// two), else its parts' ends mixed; the p95's the worse of the parts' ends on the budget's side, a
// bound that holds as if the parts moved together. None when a part has none.
void mix_intervals(Summary& out, const std::vector<std::pair<const Summary*, double>>& parts, std::vector<CaseMean> cases,
                   const MetricInfo& info) {
  for (const auto& [s, w] : parts) {
    if (!s->has_intervals() || s->level != parts.front().first->level) return;
  }
  out.level = parts.front().first->level;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Summary& s = *parts[i].first;
    out.p95_ci = i == 0 ? s.p95_ci
                        : Interval{worse(out.p95_ci.lo, s.p95_ci.lo, info.higher_is_better),
                                   worse(out.p95_ci.hi, s.p95_ci.hi, info.higher_is_better)};
  }
  out.p95_method = IntervalMethod::mixture_bound;
  if (cases.size() < 2) return mix_interval_ends(out, parts, info.rate);
  mean_interval_over_cases(cases, out.level, info.rate, info.upper(), out);
  out.cases = std::move(cases);
}

// Two summaries of the same cases (a layer's, under two schemes), mixed case by case with weight w
// on the first; empty when either lacks its cases or they are not the same cases.
std::vector<CaseMean> mix_cases(const Summary& a, const Summary& b, double w) {
  if (a.cases.size() != b.cases.size()) return {};
  std::vector<CaseMean> out;
  for (size_t c = 0; c < a.cases.size(); ++c) {
    if (a.cases[c].count != b.cases[c].count) return {};
    out.push_back({w * a.cases[c].mean + (1.0 - w) * b.cases[c].mean, a.cases[c].count});
  }
  return out;
}

// One sampled layer's summary of one metric with one of the `stratum` model layers it stands for
// kept at the baseline: the exact mean of the mix, and bounds for its p95 on the budget's side.
Summary mix(const Summary& base, const Summary& exempt, double stratum, const MetricInfo& info) {
  const bool higher_is_better = info.higher_is_better;
  if (base.count == 0 || exempt.count == 0) return {};
  if (stratum <= 1.0) return exempt;
  const double w = 1.0 / stratum;
  Summary out;
  out.count = base.count;
  out.mean = w * exempt.mean + (1.0 - w) * base.mean;
  out.p95 = worse(base.p95, exempt.p95, higher_is_better);
  out.max = std::max(base.max, exempt.max);
  mix_intervals(out, {{&exempt, w}, {&base, 1.0 - w}}, mix_cases(exempt, base, w), info);
  return out;
}

// The summary over every sampled layer: count-weighted mean, bounded p95, largest max; no samples
// when any layer has none (a metric not attributable to layers).
Summary combine(const std::vector<LayerSummary>& layers, size_t m) {
  const bool higher_is_better = kMetricInfo[m].higher_is_better;
  Summary out;
  double sum = 0.0;
  for (const LayerSummary& l : layers) {
    const Summary& s = l.metrics[m];
    if (s.count == 0) return {};
    sum += s.mean * static_cast<double>(s.count);
    out.p95 = out.count == 0 ? s.p95 : worse(out.p95, s.p95, higher_is_better);
    out.max = out.count == 0 ? s.max : std::max(out.max, s.max);
    out.count += s.count;
  }
  if (out.count == 0) return out;
  out.mean = sum / static_cast<double>(out.count);
  std::vector<std::pair<const Summary*, double>> parts;
  std::vector<CaseMean> cases;  // every layer's cases, or none when a layer's are not known
  bool known = true;
  for (const LayerSummary& l : layers) {
    parts.emplace_back(&l.metrics[m], static_cast<double>(l.metrics[m].count) / static_cast<double>(out.count));
    known = known && !l.metrics[m].cases.empty();
    cases.insert(cases.end(), l.metrics[m].cases.begin(), l.metrics[m].cases.end());
  }
  if (!known) cases.clear();
  mix_intervals(out, parts, std::move(cases), kMetricInfo[m]);
  return out;
}

const LayerSummary* find_layer(const SweepRecord& r, int64_t layer) {
  for (const LayerSummary& l : r.layers) {
    if (l.layer == layer) return &l;
  }
  return nullptr;
}

}  // namespace

Metric exemption_metric(const SweepBudget& budget) {
  return budget.terms.empty() ? Metric::rel_out_err : budget.terms.front().metric;
}

std::vector<int64_t> most_damaged_layers(const SweepRecord& record, Metric metric, int64_t count) {
  const size_t m = static_cast<size_t>(metric);
  if (count < 1 || record.layers.size() <= static_cast<size_t>(count)) return {};
  for (const LayerSummary& l : record.layers) {
    if (l.metrics[m].count == 0) return {};
  }
  const bool higher_is_better = metric_info(metric).higher_is_better;
  std::vector<size_t> order(record.layers.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Most damaged first; a tie keeps the scenario's layer order.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const double x = record.layers[a].metrics[m].mean, y = record.layers[b].metrics[m].mean;
    return higher_is_better ? x < y : x > y;
  });
  std::vector<int64_t> out;
  for (int64_t i = 0; i < count; ++i) out.push_back(record.layers[order[static_cast<size_t>(i)]].layer);
  std::sort(out.begin(), out.end());
  return out;
}

SweepRecord exempt_record(const SweepRecord& base, const SweepRecord& baseline, const std::vector<int64_t>& layers,
                          int64_t model_layers, const std::string& exempt) {
  if (layers.empty() || base.layers.empty() || model_layers < static_cast<int64_t>(base.layers.size())) {
    throw std::logic_error("exempt_record: needs exempt layers, per-layer summaries and model_layers >= sampled layers");
  }
  SweepRecord r = base;
  r.exempt_layers = layers;
  r.exempt = exempt;
  r.origin = base.origin + " (layers " + format_layers(layers) + " kept at " + exempt + ")";
  const double stratum = static_cast<double>(model_layers) / static_cast<double>(base.layers.size());
  for (LayerSummary& l : r.layers) {
    if (std::find(layers.begin(), layers.end(), l.layer) == layers.end()) continue;
    const LayerSummary* e = find_layer(baseline, l.layer);
    if (e == nullptr) throw std::logic_error("exempt_record: the baseline has no summary of layer " + std::to_string(l.layer));
    for (size_t m = 0; m < kMetricCount; ++m) {
      l.metrics[m] = mix(l.metrics[m], e->metrics[m], stratum, kMetricInfo[m]);
    }
  }
  for (size_t m = 0; m < kMetricCount; ++m) r.metrics[m] = combine(r.layers, m);
  const double n = static_cast<double>(layers.size()), total = static_cast<double>(model_layers);
  r.k_bits = ((total - n) * base.k_bits + n * baseline.k_bits) / total;
  r.v_bits = ((total - n) * base.v_bits + n * baseline.v_bits) / total;
  return r;
}

SweepRecord sliding_window_record(const SweepRecord& base, const SweepRecord& baseline,
                                  const std::vector<int64_t>& sampled_sliding, int64_t sliding_layers,
                                  int64_t model_layers, const std::string& exempt) {
  if (sampled_sliding.empty() || sampled_sliding.size() >= base.layers.size() || sliding_layers < 1 ||
      sliding_layers >= model_layers) {
    throw std::logic_error("sliding_window_record: needs some sampled layers that slide and some that do not");
  }
  SweepRecord r = base;
  r.exempt_layers = sampled_sliding;
  r.exempt = exempt;
  r.exempt_pattern = "sliding_window";
  r.origin = base.origin + " (sliding-window layers kept at " + exempt + ")";
  for (LayerSummary& l : r.layers) {
    if (std::find(sampled_sliding.begin(), sampled_sliding.end(), l.layer) == sampled_sliding.end()) continue;
    const LayerSummary* e = find_layer(baseline, l.layer);
    if (e == nullptr) {
      throw std::logic_error("sliding_window_record: the baseline has no summary of layer " + std::to_string(l.layer));
    }
    l.metrics = e->metrics;
  }
  for (size_t m = 0; m < kMetricCount; ++m) r.metrics[m] = combine(r.layers, m);
  const double n = static_cast<double>(sliding_layers), total = static_cast<double>(model_layers);
  r.k_bits = ((total - n) * base.k_bits + n * baseline.k_bits) / total;
  r.v_bits = ((total - n) * base.v_bits + n * baseline.v_bits) / total;
  return r;
}

int64_t model_layer_count(const SweepSpec& spec) {
  return spec.model ? spec.model->shape.layers : spec.scenario.workload.layers;
}

std::string exempt_layers_text(const SweepRecord& r) {
  if (r.exempt_pattern.empty()) return format_layers(r.exempt_layers);
  return r.exempt_pattern + " (sampled: " + format_layers(r.exempt_layers) + ")";
}

int64_t model_sliding_layer_count(const SweepSpec& spec) {
  return spec.model ? spec.model->shape.sliding_layers : int64_t(spec.scenario.workload.sliding_layers.size());
}

std::vector<SweepRecord> with_layer_exemptions(const SweepSpec& spec, std::vector<SweepRecord> records) {
  const LayerExemptionSearch& e = spec.exemption;
  if (!e.any()) return records;
  const auto baseline = std::find_if(records.begin(), records.end(), [&](const SweepRecord& r) {
    return r.ok && !r.derived() && r.k == e.spec && r.v == e.spec && !r.layers.empty();
  });
  if (baseline == records.end()) return records;
  const SweepRecord base_line = *baseline;
  const Metric metric = exemption_metric(spec.budget);
  const int64_t model_layers = model_layer_count(spec);
  const size_t evaluated = records.size();
  const std::vector<int64_t>& slides = spec.scenario.workload.sliding_layers;
  const int64_t model_sliding = model_sliding_layer_count(spec);
  records.reserve(evaluated * (2 + e.counts.size()));  // `r` below stays valid while records grow
  for (size_t i = 0; i < evaluated; ++i) {
    const SweepRecord& r = records[i];
    if (!r.ok || r.derived() || r.layers.empty() || (r.k == e.spec && r.v == e.spec)) continue;
    for (int64_t count : e.counts) {
      const std::vector<int64_t> layers = most_damaged_layers(r, metric, count);
      if (layers.empty() || model_layers < static_cast<int64_t>(r.layers.size())) continue;
      records.push_back(exempt_record(records[i], base_line, layers, model_layers, e.spec));
    }
    if (!e.sliding_window) continue;
    std::vector<int64_t> sampled_sliding;
    for (const LayerSummary& l : r.layers) {
      if (std::find(slides.begin(), slides.end(), l.layer) != slides.end()) sampled_sliding.push_back(l.layer);
    }
    if (sampled_sliding.empty() || sampled_sliding.size() == r.layers.size() || model_sliding < 1 ||
        model_sliding >= model_layers) {
      continue;
    }
    records.push_back(
        sliding_window_record(records[i], base_line, sampled_sliding, model_sliding, model_layers, e.spec));
  }
  return records;
}

}  // namespace kvtune
