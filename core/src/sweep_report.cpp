#include "kvtune/sweep_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "kvtune/csv.h"
#include "kvtune/file_io.h"
#include "kvtune/layer_exemption.h"
#include "figure_text.h"
#include "report_doc.h"
#include "summary_json.h"
#include "sweep_json.h"

namespace kvtune {
namespace {

using namespace detail;  // the document's types (report_doc.h)
using nlohmann::ordered_json;

std::string fmt(double v, const char* spec = "%.4g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, spec, v);
  return buf;
}

// "a op b" with the fewest significant digits (at least 3) that keep a and b apart, so a value
// just over its bound never reads "0.02 > 0.02".
std::string compare_text(const std::string& what, double value, const char* op, double bound) {
  const int digits = digits_apart({value}, {bound}, 3);
  return what + " " + significant(value, digits) + " " + op + " " + significant(bound, digits);
}

// "95 %" for a confidence level of 0.95.
std::string percent(double level) { return significant(100.0 * level, 4) + " %"; }

// A judged figure with its interval, "value [lo, hi]" (figure_text.h): more digits where fewer would
// print a figure equal to the budget's bound on it.
std::string judged_text(const SweepSpec& spec, const Summary& s, Metric m, Statistic st, int digits = 4,
                        int interval_digits = 4) {
  return figure_text(s, st, bounds_on(spec.budget, m, st), digits, interval_digits);
}

std::string plural(size_t n, const std::string& noun) { return std::to_string(n) + " " + noun + (n == 1 ? "" : "s"); }

std::string join_with(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

// Local, so the report does not depend on the spec parser's translation unit.
const char* objective_text(Objective o) { return o == Objective::min_bits ? "min_bits" : "min_error"; }

// Evaluated records and the layer exemptions derived from them, counted apart.
struct Counts {
  size_t evaluated = 0, ok = 0, failed = 0, feasible = 0, undecided = 0;
  size_t derived = 0, derived_feasible = 0, derived_undecided = 0;
};

Counts count(const std::vector<SweepRecord>& records, const SweepAnalysis& analysis) {
  Counts c;
  for (size_t i = 0; i < records.size(); ++i) {
    const bool feasible = analysis.verdicts[i].feasible, undecided = analysis.verdicts[i].undecided;
    if (records[i].derived()) {
      ++c.derived;
      if (feasible) ++c.derived_feasible;
      if (undecided) ++c.derived_undecided;
      continue;
    }
    ++c.evaluated;
    (records[i].ok ? c.ok : c.failed) += 1;
    if (feasible) ++c.feasible;
    if (undecided) ++c.undecided;
  }
  return c;
}

// "attn_kl p95", "rel_out_err": a budget term's quantity as the reports name it.
std::string term_quantity(const BudgetTerm& t) {
  return std::string(metric_name(t.metric)) + (t.statistic == Statistic::p95 ? " p95" : "");
}

std::vector<std::string> budget_terms(const SweepSpec& spec) {
  const SweepBudget& b = spec.budget;
  std::vector<std::string> terms;
  for (const BudgetTerm& t : b.terms) {
    terms.push_back(term_quantity(t) + (t.kind == BoundKind::at_most ? " <= " : " >= ") + fmt(t.bound));
  }
  if (b.confidence && !b.terms.empty()) {
    terms.back() += " (each judged on its " + percent(*b.confidence) + " confidence interval)";
    // Measured by Confidence.TheP95BootstrapCoversLessThanItsLevelOverFewCases (confidence_test.cpp).
    auto p95_term = [](const BudgetTerm& t) { return t.statistic == Statistic::p95; };
    if (std::any_of(b.terms.begin(), b.terms.end(), p95_term)) {
      terms.back() += "; a p95's interval (a percentile bootstrap) covers less than its level when the cases "
                      "differ (0.50 of 95 % over 6 cases in a test), so a p95 bound is less sure than that";
    }
  }
  if (b.max_bits) terms.push_back("bits <= " + fmt(*b.max_bits));
  if (b.fit) {
    const MemoryFit& f = *b.fit;
    std::string text = plural(size_t(f.sequences), "sequence") + " of " + std::to_string(memory_context(spec)) +
                       " tokens in ";
    if (f.tensor_parallel > 1) {
      text += "each of " + std::to_string(f.tensor_parallel) + " GPUs of " + format_bytes(double(f.gpu_mem), 2) +
              " (tensor parallel) with " + format_bytes(double(f.weights), 2) + " of weights, " +
              format_bytes(double(weights_per_gpu(f.weights, f.tensor_parallel)), 2) + " per GPU";
    } else {
      text += format_bytes(double(f.gpu_mem), 2) + " with " + format_bytes(double(f.weights), 2) + " of weights";
    }
    terms.push_back(text);
  }
  return terms;
}

// Where the served context is not the simulated one, or is longer than the model's: what memory is
// counted at, and the warning. Empty otherwise.
std::string serving_text(const SweepSpec& spec) {
  const int64_t served = memory_context(spec), evaluated = evaluated_context(spec);
  const bool beyond = served_beyond_model_context(spec);
  if (served == evaluated && !beyond) return {};
  std::string text = "serving: " + std::to_string(served) + " tokens per sequence";
  if (served != evaluated) text += " (memory is counted there; simulated at " + std::to_string(evaluated) + ")";
  // A runtime's [[context]] setting needs the sequence count, which only a memory fit gives.
  if (!spec.budget.fit && !spec.runtimes.empty()) {
    text += "; the runtimes' settings for it are printed with a memory budget, which says how many sequences they hold";
  }
  if (beyond) {
    text += "; beyond " + spec.model->title + "'s context of " + std::to_string(spec.model->max_context) +
            " tokens: runtimes refuse or cap longer sequences unless its rope scaling is set up for them";
  }
  return text;
}

Line pair_line(const std::string& lead, const SweepRecord& r) {
  Line line = {{lead + "K "}, code(r.k), {", V "}, code(r.v)};
  if (r.derived()) {
    for (Span s : {Span{", layers "}, code(exempt_layers_text(r)), Span{" kept at "}, code(r.exempt)}) {
      line.push_back(std::move(s));
    }
  }
  return line;
}

// The damage-per-layer table, and which kinds of exempt layer its rows mark (each gets a footnote).
struct LayerTable {
  Table table;
  bool counted = false, sliding = false;
};

// The damage of each sampled layer (the exemption metric's mean) for the best configuration and
// the runtimes' picks; a derived record's exempt layers are marked with '*'.
std::optional<LayerTable> layer_table(const SweepSpec& spec, const std::vector<SweepRecord>& records,
                                      const SweepAnalysis& analysis) {
  std::vector<std::pair<std::string, size_t>> rows;
  auto want = [&](const std::string& who, std::optional<size_t> i) {
    if (i && !records[*i].layers.empty()) rows.emplace_back(who, *i);
  };
  want("best", analysis.best ? analysis.best : analysis.closest);
  for (const RuntimeChoice& c : analysis.runtimes) want(c.title, c.record ? c.record : c.closest);
  if (rows.empty()) return std::nullopt;
  const size_t m = static_cast<size_t>(exemption_metric(spec.budget));
  LayerTable out;
  Table& t = out.table;
  t.header = {"for", "k", "v"};
  for (const LayerSummary& l : records[rows.front().second].layers) t.header.push_back("layer " + std::to_string(l.layer));
  t.text_columns = 3;
  for (const auto& [who, i] : rows) {
    const SweepRecord& r = records[i];
    std::vector<std::string> row = {who, r.k, r.v};
    for (const LayerSummary& l : r.layers) {
      const bool exempt = std::find(r.exempt_layers.begin(), r.exempt_layers.end(), l.layer) != r.exempt_layers.end();
      (r.exempt_pattern.empty() ? out.counted : out.sliding) |= exempt;
      const Summary& layer_metric = l.metrics[m];
      // One layer's figure is not judged against the budget: no bound to print it apart from.
      row.push_back(layer_metric.count ? figure_text(layer_metric, Statistic::mean, {}, 4, 3) + (exempt ? "*" : "")
                                       : "-");
    }
    row.resize(t.header.size(), "-");
    t.rows.push_back(std::move(row));
  }
  return out;
}

// The budget's terms on metrics the fixed figures leave out (rel_out_err mean and p95, attn_kl p95,
// top1_agree and needle_hit means): what a point is judged on is shown with it.
std::vector<BudgetTerm> terms_beyond_the_fixed_figures(const SweepSpec& spec) {
  auto fixed = [](const BudgetTerm& t) {
    const bool mean = t.statistic == Statistic::mean;
    switch (t.metric) {
      case Metric::rel_out_err: return true;
      case Metric::attn_kl: return !mean;
      case Metric::top1_agree:
      case Metric::needle_hit: return mean;
      default: return false;
    }
  };
  std::vector<BudgetTerm> out;
  for (const BudgetTerm& t : spec.budget.terms) {
    const bool seen = std::any_of(out.begin(), out.end(), [&](const BudgetTerm& o) {
      return o.metric == t.metric && o.statistic == t.statistic;
    });
    if (!fixed(t) && !seen) out.push_back(t);
  }
  return out;
}

// "shift_logit_err" or "attn_kl_p95": a term's figure, as the CSV columns name it.
std::string term_figure(const BudgetTerm& t) {
  return std::string(metric_name(t.metric)) + (t.statistic == Statistic::p95 ? "_p95" : "");
}

// A point's figures, each mean and p95 followed by its confidence interval when the record has one,
// then the budget's other terms.
Line metrics_line(const SweepSpec& spec, const SweepRecord& r) {
  const Summary &err = r.metric(Metric::rel_out_err), &kl = r.metric(Metric::attn_kl),
                &top1 = r.metric(Metric::top1_agree), &needle = r.metric(Metric::needle_hit);
  using enum Statistic;
  std::string text = "bits " + fmt(r.bits()) + " (K " + fmt(r.k_bits) + ", V " + fmt(r.v_bits) + "); rel_out_err " +
                     judged_text(spec, err, Metric::rel_out_err, mean) + " (p95 " +
                     judged_text(spec, err, Metric::rel_out_err, p95) + "); attn_kl p95 " +
                     judged_text(spec, kl, Metric::attn_kl, p95) + "; top1_agree " +
                     judged_text(spec, top1, Metric::top1_agree, mean);
  if (needle.count > 0) {
    text += "; needle_hit " + judged_text(spec, needle, Metric::needle_hit, mean) + " of " +
            std::to_string(needle.count) + " needles";
  }
  for (const BudgetTerm& t : terms_beyond_the_fixed_figures(spec)) {
    const Summary& m = r.metric(t.metric);
    if (m.count == 0) continue;
    text += "; " + std::string(metric_name(t.metric)) + (t.statistic == p95 ? " p95 " : " ") +
            judged_text(spec, m, t.metric, t.statistic);
  }
  if (r.backend != "cpu") text += "; computed by " + r.backend;
  return {{"metrics: " + text}};
}

std::optional<Line> memory_line(const SweepSpec& spec, const RecordVerdict& v) {
  if (!v.memory) return std::nullopt;
  std::string text = "memory: " + format_bytes(double(v.memory->total_bytes), 2) + " per sequence of " +
                     std::to_string(memory_context(spec)) + " tokens (" + format_bytes(v.memory->bytes_per_token, 1) +
                     "/token)";
  if (spec.budget.fit && spec.budget.fit->tensor_parallel > 1 && v.bytes_per_sequence_per_gpu) {
    text += "; " + format_bytes(double(*v.bytes_per_sequence_per_gpu), 2) + " per GPU of " +
            std::to_string(spec.budget.fit->tensor_parallel);
  }
  if (v.sequences) text += "; " + plural(size_t(*v.sequences), "sequence") + " fit";
  return Line{{text}};
}

void add(Doc& doc, Block::Kind kind, Line line) { doc.push_back({kind, std::move(line), {}, {}}); }
void add(Doc& doc, Block::Kind kind, const std::string& text) { add(doc, kind, Line{{text}}); }

void describe_point(Doc& doc, const SweepSpec& spec, const std::vector<SweepRecord>& records,
                    const SweepAnalysis& analysis, size_t i) {
  add(doc, Block::text, metrics_line(spec, records[i]));
  if (auto m = memory_line(spec, analysis.verdicts[i])) add(doc, Block::text, *m);
}

void add_violations(Doc& doc, const RecordVerdict& v) {
  add(doc, Block::text, "violations:");
  for (const std::string& s : violation_texts(v)) add(doc, Block::item, s);
}

// How far a closest point misses, in the measure closeness is judged by.
void add_excess(Doc& doc, const RecordVerdict& v) {
  if (std::isfinite(v.excess)) {
    add(doc, Block::text, "misses the budget by " + fmt(100.0 * v.excess) + "% (" + kViolationExcessMeasure + ")");
  }
}

Table frontier_table(const SweepSpec& spec, const std::vector<SweepRecord>& records, const SweepAnalysis& analysis) {
  Table t;
  const bool exemptions = spec.exemption.any();
  t.header = {"k", "v"};
  if (exemptions) t.header.push_back("exempt layers");
  for (const char* h : {"k_bits", "v_bits", "bits", "rel_out_err", "attn_kl_p95", "needle_hit"}) t.header.push_back(h);
  if (spec.model) t.header.push_back("memory/seq @" + std::to_string(memory_context(spec)));
  t.header.push_back("feasible");
  t.text_columns = exemptions ? 3 : 2;
  for (size_t i : analysis.frontier) {
    const SweepRecord& r = records[i];
    const RecordVerdict& v = analysis.verdicts[i];
    const Summary& needle = r.metric(Metric::needle_hit);
    std::vector<std::string> row = {r.k, r.v};
    if (exemptions) row.push_back(r.derived() ? exempt_layers_text(r) + " at " + r.exempt : "-");
    const Summary &err = r.metric(Metric::rel_out_err), &kl = r.metric(Metric::attn_kl);
    row.insert(row.end(), {fmt(r.k_bits), fmt(r.v_bits), fmt(r.bits()),
                           judged_text(spec, err, Metric::rel_out_err, Statistic::mean, 4, 3),
                           judged_text(spec, kl, Metric::attn_kl, Statistic::p95, 4, 3),
                           needle.count ? judged_text(spec, needle, Metric::needle_hit, Statistic::mean, 4, 3) : "-"});
    if (spec.model) row.push_back(v.memory ? format_bytes(double(v.memory->total_bytes), 2) : "-");
    row.push_back(v.feasible ? (analysis.best == i ? "yes (best)" : "yes") : v.undecided ? "undecided" : "no");
    t.rows.push_back(std::move(row));
  }
  return t;
}

void add_settings(Doc& doc, const RuntimeSettings& s) {
  if (!s.cli.empty()) {
    add(doc, Block::text, "flags:");
    doc.push_back({Block::code, {}, join_with(s.cli, " "), {}});
  }
  if (!s.env.empty()) {
    add(doc, Block::text, "environment:");
    doc.push_back({Block::code, {}, join_with(s.env, "\n"), {}});
  }
  if (!s.python.empty()) {
    add(doc, Block::text, "python:");
    doc.push_back({Block::code, {}, s.python, {}});
  }
  if (!s.build.empty()) {
    add(doc, Block::text, "build requirements:");
    for (const std::string& b : s.build) add(doc, Block::item, Line{code(b)});
  }
  if (s.needs_flash_attention) add(doc, Block::text, "needs flash attention enabled");
  if (!s.unsupported.empty()) {
    add(doc, Block::text, "cannot run on:");
    for (const std::string& u : s.unsupported) add(doc, Block::item, u);
  }
}

// One option of a runtime with the point that evaluated it: "<lead>: <name> (K .., V ..)", its
// settings to paste, the point's figures and the option's caveats.
void add_option(Doc& doc, const SweepSpec& spec, const std::vector<SweepRecord>& records,
                const SweepAnalysis& analysis, const std::string& lead, const RuntimeOption& o, size_t record) {
  Line head = {{lead + ": " + o.name + " ("}};
  for (const Span& s : pair_line("", records[record])) head.push_back(s);
  head.push_back({")"});
  add(doc, Block::text, head);
  if (!o.settings.verified) add(doc, Block::text, "(emulation not verified against the runtime's sources)");
  add_settings(doc, o.settings);
  describe_point(doc, spec, records, analysis, record);
  if (!o.settings.caveats.empty()) {
    add(doc, Block::text, "caveats:");
    for (const std::string& cv : o.settings.caveats) add(doc, Block::item, cv);
  }
}

// A recommendation that needs something (a calibrated checkpoint): what it needs, and the best
// option for a user without it, with its own settings and metrics.
void add_fallback(Doc& doc, const SweepSpec& spec, const std::vector<SweepRecord>& records,
                  const SweepAnalysis& analysis, const RuntimeChoice& c) {
  add(doc, Block::text, "it needs: " + join_with(c.option->settings.needs, "; "));
  if (!c.fallback || !c.fallback_option) {
    add(doc, Block::text, "without that, no option of this version meets the budget");
    return;
  }
  add_option(doc, spec, records, analysis, "without that", *c.fallback_option, *c.fallback);
}

// The shown option's cache as the runtime allocates it, where that differs from kvtune's count.
void add_allocation(Doc& doc, const SweepSpec& spec, const RuntimeChoice& c) {
  if (!c.allocation || !spec.model) return;
  const RuntimeChoice::Allocation& a = *c.allocation;
  std::string text = "as " + c.title + " allocates it: " + format_bytes(double(a.bytes_per_sequence), 2) +
                     " per sequence (" + std::to_string(a.cells.slot) + " cells on each full layer";
  if (a.cells.sliding_full) {
    text += " and on each sliding layer, which it sizes as a full one";
  } else if (a.cells.sliding == a.cells.slot) {
    text += " and on each sliding layer, whose window and " + std::to_string(a.cells.sliding_extra) +
            " more cells reach the slot";
  } else if (a.cells.sliding > 0) {
    text += ", " + std::to_string(a.cells.sliding) + " on each sliding layer: its " +
            std::to_string(spec.model->shape.sliding_window) + "-token window and " +
            std::to_string(a.cells.sliding_extra) + " more, rounded up";
  }
  text += padded_layers_text(spec.model->shape, a.cells) + "; the context caveat says why)";
  if (a.sequences && spec.budget.fit) {
    text += "; " + plural(size_t(*a.sequences), "sequence") + " fit";
    if (*a.sequences < uint64_t(spec.budget.fit->sequences)) {
      text += ", fewer than the " + std::to_string(spec.budget.fit->sequences) + " the budget asks";
    }
  }
  add(doc, Block::text, text);
}

// How many sequences the shown option fits under the runtime's own default share for its cache.
void add_cache_share(Doc& doc, const SweepSpec& spec, const RuntimeChoice& c) {
  if (!c.cache_share || !c.sequences_in_share || !spec.budget.fit) return;
  // The fit's memory may already be what the user gives the runtime, so the reading is said.
  std::string text = "if " + format_bytes(double(spec.budget.fit->gpu_mem), 2) + " is the whole GPU, " + c.title +
                     "'s default cache share (" + fmt(c.cache_share->share) + " of " +
                     (c.cache_share->of_free ? "what the weights leave" : "it, weights included") +
                     "; activations not counted) holds at most " + plural(size_t(*c.sequences_in_share), "sequence");
  if (*c.sequences_in_share < uint64_t(spec.budget.fit->sequences)) {
    text += ", fewer than the " + std::to_string(spec.budget.fit->sequences) +
            " the budget asks: raise the share (the caveats name its setting)";
  }
  add(doc, Block::text, text);
}

// What would decide an undecided point: more samples, unless a rate's bound lies beyond what even a
// perfect score over its samples can certify (Wilson's interval of n of n starts at n / (n + z^2)).
std::string undecided_text(const SweepSpec& spec, const SweepRecord& r) {
  const double level = spec.budget.interval_level();
  for (const BudgetTerm& t : spec.budget.terms) {
    const size_t n = r.metric(t.metric).count;
    if (!metric_info(t.metric).rate || t.kind != BoundKind::at_least || n == 0) continue;
    const double best = wilson_interval(double(n), double(n), level).lo;
    if (best >= t.bound) continue;
    const double z = normal_quantile((1.0 + level) / 2.0);
    return t.key() + " = " + significant(t.bound, 4) + " cannot be certified with " + std::to_string(n) +
           " samples at " + percent(level) + " confidence: a perfect score's interval starts at " +
           significant(best, 4) + "; it takes " +
           (t.bound < 1.0 ? "at least " + std::to_string(int64_t(std::ceil(t.bound * z * z / (1.0 - t.bound)))) +
                                " samples (more cases or queries), a lower bound"
                          : "a bound below 1") +
           " or a lower budget.confidence";
  }
  return "more cases or queries would decide it";
}

void add_runtime(Doc& doc, const SweepSpec& spec, const std::vector<SweepRecord>& records,
                 const SweepAnalysis& analysis, size_t index) {
  const RuntimeChoice& c = analysis.runtimes[index];
  const RuntimeView* view = index < spec.runtime_views.size() ? &spec.runtime_views[index] : nullptr;
  add(doc, Block::heading3, c.title + " " + c.version);
  if (view != nullptr && view->beyond_checked) {
    add(doc, Block::text, "this version is newer than the table was checked against: its options may be stale");
  }
  if (c.gpus_unset) {
    add(doc, Block::text, "the memory fit spreads the cache over " + std::to_string(c.gpus) +
                              " GPUs, but this table has no [[tensor_parallel]] entry: no setting for them is "
                              "printed, and how " + c.title + " spreads its cache was not checked");
  }
  if (c.context_unset) {
    add(doc, Block::text, "the memory fit holds " + plural(size_t(c.sequences), "sequence") + " of " +
                              std::to_string(c.context) + " tokens, but this table has no [[context]] entry: no "
                              "setting for them is printed, and how " + c.title + " sizes its cache was not checked");
  }
  if (!c.gpus_refused.empty() && spec.model) {
    std::vector<std::string> why;
    for (const std::string& d : c.gpus_refused) {
      why.push_back(d == "q_heads" ? std::to_string(c.gpus) + " does not divide its " +
                                         std::to_string(spec.model->q_heads) + " attention heads"
                                   : "its " + std::to_string(spec.model->shape.kv_heads) + " KV heads and " +
                                         std::to_string(c.gpus) + " do not divide one into the other");
    }
    add(doc, Block::text, c.title + " cannot start " + spec.model->title + " on " + std::to_string(c.gpus) +
                              " GPUs: " + join_with(why, "; ") + " (choose another GPU count)");
  }
  if (c.record && c.option) {
    const RuntimeOption& o = *c.option;
    add_option(doc, spec, records, analysis, "recommended", o, *c.record);
    add_allocation(doc, spec, c);
    add_cache_share(doc, spec, c);
    if (!o.origins.empty()) add(doc, Block::text, "from: " + join_with(o.origins, ", "));
    if (!o.settings.needs.empty()) add_fallback(doc, spec, records, analysis, c);
    const std::string gap = gap_text(records, analysis, c);
    add(doc, Block::text, gap.empty() ? "this is the best configuration overall" : "gap: " + gap);
  } else {
    add(doc, Block::text, c.closest && analysis.verdicts[*c.closest].undecided
                              ? "no option of this version is feasible for sure: its closest is undecided (" +
                                    undecided_text(spec, records[*c.closest]) + ")"
                              : "cannot meet the budget: no option of this version is feasible");
    if (c.closest && c.closest_option) {
      Line head = {{"closest option (not a recommendation): " + c.closest_option->name + " ("}};
      for (const Span& s : pair_line("", records[*c.closest])) head.push_back(s);
      head.push_back({")"});
      add(doc, Block::text, head);
      if (records[*c.closest].ok) describe_point(doc, spec, records, analysis, *c.closest);
      add_allocation(doc, spec, c);
      add_cache_share(doc, spec, c);
      add_violations(doc, analysis.verdicts[*c.closest]);
      add_excess(doc, analysis.verdicts[*c.closest]);
    }
    if (const std::string gap = gap_text(records, analysis, c); !gap.empty()) add(doc, Block::text, "gap: " + gap);
  }
  if (view != nullptr && !view->not_emulated.empty()) {
    add(doc, Block::text, "settings kvtune cannot judge (no scheme emulates them):");
    for (const RuntimeNotEmulated& n : view->not_emulated) add(doc, Block::item, n.setting + ": " + n.reason);
  }
}

// How the intervals in brackets were found, and from how many samples.
std::string intervals_text(const SweepSpec& spec) {
  const size_t cases = scenario_cases(spec.scenario).size();
  const double level = spec.budget.interval_level();
  return "intervals: [low, high] at " + percent(level) + " confidence, two-sided (a bound is judged on its far end); " +
         (cases < 2 ? std::string("one case, so over single samples: Wilson score for rates (top1_agree, needle_hit), "
                                  "Student's t for other means")
                    : "over the " + plural(cases, "case") +
                          " (a layer's or head's over its own): Wilson score with the cases' design effect for rates "
                          "(top1_agree, needle_hit), Student's t over the cases' means for other means") +
         ", percentile bootstrap (" + std::to_string(bootstrap_resamples(level)) + " resamples) for p95" +
         (spec.exemption.any() ? "; a layer exemption's means over its mixed cases, its p95 the worse of its parts' "
                                 "(a bound)"
                               : "");
}

// The products' arithmetic, said only when it is not the float64 reference.
std::string precision_text(const SweepSpec& spec) {
  if (spec.scenario.precision == Precision::float64) return "";
  return "products: float32 (every metric within its stated bound of the float64 reference; [metrics] precision)";
}

Doc build_document(const SweepSpec& spec, const std::vector<SweepRecord>& records, const SweepAnalysis& analysis) {
  Doc doc;
  const Counts n = count(records, analysis);
  add(doc, Block::heading1, "sweep " + spec.name);
  add(doc, Block::text, "spec: " + spec.source + " (hash " + hash_hex(spec.hash) + ")");
  add(doc, Block::text,
      "workload: model " + (spec.model ? spec.model->name : std::string("none")) + " (statistics: " +
          (spec.scenario.capture ? "a real cache, " + spec.scenario.capture->dir
           : spec.scenario.profile.empty() ? std::string("generic, the same for every model")
                                           : "profile " + spec.scenario.profile) +
          "), " +
          std::to_string(evaluated_context(spec)) + " tokens, " + plural(scenario_cases(spec.scenario).size(), "case") +
          "; " + std::to_string(n.evaluated) + " of " + std::to_string(spec.points.size()) + " points evaluated, " +
          std::to_string(n.failed) + " failed, " + std::to_string(n.feasible) + " feasible" +
          (spec.budget.confidence ? ", " + std::to_string(n.undecided) + " undecided" : std::string()) +
          (n.derived == 0 ? std::string()
                          : "; " + plural(n.derived, "layer exemption") + " derived, " +
                                std::to_string(n.derived_feasible) + " feasible" +
                                (spec.budget.confidence ? ", " + std::to_string(n.derived_undecided) + " undecided"
                                                        : std::string())));
  if (const std::string s = serving_text(spec); !s.empty()) add(doc, Block::text, s);
  add(doc, Block::text, intervals_text(spec));
  if (const std::string p = precision_text(spec); !p.empty()) add(doc, Block::text, p);
  const std::vector<std::string> terms = budget_terms(spec);
  add(doc, Block::text,
      "budget: " + (terms.empty() ? std::string("none") : join_with(terms, ", ")) + "; objective " +
          objective_text(spec.budget.objective));

  add(doc, Block::heading2, "Pareto frontier (bits/element vs rel_out_err)");
  if (analysis.frontier.empty()) {
    add(doc, Block::text, "no point ran successfully");
  } else {
    doc.push_back({Block::table, {}, {}, frontier_table(spec, records, analysis)});
  }

  add(doc, Block::heading2, "Best feasible configuration");
  if (analysis.best) {
    add(doc, Block::text, pair_line("", records[*analysis.best]));
    describe_point(doc, spec, records, analysis, *analysis.best);
    add(doc, Block::text, "origin: " + records[*analysis.best].origin);
  } else {
    add(doc, Block::text, "nothing meets the budget");
    if (analysis.closest) {
      add(doc, Block::text, pair_line("closest (smallest violation, not a recommendation): ", records[*analysis.closest]));
      describe_point(doc, spec, records, analysis, *analysis.closest);
      add_violations(doc, analysis.verdicts[*analysis.closest]);
      add_excess(doc, analysis.verdicts[*analysis.closest]);
    }
  }

  if (std::optional<LayerTable> layers = layer_table(spec, records, analysis)) {
    add(doc, Block::heading2, "Damage per layer (" + std::string(metric_name(exemption_metric(spec.budget))) + " mean)");
    doc.push_back({Block::table, {}, {}, std::move(layers->table)});
    if (layers->counted) {
      add(doc, Block::text,
          "* an exempt layer (kept at " + spec.exemption.spec + " for one model layer of the " +
              fmt(double(model_layer_count(spec)) / double(spec.scenario.layers.size())) +
              " it stands for; derived p95 values are bounds)");
    }
    if (layers->sliding) {
      add(doc, Block::text,
          "* with sliding_window: a sampled sliding-window layer, kept at " + spec.exemption.spec +
              " with every sliding layer of the model");
    }
  }

  if (!analysis.runtimes.empty()) {
    add(doc, Block::heading2, "Runtimes");
    for (size_t i = 0; i < analysis.runtimes.size(); ++i) add_runtime(doc, spec, records, analysis, i);
  }
  if (!spec.notes.empty()) {
    add(doc, Block::heading2, "Notes");
    for (const std::string& note : note_texts(spec.notes)) add(doc, Block::item, note);
  }
  return doc;
}

// --- console ---

std::string plain(const Line& line) {
  std::string out;
  for (const Span& s : line) out += s.text;
  return out;
}

void print_table(std::ostream& out, const Table& t, const std::string& indent) {
  std::vector<size_t> width(t.header.size());
  for (size_t c = 0; c < t.header.size(); ++c) {
    width[c] = t.header[c].size();
    for (const auto& r : t.rows) width[c] = std::max(width[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    out << indent;
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(width[c] - cells[c].size(), ' ');
      const bool last = c + 1 == cells.size();
      if (c < t.text_columns) {
        out << cells[c] << (last ? "" : pad);
      } else {
        out << pad << cells[c];
      }
      out << (last ? "\n" : "  ");
    }
  };
  line(t.header);
  size_t total = 0;
  for (size_t w : width) total += w + 2;
  out << indent << std::string(total - 2, '-') << "\n";
  for (const auto& r : t.rows) line(r);
}

void render_console(std::ostream& out, const Doc& doc) {
  for (size_t b = 0; b < doc.size(); ++b) {
    const Block& block = doc[b];
    const std::string text = plain(block.line);
    switch (block.kind) {
      case Block::heading1:
        out << text << "\n" << std::string(text.size(), '=') << "\n";
        break;
      case Block::heading2:
        out << "\n" << text << "\n" << std::string(text.size(), '-') << "\n";
        break;
      case Block::heading3:
        out << "\n" << text << "\n";
        break;
      case Block::text:
        out << "  " << text << "\n";
        break;
      case Block::item:
        out << "    - " << text << "\n";
        break;
      case Block::code: {
        std::istringstream lines(block.body);
        for (std::string l; std::getline(lines, l);) out << "      " << l << "\n";
        break;
      }
      case Block::table:
        print_table(out, block.grid, "  ");
        break;
    }
  }
}

// --- Markdown ---

std::string md_escape(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (std::string_view("\\`*_[]<>|#").find(ch) != std::string_view::npos) out += '\\';
    out += ch;
  }
  return out;
}

// Inline code that survives backticks inside it (CommonMark: a longer fence).
std::string md_code(const std::string& text) {
  const std::string fence = text.find('`') == std::string::npos ? "`" : "``";
  const bool pad = !text.empty() && (text.front() == '`' || text.back() == '`');
  return fence + (pad ? " " : "") + text + (pad ? " " : "") + fence;
}

std::string md_line(const Line& line) {
  std::string out;
  for (const Span& s : line) out += s.code ? md_code(s.text) : md_escape(s.text);
  return out;
}

std::string render_markdown(const Doc& doc) {
  std::ostringstream out;
  const Block* previous = nullptr;
  for (const Block& block : doc) {
    // Blank lines separate blocks; consecutive items form one list.
    if (previous != nullptr && !(block.kind == Block::item && previous->kind == Block::item)) out << "\n";
    switch (block.kind) {
      case Block::heading1:
        out << "# " << md_line(block.line) << "\n";
        break;
      case Block::heading2:
        out << "## " << md_line(block.line) << "\n";
        break;
      case Block::heading3:
        out << "### " << md_line(block.line) << "\n";
        break;
      case Block::text:
        out << md_line(block.line) << "\n";
        break;
      case Block::item:
        out << "- " << md_line(block.line) << "\n";
        break;
      case Block::code: {
        // A fence longer than any run of backticks in the snippet.
        size_t run = 0, longest = 0;
        for (char ch : block.body) longest = std::max(longest, run = ch == '`' ? run + 1 : 0);
        const std::string fence(std::max<size_t>(3, longest + 1), '`');
        out << fence << "\n" << block.body << "\n" << fence << "\n";
        break;
      }
      case Block::table: {
        const Table& t = block.grid;
        auto row = [&](const std::vector<std::string>& cells, bool header) {
          out << "|";
          for (size_t c = 0; c < cells.size(); ++c) {
            out << " " << (!header && c < t.text_columns ? md_code(cells[c]) : md_escape(cells[c])) << " |";
          }
          out << "\n";
        };
        row(t.header, true);
        out << "|";
        for (size_t c = 0; c < t.header.size(); ++c) out << (c < t.text_columns ? " --- |" : " ---: |");
        out << "\n";
        for (const auto& r : t.rows) row(r, false);
        break;
      }
    }
    previous = &block;
  }
  return out.str();
}

// --- JSON ---

// A violation as data: its kind and the fields that kind sets.
ordered_json violation_json(const Violation& v) {
  ordered_json j = {{"kind", violation_kind_name(v.kind)}};
  switch (v.kind) {
    case Violation::Kind::failed:
    case Violation::Kind::memory_unknown:
      j["detail"] = v.detail;
      break;
    case Violation::Kind::metric:
    case Violation::Kind::no_samples:
    case Violation::Kind::undecided:
      j["term"] = v.term.key();
      j["metric"] = std::string(metric_name(v.term.metric));
      j["statistic"] = v.term.statistic == Statistic::mean ? "mean" : "p95";
      j["bound_kind"] = v.term.kind == BoundKind::at_most ? "max" : "min";
      j["bound"] = v.bound;
      if (v.kind != Violation::Kind::no_samples) j["value"] = v.value;
      if (v.kind != Violation::Kind::no_samples && v.level > 0.0) {
        j["level"] = v.level;
        j["interval"] = v.interval ? ordered_json{v.interval->lo, v.interval->hi} : ordered_json(nullptr);
      }
      if (!metric_info(v.term.metric).unit.empty()) j["unit"] = std::string(metric_info(v.term.metric).unit);
      break;
    case Violation::Kind::bits:
      j["term"] = "max_bits";
      j["bound"] = v.bound;
      j["value"] = v.value;
      j["unit"] = "bits/element";
      break;
    case Violation::Kind::memory_fit:
      j["sequences"] = v.sequences;
      j["fit"] = v.fit;
      j["bytes_per_sequence"] = v.bytes_per_sequence;
      j["free_bytes"] = v.free_bytes;
      j["gpus"] = v.gpus;
      break;
    case Violation::Kind::no_model:
      break;
  }
  return j;
}

ordered_json gap_json(const std::vector<SweepRecord>& records, const SweepAnalysis& analysis, const RuntimeChoice& c) {
  ordered_json j = {{"kind", gap_kind_name(c.gap.kind)}};
  if (!analysis.best) return j;
  const SweepRecord& best = records[*analysis.best];
  j["best_expressible"] = c.gap.best_expressible;
  j["best_key_order"] = c.gap.best_key_order.empty() ? ordered_json() : ordered_json(c.gap.best_key_order);
  j["best"] = {{"k", best.k}, {"v", best.v}, {"bits", best.bits()},
               {"rel_out_err", best.metric(Metric::rel_out_err).mean}};
  if (c.record) {
    const SweepRecord& here = records[*c.record];
    j["here"] = {{"k", here.k}, {"v", here.v}, {"bits", here.bits()},
                 {"rel_out_err", here.metric(Metric::rel_out_err).mean}};
  }
  return j;
}

ordered_json point_json(const SweepSpec& spec, const std::vector<SweepRecord>& records, const SweepAnalysis& analysis,
                        size_t i) {
  const SweepRecord& r = records[i];
  const RecordVerdict& v = analysis.verdicts[i];
  ordered_json p = {{"k", r.k}, {"v", r.v}, {"origin", r.origin}, {"ok", r.ok}, {"backend", r.backend}};
  if (!r.ok) p["error"] = r.error;
  p["k_bits"] = r.k_bits;
  p["v_bits"] = r.v_bits;
  p["bits"] = r.bits();
  ordered_json metrics = ordered_json::object();
  for (size_t m = 0; m < kMetricCount; ++m)
    metrics[std::string(kMetricNames[m])] = detail::summary_json<ordered_json>(r.metrics[m]);
  p["metrics"] = std::move(metrics);
  p["exempt_layers"] = r.exempt_layers;
  p["exempt_pattern"] = r.exempt_pattern.empty() ? ordered_json(nullptr) : ordered_json(r.exempt_pattern);
  p["exempt"] = r.derived() ? ordered_json(r.exempt) : ordered_json(nullptr);
  p["p95_is_bound"] = r.derived();
  // Per sampled layer and KV head: {"layer" (or "kv_head"): N, <metric>: ..., ...}.
  auto parts = [](const auto& list, const char* id_key, auto id) {
    ordered_json out = ordered_json::array();
    for (const auto& part : list) {
      ordered_json entry = {{id_key, part.*id}};
      for (size_t m = 0; m < kMetricCount; ++m) {
        entry[std::string(kMetricNames[m])] = detail::summary_json<ordered_json>(part.metrics[m]);
      }
      out.push_back(std::move(entry));
    }
    return out;
  };
  p["layers"] = parts(r.layers, "layer", &LayerSummary::layer);
  p["heads"] = parts(r.heads, "kv_head", &HeadSummary::kv_head);
  ordered_json depths = ordered_json::array();
  for (const DepthSummary& d : r.needle_depths) {
    depths.push_back({{"depth", d.depth}, {"needle_hit", detail::summary_json<ordered_json>(d.needle_hit)}});
  }
  p["needle_depths"] = std::move(depths);
  p["feasible"] = v.feasible;
  p["undecided"] = v.undecided;
  ordered_json violations = ordered_json::array();
  for (const Violation& x : v.violations) violations.push_back(violation_json(x));
  p["violations"] = std::move(violations);
  if (v.memory) {
    p["memory"] = {{"context", memory_context(spec)},
                   {"total_bytes", v.memory->total_bytes},
                   {"bytes_per_token", v.memory->bytes_per_token},
                   {"k_bits", v.memory->k_bits},
                   {"v_bits", v.memory->v_bits}};
  } else {
    p["memory"] = nullptr;
  }
  p["sequences"] = v.sequences ? ordered_json(*v.sequences) : ordered_json(nullptr);
  p["bytes_per_sequence_per_gpu"] =
      v.bytes_per_sequence_per_gpu ? ordered_json(*v.bytes_per_sequence_per_gpu) : ordered_json(nullptr);
  return p;
}

ordered_json settings_json(const RuntimeSettings& s) {
  return {{"cli", s.cli},
          {"env", s.env},
          {"python", s.python},
          {"build", s.build},
          {"unsupported", s.unsupported},
          {"caveats", s.caveats},
          {"needs", s.needs},
          {"needs_flash_attention", s.needs_flash_attention},
          {"verified", s.verified}};
}

ordered_json option_json(const RuntimeOption& o) {
  return {{"name", o.name},
          {"k", o.k_spec},
          {"v", o.v_spec},
          {"settings", settings_json(o.settings)},
          {"origins", o.origins}};
}

ordered_json runtime_json(const SweepSpec& spec, const std::vector<SweepRecord>& records, const SweepAnalysis& analysis,
                          size_t index) {
  const RuntimeChoice& c = analysis.runtimes[index];
  const RuntimeView* view = index < spec.runtime_views.size() ? &spec.runtime_views[index] : nullptr;
  ordered_json r = {{"name", c.target.name},
                    {"title", c.title},
                    {"version", c.version},
                    {"requested_version", c.target.version},
                    {"beyond_checked", view != nullptr && view->beyond_checked},
                    {"meets_budget", c.record.has_value()},
                    {"gpus", c.gpus},
                    {"gpus_unset", c.gpus_unset},
                    {"gpus_refused", c.gpus_refused},
                    {"context", c.context},
                    {"sequences", c.sequences},
                    {"context_unset", c.context_unset},
                    {"cache_share", c.cache_share ? ordered_json{{"share", c.cache_share->share},
                                                                 {"of", c.cache_share->of_free ? "free" : "gpu"},
                                                                 {"sequences", c.sequences_in_share
                                                                                   ? ordered_json(*c.sequences_in_share)
                                                                                   : ordered_json(nullptr)}}
                                                  : ordered_json(nullptr)}};
  if (const auto& a = c.allocation) {
    const ordered_json group = a->cells.layer_group > 0 ? ordered_json(a->cells.layer_group) : ordered_json(nullptr);
    r["allocation"] = {{"slot_cells", a->cells.slot},
                       {"sliding_cells", a->cells.sliding},
                       {"sliding_extra", a->cells.sliding_extra},
                       {"sliding_full", a->cells.sliding_full},
                       {"full_layers", a->cells.full_layers},
                       {"sliding_layers", a->cells.sliding_layers},
                       {"layer_group", group},
                       {"bytes_per_sequence", a->bytes_per_sequence},
                       {"bytes_per_sequence_per_gpu", a->bytes_per_sequence_per_gpu},
                       {"sequences", a->sequences ? ordered_json(*a->sequences) : ordered_json(nullptr)}};
  } else {
    r["allocation"] = nullptr;
  }
  if (c.record && c.option) {
    r["recommendation"] = {{"option", option_json(*c.option)},
                           {"point", point_json(spec, records, analysis, *c.record)}};
  } else {
    r["recommendation"] = nullptr;
  }
  if (c.fallback && c.fallback_option) {
    r["without_needs"] = {{"option", option_json(*c.fallback_option)},
                          {"point", point_json(spec, records, analysis, *c.fallback)}};
  } else {
    r["without_needs"] = nullptr;
  }
  if (c.closest && c.closest_option) {
    r["closest"] = {{"option", option_json(*c.closest_option)},
                    {"point", point_json(spec, records, analysis, *c.closest)},
                    {"excess", std::isfinite(analysis.verdicts[*c.closest].excess)
                                   ? ordered_json(analysis.verdicts[*c.closest].excess)
                                   : ordered_json(nullptr)}};
  } else {
    r["closest"] = nullptr;
  }
  r["gap"] = gap_json(records, analysis, c);
  ordered_json not_emulated = ordered_json::array();
  if (view != nullptr) {
    for (const RuntimeNotEmulated& n : view->not_emulated) {
      not_emulated.push_back({{"setting", n.setting}, {"reason", n.reason}});
    }
  }
  r["not_emulated"] = std::move(not_emulated);
  return r;
}

}  // namespace

Doc detail::build_sweep_document(const SweepSpec& spec, const std::vector<SweepRecord>& records,
                                 const SweepAnalysis& analysis) {
  return build_document(spec, records, analysis);
}

ordered_json detail::sweep_point_json(const SweepSpec& spec, const std::vector<SweepRecord>& records,
                                      const SweepAnalysis& analysis, size_t index) {
  return point_json(spec, records, analysis, index);
}

// The digits a violation prints its value, interval and bound with: 4 significant digits, more
// where fewer would print any of them equal to the bound it is not equal to. One count for all of
// them, so their printed order is their order (rounding keeps it).
int violation_digits(double value, const std::optional<Interval>& ci, double bound) {
  return digits_apart(ci ? std::vector<double>{value, ci->lo, ci->hi} : std::vector<double>{value}, {bound}, 4);
}

// "[lo, hi]" to `digits` significant digits.
std::string bracket(const Interval& ci, int digits) {
  return "[" + significant(ci.lo, digits) + ", " + significant(ci.hi, digits) + "]";
}

std::string violation_text(const Violation& v) {
  switch (v.kind) {
    case Violation::Kind::failed:
      return v.detail.empty() ? "failed" : "failed: " + v.detail;
    case Violation::Kind::metric: {
      const int d = violation_digits(v.value, v.interval, v.bound);
      const std::string op = v.term.kind == BoundKind::at_most ? " > " : " < ";
      return term_quantity(v.term) + " " + significant(v.value, d) + op + significant(v.bound, d) +
             (v.interval ? " (" + percent(v.level) + " interval " + bracket(*v.interval, d) + ")" : std::string());
    }
    case Violation::Kind::undecided: {
      if (!v.interval) {
        return term_quantity(v.term) + " " + significant(v.value, 4) + " has no " + percent(v.level) +
               " interval to judge (results written without one): undecided";
      }
      const int d = violation_digits(v.value, v.interval, v.bound);
      return term_quantity(v.term) + " " + significant(v.value, d) + ": its " + percent(v.level) + " interval " +
             bracket(*v.interval, d) + " straddles the bound " + significant(v.bound, d) + " (undecided)";
    }
    case Violation::Kind::no_samples:
      return metric_info(v.term.metric).needs_needles ? "no needle samples"
                                                      : "no " + std::string(metric_name(v.term.metric)) + " samples";
    case Violation::Kind::bits:
      return compare_text("bits", v.value, ">", v.bound);
    case Violation::Kind::memory_fit:
      return std::to_string(v.sequences) + " sequences x " + format_bytes(double(v.bytes_per_sequence), 2) + " > " +
             format_bytes(double(v.free_bytes), 2) + " free after weights" +
             (v.gpus > 1 ? " per GPU of " + std::to_string(v.gpus) + " (tensor parallel)" : std::string()) + " (" +
             std::to_string(v.fit) + " fit)";
    case Violation::Kind::memory_unknown:
      return "memory: " + v.detail;
    case Violation::Kind::no_model:
      return "memory budget needs the workload's model preset";
  }
  return "?";
}

std::string note_text(const SweepNote& n) {
  const std::string reasons = n.reasons.empty() ? "" : join_with(n.reasons, "; ");
  switch (n.kind) {
    case SweepNote::Kind::grid_dropped:
      return "[[search.grid]] at " + n.where + ": skip_invalid dropped " + std::to_string(n.dropped) +
             " candidate(s), e.g. " + reasons;
    case SweepNote::Kind::list_dropped:
      return "[search] at " + n.where + ": skip_invalid dropped " + std::to_string(n.dropped) +
             " k/v/both candidate(s) the workload cannot take, e.g. " + reasons;
    case SweepNote::Kind::constraints_dropped:
      return "[search.constraints] dropped " + std::to_string(n.dropped) + " of " + std::to_string(n.of) +
             " pairs (k_bits_at_least_v_bits: " + std::to_string(n.by_order) + ", max_pair_bits: " +
             std::to_string(n.by_sum) + ", exclude: " + std::to_string(n.by_exclude) + ")";
    case SweepNote::Kind::option_dropped:
      return n.where + ": option '" + n.option + "' dropped: " + reasons;
  }
  return "?";
}

std::vector<std::string> note_texts(const std::vector<SweepNote>& notes) {
  std::vector<std::string> out;
  for (const SweepNote& n : notes) out.push_back(note_text(n));
  return out;
}

std::vector<std::string> violation_texts(const RecordVerdict& verdict) {
  std::vector<std::string> out;
  for (const Violation& v : verdict.violations) out.push_back(violation_text(v));
  return out;
}

std::string gap_text(const std::vector<SweepRecord>& records, const SweepAnalysis& analysis, const RuntimeChoice& c) {
  if (c.gap.kind == Gap::Kind::best) return "";
  if (c.gap.kind == Gap::Kind::no_best || !analysis.best) return "no evaluated configuration meets the budget";
  const SweepRecord& best = records[*analysis.best];
  const std::string best_text =
      "K " + best.k + ", V " + best.v +
      (c.gap.best_expressible           ? ""
       : !c.gap.best_key_order.empty() ? "; " + c.title + "'s own types, but it stores this model's keys in another "
                                           "channel order, pair_order=" + c.gap.best_key_order
                                         : "; not available in " + c.title);
  const std::string bits_best = significant(best.bits(), 4);
  const std::string err_best = significant(best.metric(Metric::rel_out_err).mean, 3);
  switch (c.gap.kind) {
    case Gap::Kind::none_evaluated:
      return "none of its options was evaluated; the best overall is " + best_text;
    case Gap::Kind::none_feasible:
      return "none of its options meets the budget; the best overall (" + best_text + ") does with " + bits_best +
             " bits/element and rel_out_err " + err_best;
    default:
      break;
  }
  const SweepRecord& here = records[c.record.value()];
  const std::string bits_here = significant(here.bits(), 4);
  const std::string err_here = significant(here.metric(Metric::rel_out_err).mean, 3);
  if (c.gap.objective == Objective::min_bits) {
    return "the best overall (" + best_text + ") needs " + bits_best + " bits/element vs " + bits_here +
           " here (rel_out_err " + err_best + " vs " + err_here + ")";
  }
  return "the best overall (" + best_text + ") reaches rel_out_err " + err_best + " vs " + err_here + " here (" +
         bits_best + " vs " + bits_here + " bits/element)";
}

void print_sweep_summary(std::ostream& out, const SweepSpec& spec, const std::vector<SweepRecord>& records,
                         const SweepAnalysis& analysis) {
  render_console(out, build_document(spec, records, analysis));
}

std::string sweep_report_md(const SweepSpec& spec, const std::vector<SweepRecord>& records,
                            const SweepAnalysis& analysis) {
  return render_markdown(build_document(spec, records, analysis));
}

ordered_json detail::summary_document(const SweepSpec& spec, const std::vector<SweepRecord>& records,
                                      const SweepAnalysis& analysis) {
  const Counts n = count(records, analysis);
  const SweepBudget& b = spec.budget;
  ordered_json budget = ordered_json::object();
  // The three terms of earlier summaries are always present (null when unset); other terms when set.
  for (const char* key : {"max_rel_out_err", "max_attn_kl_p95", "min_needle_hit"}) budget[key] = nullptr;
  for (const BudgetTerm& t : b.terms) budget[t.key()] = t.bound;
  budget["max_bits"] = b.max_bits ? ordered_json(*b.max_bits) : ordered_json(nullptr);
  budget["confidence"] = b.confidence ? ordered_json(*b.confidence) : ordered_json(nullptr);
  budget["fit"] = b.fit ? ordered_json{{"gpu_mem", b.fit->gpu_mem},
                                       {"weights", b.fit->weights},
                                       {"ctx", memory_context(spec)},
                                       {"sequences", b.fit->sequences},
                                       {"tensor_parallel", b.fit->tensor_parallel},
                                       {"beyond_model_context", served_beyond_model_context(spec)}}
                        : ordered_json(nullptr);

  ordered_json doc = {{"name", spec.name}, {"source", spec.source}, {"spec_hash", hash_hex(spec.hash)}};
  doc["workload"] = {{"model", spec.model ? ordered_json(spec.model->name) : ordered_json(nullptr)},
                     {"profile", spec.scenario.capture           ? ordered_json("cache")
                                 : spec.scenario.profile.empty() ? ordered_json("generic")
                                                                 : ordered_json(spec.scenario.profile)},
                     {"tokens", evaluated_context(spec)},
                     {"cases", scenario_cases(spec.scenario).size()},
                     {"precision", precision_name(spec.scenario.precision)}};
  doc["serving"] = spec.model ? ordered_json{{"ctx", memory_context(spec)},
                                              {"beyond_model_context", served_beyond_model_context(spec)}}
                              : ordered_json(nullptr);
  doc["objective"] = objective_text(b.objective);
  doc["budget"] = std::move(budget);
  doc["counts"] = {
      {"points", spec.points.size()}, {"evaluated", n.evaluated},     {"failed", n.failed},
      {"feasible", n.feasible},       {"undecided", n.undecided},      {"derived", n.derived},
      {"derived_feasible", n.derived_feasible}, {"derived_undecided", n.derived_undecided}};
  const bool one_case = scenario_cases(spec.scenario).size() < 2;
  doc["intervals"] = {{"level", b.interval_level()},
                      {"rates", one_case ? "wilson" : "wilson_cases"},
                      {"others", one_case ? "t_samples" : "t_cases"},
                      {"p95", one_case ? "bootstrap_samples" : "bootstrap_cases"},
                      {"derived_p95", "mixture_bound"},
                      {"resamples", bootstrap_resamples(b.interval_level())}};
  ordered_json frontier = ordered_json::array();
  for (size_t i : analysis.frontier) frontier.push_back(point_json(spec, records, analysis, i));
  doc["frontier"] = std::move(frontier);
  doc["best"] = analysis.best ? point_json(spec, records, analysis, *analysis.best) : ordered_json(nullptr);
  ordered_json runtimes = ordered_json::array();
  for (size_t i = 0; i < analysis.runtimes.size(); ++i) runtimes.push_back(runtime_json(spec, records, analysis, i));
  doc["runtimes"] = std::move(runtimes);
  doc["notes"] = detail::notes_json(spec.notes);
  return doc;
}

std::string sweep_summary_json(const SweepSpec& spec, const std::vector<SweepRecord>& records,
                               const SweepAnalysis& analysis) {
  return detail::summary_document(spec, records, analysis).dump(2) + "\n";
}

std::string frontier_csv(const SweepSpec& spec, const std::vector<SweepRecord>& records,
                         const SweepAnalysis& analysis) {
  // The budget's other terms last, each with its interval: the columns of earlier files keep their places.
  const std::vector<BudgetTerm> terms = terms_beyond_the_fixed_figures(spec);
  std::string out =
      "k,v,k_bits,v_bits,bits,rel_out_err,rel_out_err_p95,attn_kl_p95,needle_hit,bytes_per_token,feasible,"
      "exempt_layers,undecided,rel_out_err_lo,rel_out_err_hi,rel_out_err_p95_lo,rel_out_err_p95_hi,attn_kl_p95_lo,"
      "attn_kl_p95_hi,needle_hit_lo,needle_hit_hi,level";
  for (const BudgetTerm& t : terms) out += "," + term_figure(t) + "," + term_figure(t) + "_lo," + term_figure(t) + "_hi";
  out += "\n";
  // %.9g keeps the figures exact enough to re-sort and re-plot without printing float noise.
  for (size_t i : analysis.frontier) {
    const SweepRecord& r = records[i];
    const RecordVerdict& v = analysis.verdicts[i];
    const Summary& needle = r.metric(Metric::needle_hit);
    const std::vector<std::string> fields = {csv_field(r.k),
                                             csv_field(r.v),
                                             fmt(r.k_bits, "%.9g"),
                                             fmt(r.v_bits, "%.9g"),
                                             fmt(r.bits(), "%.9g"),
                                             fmt(r.metric(Metric::rel_out_err).mean, "%.9g"),
                                             fmt(r.metric(Metric::rel_out_err).p95, "%.9g"),
                                             fmt(r.metric(Metric::attn_kl).p95, "%.9g"),
                                             needle.count ? fmt(needle.mean, "%.9g") : "",
                                             v.memory ? fmt(v.memory->bytes_per_token, "%.9g") : "",
                                             v.feasible ? "true" : "false",
                                             r.derived() ? csv_field(exempt_layers_text(r) + " at " + r.exempt) : ""};
    // The intervals after the columns of earlier files, so that their positions stay; empty
    // where a record has none.
    const Summary &err = r.metric(Metric::rel_out_err), &kl = r.metric(Metric::attn_kl);
    auto ends = [](const Summary& s, const Interval& ci) {
      return s.has_intervals() ? fmt(ci.lo, "%.9g") + "," + fmt(ci.hi, "%.9g") : std::string(",");
    };
    out += join_with(fields, ",") + "," + (v.undecided ? "true" : "false") + "," + ends(err, err.mean_ci) + "," +
           ends(err, err.p95_ci) + "," + ends(kl, kl.p95_ci) + "," + ends(needle, needle.mean_ci) + "," +
           (err.has_intervals() ? fmt(err.level, "%.9g") : "");
    for (const BudgetTerm& t : terms) {
      const Summary& m = r.metric(t.metric);
      out += "," + (m.count ? fmt(t.value(m), "%.9g") : "") + "," + (m.count ? ends(m, t.interval(m)) : ",");
    }
    out += "\n";
  }
  return out;
}

void write_sweep_report(const std::string& out_dir, const SweepSpec& spec, const std::vector<SweepRecord>& records,
                        const SweepAnalysis& analysis) {
  auto write = [&](const std::string& name, const std::string& text) {
    write_file_atomic(out_dir + "/" + name, std::as_bytes(std::span(text.data(), text.size())));
  };
  write("summary.json", sweep_summary_json(spec, records, analysis));
  write("frontier.csv", frontier_csv(spec, records, analysis));
  write("report.md", sweep_report_md(spec, records, analysis));
}

}  // namespace kvtune
