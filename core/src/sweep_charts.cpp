// The Vega-Lite specifications of report.html (sweep_html.h). Each chart carries its own data, so
// a specification written beside the page renders on its own in a notebook.

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "kvtune/layer_exemption.h"
#include "kvtune/memory.h"
#include "kvtune/sweep_html.h"

namespace kvtune {
namespace {

using nlohmann::ordered_json;

constexpr const char* kSchema = "https://vega.github.io/schema/vega-lite/v6.json";
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// Search points in grey; each runtime in its own colour (Tableau 10, in the sweep's runtime order).
constexpr const char* kSearchColour = "#9d9d9d";
constexpr const char* kRuntimeColours[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                           "#edc948", "#b07aa1", "#ff9da7", "#9c755f"};
constexpr const char* kBudgetColour = "#2e8b57";

ordered_json number_or_null(double v) { return std::isfinite(v) ? ordered_json(v) : ordered_json(nullptr); }

// The error the frontier is drawn against: the budget's first upper-bounded metric term (its
// statistic), or mean rel_out_err when the budget has none.
struct ErrorAxis {
  BudgetTerm term;
  std::optional<double> bound;
  std::string label;
};

ErrorAxis error_axis(const SweepBudget& budget) {
  for (const BudgetTerm& t : budget.terms) {
    if (t.kind == BoundKind::at_most) {
      return {t, t.bound, std::string(metric_name(t.metric)) + (t.statistic == Statistic::p95 ? " p95" : " (mean)")};
    }
  }
  return {BudgetTerm{}, std::nullopt, "rel_out_err (mean)"};
}

std::string status_of(const RecordVerdict& v) { return v.feasible ? "feasible" : v.undecided ? "undecided" : "infeasible"; }

std::string pair_text(const SweepRecord& r) {
  std::string text = "K " + r.k + ", V " + r.v;
  if (r.derived()) text += ", layers " + exempt_layers_text(r) + " at " + r.exempt;
  return text;
}

// Which runtimes offer a record's (K, V) pair, by index into spec.runtimes.
std::vector<size_t> offered_by(const SweepSpec& spec, const SweepRecord& r) {
  std::vector<size_t> out;
  if (r.derived()) return out;
  for (size_t i = 0; i < spec.runtime_views.size(); ++i) {
    for (const RuntimeOption& o : spec.runtime_views[i].options) {
      if (o.k_spec == r.k && o.v_spec == r.v) {
        out.push_back(i);
        break;
      }
    }
  }
  return out;
}

std::string runtime_title(const SweepSpec& spec, size_t i) {
  return i < spec.runtime_views.size() && !spec.runtime_views[i].title.empty() ? spec.runtime_views[i].title
                                                                               : spec.runtimes[i].name;
}

// A record's colour group: the first runtime that offers its pair, or "search".
std::string group_of(const SweepSpec& spec, const std::vector<size_t>& offered) {
  return offered.empty() ? std::string("search") : runtime_title(spec, offered.front());
}

// The colour scale of "offered by": search, then each runtime.
ordered_json group_scale(const SweepSpec& spec) {
  ordered_json domain = ordered_json::array({"search"}), range = ordered_json::array({kSearchColour});
  for (size_t i = 0; i < spec.runtimes.size(); ++i) {
    domain.push_back(runtime_title(spec, i));
    range.push_back(kRuntimeColours[i % std::size(kRuntimeColours)]);
  }
  return {{"domain", domain}, {"range", range}};
}

// The records the per-pair charts compare: the best (or, with nothing feasible, the closest) and
// each runtime's recommendation, each once, labelled by every role it plays.
struct Pick {
  size_t record = 0;
  std::string label;
};

std::vector<Pick> picks(const SweepSpec& spec, const SweepAnalysis& analysis) {
  std::vector<Pick> out;
  auto add = [&](size_t record, const std::string& label) {
    for (Pick& p : out) {
      if (p.record == record) {
        p.label += ", " + label;
        return;
      }
    }
    out.push_back({record, label});
  };
  if (analysis.best) {
    add(*analysis.best, "best");
  } else if (analysis.closest) {
    add(*analysis.closest, "closest (infeasible)");
  }
  for (size_t i = 0; i < analysis.runtimes.size(); ++i) {
    if (analysis.runtimes[i].record) add(*analysis.runtimes[i].record, runtime_title(spec, i));
  }
  return out;
}

ordered_json tooltip_fields(std::initializer_list<std::pair<const char*, const char*>> fields) {
  ordered_json out = ordered_json::array();
  for (const auto& [field, title] : fields) out.push_back({{"field", field}, {"title", title}});
  return out;
}

ordered_json base_spec(const std::string& description) {
  return {{"$schema", kSchema}, {"description", description}, {"config", {{"view", {{"stroke", nullptr}}}}}};
}

ChartSpec pareto_chart(const SweepSpec& spec, const std::vector<SweepRecord>& records, const SweepAnalysis& analysis) {
  const ErrorAxis axis = error_axis(spec.budget);
  const auto error_of = [&](const SweepRecord& r) {
    const Summary& s = r.metric(axis.term.metric);
    return std::make_pair(axis.term.value(s), s.has_intervals() ? std::optional(axis.term.interval(s)) : std::nullopt);
  };
  ordered_json points = ordered_json::array();
  double smallest = std::numeric_limits<double>::infinity(), largest = 0.0;
  std::set<size_t> frontier(analysis.frontier.begin(), analysis.frontier.end());
  for (size_t i = 0; i < records.size(); ++i) {
    const SweepRecord& r = records[i];
    const auto [err, ci] = error_of(r);
    // A log axis cannot place 0 (a lossless pair): such points are listed in the table only.
    if (!r.ok || !(err > 0.0) || !std::isfinite(err)) continue;
    smallest = std::min(smallest, ci && ci->lo > 0.0 ? std::min(err, ci->lo) : err);
    largest = std::max(largest, ci ? std::max(err, ci->hi) : err);
    const std::vector<size_t> by = offered_by(spec, r);
    std::string runtimes;
    for (size_t b : by) runtimes += (runtimes.empty() ? "" : ", ") + runtime_title(spec, b);
    const Summary& needle = r.metric(Metric::needle_hit);
    points.push_back({{"index", i},
                      {"pair", pair_text(r)},
                      {"k", r.k},
                      {"v", r.v},
                      {"bits", r.bits()},
                      {"k_bits", r.k_bits},
                      {"v_bits", r.v_bits},
                      {"err", err},
                      {"err_lo", ci ? number_or_null(ci->lo) : ordered_json(nullptr)},
                      {"err_hi", ci ? number_or_null(ci->hi) : ordered_json(nullptr)},
                      {"attn_kl_p95", number_or_null(r.metric(Metric::attn_kl).p95)},
                      {"needle_hit", needle.count ? ordered_json(needle.mean) : ordered_json(nullptr)},
                      {"group", group_of(spec, by)},
                      {"runtimes", runtimes.empty() ? ordered_json("-") : ordered_json(runtimes)},
                      {"status", status_of(analysis.verdicts[i])},
                      {"kind", r.derived() ? "layer exemption" : "evaluated"},
                      {"frontier", frontier.count(i) != 0}});
  }
  if (points.empty()) smallest = largest = 1.0;
  const ordered_json x = {{"field", "bits"},
                          {"type", "quantitative"},
                          {"title", "bits per element ((K + V) / 2)"},
                          {"scale", {{"zero", false}}}};
  const ordered_json y = {
      {"field", "err"}, {"type", "quantitative"}, {"title", axis.label}, {"scale", {{"type", "log"}}}};
  const ordered_json colour = {
      {"field", "group"}, {"type", "nominal"}, {"title", "offered by"}, {"scale", group_scale(spec)}};
  ordered_json layers = ordered_json::array();
  if (axis.bound && *axis.bound > 0.0) {
    // The budget's region: below the bound (and left of max_bits when the budget has one).
    ordered_json region = {{"lo", std::min(smallest, *axis.bound) / 2.0}, {"hi", *axis.bound}};
    ordered_json enc = {{"y", {{"field", "lo"}, {"type", "quantitative"}}}, {"y2", {{"field", "hi"}}}};
    if (spec.budget.max_bits) {
      region["x0"] = 0.0;
      region["x1"] = *spec.budget.max_bits;
      enc["x"] = {{"field", "x0"}, {"type", "quantitative"}};
      enc["x2"] = {{"field", "x1"}};
    }
    layers.push_back({{"name", "budget_region"},
                      {"data", {{"values", ordered_json::array({region})}}},
                      {"mark", {{"type", "rect"}, {"color", kBudgetColour}, {"opacity", 0.1}}},
                      {"encoding", enc}});
    layers.push_back({{"name", "budget_bound"},
                      {"data", {{"values", ordered_json::array({{{"bound", *axis.bound}}})}}},
                      {"mark", {{"type", "rule"}, {"color", kBudgetColour}, {"strokeDash", {4, 4}}}},
                      {"encoding", {{"y", {{"field", "bound"}, {"type", "quantitative"}}}}}});
  }
  layers.push_back({{"name", "intervals"},
                    {"transform", ordered_json::array({{{"filter", "isValid(datum.err_lo) && datum.err_lo > 0"}}})},
                    {"mark", {{"type", "rule"}, {"opacity", 0.45}}},
                    {"encoding",
                     {{"x", x},
                      {"y", {{"field", "err_lo"}, {"type", "quantitative"}}},
                      {"y2", {{"field", "err_hi"}}},
                      {"color", colour}}}});
  layers.push_back({{"name", "frontier"},
                    {"transform", ordered_json::array({{{"filter", "datum.frontier"}}})},
                    {"mark", {{"type", "line"}, {"color", "#333333"}, {"strokeWidth", 1.5}}},
                    {"encoding", {{"x", x}, {"y", y}, {"order", {{"field", "bits"}}}}}});
  layers.push_back(
      {{"name", "points"},
       {"mark", {{"type", "point"}, {"filled", true}}},
       {"encoding",
        {{"x", x},
         {"y", y},
         {"color", colour},
         // Layer exemptions (derived from two evaluated pairs) small and faint: they are many.
         {"size", {{"field", "kind"}, {"type", "ordinal"}, {"title", "kind"},
                   {"scale", {{"domain", {"evaluated", "layer exemption"}}, {"range", {50, 14}}}}}},
         {"opacity", {{"field", "kind"}, {"type", "ordinal"}, {"legend", nullptr},
                      {"scale", {{"domain", {"evaluated", "layer exemption"}}, {"range", {0.9, 0.35}}}}}},
         {"shape",
          {{"field", "status"},
           {"type", "nominal"},
           {"title", "against the budget"},
           {"scale",
            {{"domain", {"feasible", "undecided", "infeasible"}}, {"range", {"circle", "diamond", "cross"}}}}}},
         {"tooltip", tooltip_fields({{"pair", "pair"},
                                     {"bits", "bits/element"},
                                     {"k_bits", "K bits"},
                                     {"v_bits", "V bits"},
                                     {"err", axis.label.c_str()},
                                     {"err_lo", "interval low"},
                                     {"err_hi", "interval high"},
                                     {"attn_kl_p95", "attn_kl p95"},
                                     {"needle_hit", "needle_hit"},
                                     {"status", "status"},
                                     {"runtimes", "offered by"},
                                     {"kind", "kind"}})}}}});
  // The best point ringed, and each runtime's recommendation labelled in its colour.
  ordered_json marked = ordered_json::array();
  for (const Pick& p : picks(spec, analysis)) {
    const SweepRecord& r = records[p.record];
    const double err = error_of(r).first;
    if (!(err > 0.0)) continue;
    const std::vector<size_t> by = offered_by(spec, r);
    marked.push_back({{"bits", r.bits()},
                      {"err", err},
                      {"label", p.label},
                      {"group", group_of(spec, by)},
                      {"pair", pair_text(r)},
                      {"first", marked.empty()}});
  }
  layers.push_back({{"name", "picks"},
                    {"data", {{"values", marked}}},
                    {"mark", {{"type", "point"}, {"shape", "circle"}, {"size", 260}, {"strokeWidth", 2},
                              {"color", "#111111"}, {"filled", false}}},
                    {"encoding", {{"x", x}, {"y", y}, {"tooltip", tooltip_fields({{"label", "chosen by"}, {"pair", "pair"}})}}}});
  // The best's label above its point, the runtimes' below: the best and a runtime's pick are
  // often neighbours, and their labels would overprint.
  // (A layer without data would leave its scales an empty extent: each is drawn only with labels.)
  for (const bool above : {true, false}) {
    ordered_json labels = ordered_json::array();
    for (const ordered_json& m : marked) {
      if (m.at("first").get<bool>() == above) labels.push_back(m);
    }
    if (labels.empty()) continue;
    layers.push_back({{"name", above ? "best_label" : "pick_labels"},
                      {"data", {{"values", labels}}},
                      {"mark", {{"type", "text"}, {"align", "left"}, {"dx", 10}, {"dy", above ? -10 : 14},
                                {"fontWeight", "bold"}}},
                      {"encoding", {{"x", x}, {"y", y}, {"text", {{"field", "label"}}}, {"color", colour}}}});
  }
  ordered_json chart =
      base_spec("kvtune sweep " + spec.name + ": every evaluated pair, bits per element against " + axis.label);
  chart["width"] = 720;
  chart["height"] = 380;
  chart["data"] = {{"values", points}};
  chart["layer"] = layers;
  return {"pareto", "Pareto frontier: bits against " + axis.label,
          "Every pair that ran, coloured by the runtime that offers it (grey: search only); the line joins the "
          "Pareto frontier, the shaded band is the budget, ringed points are the best and each runtime's "
          "recommendation, bars are " + std::to_string(int(std::lround(100 * spec.budget.interval_level()))) +
              " % intervals. A pair without error (f32) has no place on the log axis; the table lists it. Hover a "
              "point for its specs and metrics.",
          chart.dump()};
}

std::optional<ChartSpec> needle_chart(const SweepSpec& spec, const std::vector<SweepRecord>& records,
                                      const SweepAnalysis& analysis) {
  ordered_json rows = ordered_json::array();
  const int64_t tokens = spec.scenario.contexts.empty() ? 0 : spec.scenario.contexts.front();
  for (const Pick& p : picks(spec, analysis)) {
    for (const DepthSummary& d : records[p.record].needle_depths) {
      const Summary& s = d.needle_hit;
      rows.push_back({{"pair", p.label},
                      {"specs", pair_text(records[p.record])},
                      {"depth", d.depth},
                      {"context", tokens},
                      {"needle_hit", s.mean},
                      {"needles", s.count},
                      {"lo", s.has_intervals() ? ordered_json(s.mean_ci.lo) : ordered_json(nullptr)},
                      {"hi", s.has_intervals() ? ordered_json(s.mean_ci.hi) : ordered_json(nullptr)}});
    }
  }
  if (rows.empty()) return std::nullopt;
  const ordered_json tooltip = tooltip_fields({{"specs", "pair"},
                                               {"depth", "depth (fraction of the context)"},
                                               {"context", "context (tokens)"},
                                               {"needle_hit", "needle_hit"},
                                               {"lo", "interval low"},
                                               {"hi", "interval high"},
                                               {"needles", "needles"}});
  const ordered_json x = {{"field", "context"}, {"type", "ordinal"}, {"title", "context (tokens)"}};
  const ordered_json y = {{"field", "depth"},
                          {"type", "ordinal"},
                          {"title", "needle depth"},
                          {"sort", "ascending"},
                          {"axis", {{"format", ".0%"}}}};
  ordered_json chart =
      base_spec("kvtune sweep " + spec.name + ": needle_hit by depth and context for the chosen pairs");
  chart["data"] = {{"values", rows}};
  chart["facet"] = {{"column", {{"field", "pair"}, {"type", "nominal"}, {"title", nullptr}}}};
  chart["spec"] = {{"width", 90},
                   {"height", {{"step", 26}}},
                   {"layer", ordered_json::array(
                                 {{{"name", "cells"},
                                   {"mark", {{"type", "rect"}}},
                                   {"encoding",
                                    {{"x", x},
                                     {"y", y},
                                     {"color",
                                      {{"field", "needle_hit"},
                                       {"type", "quantitative"},
                                       {"title", "needle_hit"},
                                       {"scale", {{"domain", {0, 1}}, {"scheme", "redyellowgreen"}}}}},
                                     {"tooltip", tooltip}}}},
                                  {{"name", "cell_text"},
                                   {"mark", {{"type", "text"}, {"fontSize", 11}}},
                                   {"encoding",
                                    {{"x", x},
                                     {"y", y},
                                     {"text", {{"field", "needle_hit"}, {"type", "quantitative"}, {"format", ".2f"}}},
                                     {"tooltip", tooltip}}}}})}};
  return ChartSpec{"needles", "Needles by depth and context",
                   "needle_hit of the planted needles at each depth, per chosen pair (the best and each runtime's "
                   "recommendation); hover a cell for its interval (Wilson) and needle count.",
                   chart.dump()};
}

// Damage per sampled layer (or KV head) for the chosen pairs: the metric the layer search uses.
template <class Part>
std::optional<ChartSpec> part_chart(const SweepSpec& spec, const std::vector<SweepRecord>& records,
                                    const SweepAnalysis& analysis, const char* name, const char* unit,
                                    const std::vector<Part> SweepRecord::*parts, int64_t Part::*index) {
  const Metric metric = exemption_metric(spec.budget);
  ordered_json rows = ordered_json::array();
  for (const Pick& p : picks(spec, analysis)) {
    for (const Part& part : records[p.record].*parts) {
      const Summary& s = part.metrics[static_cast<size_t>(metric)];
      if (s.count == 0) continue;
      rows.push_back({{"pair", p.label},
                      {"specs", pair_text(records[p.record])},
                      {unit, part.*index},
                      {"value", s.mean},
                      {"lo", s.has_intervals() ? ordered_json(s.mean_ci.lo) : ordered_json(nullptr)},
                      {"hi", s.has_intervals() ? ordered_json(s.mean_ci.hi) : ordered_json(nullptr)}});
    }
  }
  if (rows.empty()) return std::nullopt;
  const std::string metric_label = std::string(metric_name(metric)) + " (mean)";
  const ordered_json x = {
      {"field", unit}, {"type", "ordinal"}, {"title", std::string(unit) == "layer" ? "model layer" : "KV head"}};
  const ordered_json y = {{"field", "value"}, {"type", "quantitative"}, {"title", metric_label}};
  const ordered_json colour = {{"field", "pair"}, {"type", "nominal"}, {"title", "pair"}};
  ordered_json chart = base_spec("kvtune sweep " + spec.name + ": " + metric_label + " per " + unit);
  chart["width"] = 560;
  chart["height"] = 260;
  chart["data"] = {{"values", rows}};
  chart["layer"] = ordered_json::array({{{"name", std::string(name) + "_intervals"},
                                         {"transform", ordered_json::array({{{"filter", "isValid(datum.lo)"}}})},
                                         {"mark", {{"type", "rule"}, {"opacity", 0.6}}},
                                         {"encoding",
                                          {{"x", x},
                                           {"y", {{"field", "lo"}, {"type", "quantitative"}}},
                                           {"y2", {{"field", "hi"}}},
                                           {"color", colour},
                                           {"xOffset", {{"field", "pair"}}}}}},
                                        {{"name", std::string(name) + "_points"},
                                         {"mark", {{"type", "point"}, {"filled", true}, {"size", 60}}},
                                         {"encoding",
                                          {{"x", x},
                                           {"y", y},
                                           {"color", colour},
                                           {"xOffset", {{"field", "pair"}}},
                                           {"tooltip", tooltip_fields({{"specs", "pair"},
                                                                       {unit, unit},
                                                                       {"value", metric_label.c_str()},
                                                                       {"lo", "interval low"},
                                                                       {"hi", "interval high"}})}}}}});
  const std::string part_name = std::string(unit) == "layer" ? "layer" : "KV head";
  return ChartSpec{name, "Damage per " + part_name,
                   metric_label + " of each sampled " + part_name +
                       " for the chosen pairs, with its interval: where the damage concentrates.",
                   chart.dump()};
}

// The lowest error at each (K bits, V bits): the same bits spent on K or on V side by side. Bits
// are binned to 0.01 (a per-tensor scale adds 0.0001 to fp8's 8) so that near-equal widths share a
// cell; a pair without error (f32) has no colour on the log scale and is left out.
double bit_bin(double bits) { return std::round(bits * 100.0) / 100.0; }

ChartSpec split_chart(const SweepSpec& spec, const std::vector<SweepRecord>& records) {
  const ErrorAxis axis = error_axis(spec.budget);
  std::map<std::pair<double, double>, size_t> best;
  for (size_t i = 0; i < records.size(); ++i) {
    const SweepRecord& r = records[i];
    if (!r.ok || r.derived()) continue;
    const double err = axis.term.value(r.metric(axis.term.metric));
    if (!(err > 0.0) || !std::isfinite(err)) continue;
    const auto [it, fresh] = best.emplace(std::make_pair(bit_bin(r.k_bits), bit_bin(r.v_bits)), i);
    if (!fresh && err < axis.term.value(records[it->second].metric(axis.term.metric))) it->second = i;
  }
  ordered_json rows = ordered_json::array();
  for (const auto& [bits, i] : best) {
    const SweepRecord& r = records[i];
    rows.push_back({{"k_bits", bits.first},
                    {"v_bits", bits.second},
                    {"err", axis.term.value(r.metric(axis.term.metric))},
                    {"pair", pair_text(r)}});
  }
  const ordered_json tooltip = tooltip_fields(
      {{"k_bits", "K bits"}, {"v_bits", "V bits"}, {"err", axis.label.c_str()}, {"pair", "lowest-error pair"}});
  const ordered_json x = {{"field", "v_bits"}, {"type", "ordinal"}, {"title", "V bits per element"}};
  const ordered_json y = {
      {"field", "k_bits"}, {"type", "ordinal"}, {"title", "K bits per element"}, {"sort", "descending"}};
  ordered_json chart = base_spec("kvtune sweep " + spec.name + ": lowest " + axis.label + " at each K and V bit width");
  chart["data"] = {{"values", rows}};
  chart["width"] = {{"step", 46}};
  chart["height"] = {{"step", 30}};
  chart["layer"] = ordered_json::array({{{"name", "split_cells"},
                                         {"mark", {{"type", "rect"}}},
                                         {"encoding",
                                          {{"x", x},
                                           {"y", y},
                                           {"color",
                                            {{"field", "err"},
                                             {"type", "quantitative"},
                                             {"title", axis.label},
                                             {"scale", {{"type", "log"}, {"scheme", "viridis"}, {"reverse", true}}}}},
                                           {"tooltip", tooltip}}}},
                                        {{"name", "split_text"},
                                         {"mark", {{"type", "text"}, {"fontSize", 10}, {"color", "white"}}},
                                         {"encoding",
                                          {{"x", x},
                                           {"y", y},
                                           {"text", {{"field", "err"}, {"type", "quantitative"}, {"format", ".2~g"}}},
                                           {"tooltip", tooltip}}}}});
  return {"kv_split", "K against V: where the bits go",
          "The lowest " + axis.label +
              " among the pairs at each K and V bit width: compare a cell with its mirror to see whether the same "
              "bits do more on K or on V.",
          chart.dump()};
}

// Memory per sequence against context for the chosen pairs, with the budget's share per sequence.
std::optional<ChartSpec> memory_chart(const SweepSpec& spec, const std::vector<SweepRecord>& records,
                                      const SweepAnalysis& analysis) {
  if (!spec.model) return std::nullopt;
  const int64_t evaluated = evaluated_context(spec), served = memory_context(spec);
  const int64_t last = std::max<int64_t>(2 * std::max(evaluated, served), 4096);
  std::vector<int64_t> contexts;
  for (int64_t c = 1024; c <= last; c *= 2) contexts.push_back(c);
  if (std::find(contexts.begin(), contexts.end(), served) == contexts.end()) contexts.push_back(served);
  std::sort(contexts.begin(), contexts.end());
  const std::optional<MemoryFit>& fit = spec.budget.fit;
  const int64_t gpus = fit ? fit->tensor_parallel : 1;
  ordered_json rows = ordered_json::array();
  for (const Pick& p : picks(spec, analysis)) {
    for (int64_t c : contexts) {
      const std::optional<MemoryEstimate> m = record_memory(spec, records[p.record], c);
      if (!m) break;
      // With tensor parallelism the budget is one GPU's: draw one GPU's share of the sequence.
      const double bytes = fit ? double(fit_per_gpu(spec.model->shape, *m, fit->gpu_mem, fit->weights, gpus).sequence_bytes)
                               : double(m->total_bytes);
      rows.push_back({{"pair", p.label}, {"specs", pair_text(records[p.record])}, {"context", c}, {"gib", bytes / kGiB}});
    }
  }
  if (rows.empty()) return std::nullopt;
  const std::string per = gpus > 1 ? " on one GPU of " + std::to_string(gpus) : "";
  const ordered_json x = {{"field", "context"},
                          {"type", "quantitative"},
                          {"title", "context (tokens)"},
                          {"scale", {{"type", "log"}, {"base", 2}}}};
  const ordered_json y = {
      {"field", "gib"}, {"type", "quantitative"}, {"title", "GiB per sequence" + per}, {"scale", {{"type", "log"}}}};
  ordered_json layers = ordered_json::array(
      {{{"name", "memory_lines"},
        {"mark", {{"type", "line"}, {"point", true}}},
        {"encoding",
         {{"x", x},
          {"y", y},
          {"color", {{"field", "pair"}, {"type", "nominal"}, {"title", "pair"}}},
          {"tooltip", tooltip_fields({{"specs", "pair"}, {"context", "context"}, {"gib", "GiB per sequence"}})}}}}});
  std::string about = "The KV cache of one sequence (every layer and KV head" + per + ") against context for the chosen pairs";
  if (fit) {
    const uint64_t weights = weights_per_gpu(fit->weights, gpus);
    const double free = fit->gpu_mem > weights ? double(fit->gpu_mem - weights) : 0.0;
    const double share = free / double(std::max<int64_t>(fit->sequences, 1)) / kGiB;
    layers.push_back({{"name", "memory_budget"},
                      {"data", {{"values", ordered_json::array({{{"gib", share}, {"label", "budget per sequence"}}})}}},
                      {"mark", {{"type", "rule"}, {"color", kBudgetColour}, {"strokeDash", {4, 4}}}},
                      {"encoding",
                       {{"y", {{"field", "gib"}, {"type", "quantitative"}}},
                        {"tooltip", tooltip_fields({{"label", "line"}, {"gib", "GiB"}})}}}});
    about += "; the dashed line is what the GPU leaves each of the " + std::to_string(fit->sequences) +
             " sequences wanted after the weights (a pair must stay below it at " + std::to_string(served) +
             " tokens)";
  }
  ordered_json chart = base_spec("kvtune sweep " + spec.name + ": memory per sequence against context");
  chart["width"] = 560;
  chart["height"] = 280;
  chart["data"] = {{"values", rows}};
  chart["layer"] = layers;
  return ChartSpec{"memory", "Memory per sequence", about + ".", chart.dump()};
}

}  // namespace

std::vector<ChartSpec> sweep_charts(const SweepSpec& spec, const std::vector<SweepRecord>& records,
                                    const SweepAnalysis& analysis) {
  std::vector<ChartSpec> out = {pareto_chart(spec, records, analysis)};
  if (std::optional<ChartSpec> c = needle_chart(spec, records, analysis)) out.push_back(std::move(*c));
  if (std::optional<ChartSpec> c =
          part_chart(spec, records, analysis, "layers", "layer", &SweepRecord::layers, &LayerSummary::layer)) {
    out.push_back(std::move(*c));
  }
  if (std::optional<ChartSpec> c =
          part_chart(spec, records, analysis, "heads", "kv_head", &SweepRecord::heads, &HeadSummary::kv_head)) {
    out.push_back(std::move(*c));
  }
  out.push_back(split_chart(spec, records));
  if (std::optional<ChartSpec> c = memory_chart(spec, records, analysis)) out.push_back(std::move(*c));
  return out;
}

}  // namespace kvtune
