#include "kvtune/sweep_analysis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <utility>

#include "kvtune/error.h"

namespace kvtune {
namespace {

std::string num(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

// "a op b" with the fewest significant digits (at least 3) that keep a and b apart, so a value
// just over its bound never reads "0.02 > 0.02".
std::string compare_text(const std::string& what, double value, const char* op, double bound) {
  int digits = 3;
  while (digits < 17 && num(value, digits) == num(bound, digits)) ++digits;
  return what + " " + num(value, digits) + " " + op + " " + num(bound, digits);
}

// Bounds are written so that NaN fails them: a broken metric is never feasible.
void check_max(std::vector<std::string>& violations, const std::string& what, double value,
               const std::optional<double>& bound) {
  if (bound && !(value <= *bound)) violations.push_back(compare_text(what, value, ">", *bound));
}

double err(const SweepRecord& r) { return r.metric(Metric::rel_out_err).mean; }

// Memory of one sequence for the model at `context`; storage functions are built once per spec.
class MemoryModel {
 public:
  MemoryModel(const ModelShape& shape, int64_t context, const Registry& registry)
      : shape_(shape), context_(context), registry_(registry) {}

  MemoryEstimate estimate(const std::string& k, const std::string& v) {
    return estimate_memory(shape_, context_, storage(k), storage(v));
  }
  int64_t context() const { return context_; }

 private:
  const RoleStorage& storage(const std::string& spec) {
    auto it = cache_.find(spec);
    if (it == cache_.end()) it = cache_.emplace(spec, scheme_storage(registry_.make(spec))).first;
    return it->second;
  }

  ModelShape shape_;
  int64_t context_;
  const Registry& registry_;
  std::map<std::string, RoleStorage> cache_;
};

RecordVerdict judge(const SweepSpec& spec, const SweepRecord& r, MemoryModel* memory) {
  RecordVerdict verdict;
  if (!r.ok) {
    verdict.violations.push_back(r.error.empty() ? "failed" : "failed: " + r.error);
    return verdict;
  }
  const SweepBudget& b = spec.budget;
  auto& violations = verdict.violations;
  check_max(violations, "rel_out_err", err(r), b.max_rel_out_err);
  check_max(violations, "attn_kl p95", r.metric(Metric::attn_kl).p95, b.max_attn_kl_p95);
  if (b.min_needle_hit) {
    const Summary& needle = r.metric(Metric::needle_hit);
    if (needle.count == 0) {
      violations.push_back("no needle samples");
    } else if (!(needle.mean >= *b.min_needle_hit)) {
      violations.push_back(compare_text("needle_hit", needle.mean, "<", *b.min_needle_hit));
    }
  }
  check_max(violations, "bits", r.bits(), b.max_bits);

  if (memory != nullptr) {
    try {
      verdict.memory = memory->estimate(r.k, r.v);
    } catch (const InputError& e) {
      // The points were validated against the workload's head_dim; a model preset with another
      // head_dim can still refuse a scheme. Only a fit budget makes that a violation.
      if (b.fit) violations.push_back(std::string("memory: ") + e.what());
    }
  }
  if (b.fit) {
    if (!spec.model) {
      violations.push_back("memory budget needs the workload's model preset");
    } else if (verdict.memory) {
      const MemoryFit& f = *b.fit;
      const uint64_t per_sequence = verdict.memory->total_bytes;
      verdict.sequences = max_sequences(f.gpu_mem, f.weights, per_sequence);
      if (*verdict.sequences < static_cast<uint64_t>(f.sequences)) {
        const uint64_t free_bytes = f.gpu_mem > f.weights ? f.gpu_mem - f.weights : 0;
        violations.push_back(std::to_string(f.sequences) + " sequences x " + format_bytes(double(per_sequence), 2) +
                             " > " + format_bytes(double(free_bytes), 2) + " free after weights (" +
                             std::to_string(*verdict.sequences) + " fit)");
      }
    }
  }
  verdict.feasible = violations.empty();
  return verdict;
}

// Strict "a is better than b" under the objective; record order breaks the remaining ties.
bool better(Objective objective, const SweepRecord& a, size_t ia, const SweepRecord& b, size_t ib) {
  const std::pair<double, double> ka =
      objective == Objective::min_bits ? std::pair{a.bits(), err(a)} : std::pair{err(a), a.bits()};
  const std::pair<double, double> kb =
      objective == Objective::min_bits ? std::pair{b.bits(), err(b)} : std::pair{err(b), b.bits()};
  if (ka != kb) return ka < kb;
  return ia < ib;
}

// Sorted by (bits, error, record order), a record is on the frontier when it is the first of its
// bits value and its error is below every error at fewer bits. An exact tie keeps only its first
// record, so the frontier lists each trade-off once.
std::vector<size_t> pareto_frontier(const std::vector<SweepRecord>& records) {
  std::vector<size_t> order;
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i].ok && !std::isnan(err(records[i])) && !std::isnan(records[i].bits())) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    const SweepRecord& a = records[x];
    const SweepRecord& b = records[y];
    if (a.bits() != b.bits()) return a.bits() < b.bits();
    if (err(a) != err(b)) return err(a) < err(b);
    return x < y;
  });
  std::vector<size_t> frontier;
  double lowest = std::numeric_limits<double>::infinity();
  for (size_t n = 0; n < order.size(); ++n) {
    const SweepRecord& r = records[order[n]];
    const bool first_of_bits = n == 0 || records[order[n - 1]].bits() != r.bits();
    if (first_of_bits && err(r) < lowest) frontier.push_back(order[n]);
    lowest = std::min(lowest, err(r));
  }
  return frontier;
}

std::string pair_text(const SweepRecord& r) { return "K " + r.k + ", V " + r.v; }

// `best_text` names the best pair and, when the runtime cannot express it, says so.
std::string gap_text(Objective objective, const SweepRecord& best, const std::string& best_text,
                     const SweepRecord& here) {
  const std::string bits_best = num(best.bits(), 4), bits_here = num(here.bits(), 4);
  const std::string err_best = num(err(best), 3), err_here = num(err(here), 3);
  if (objective == Objective::min_bits) {
    return "the best overall (" + best_text + ") needs " + bits_best + " bits/element vs " + bits_here +
           " here (rel_out_err " + err_best + " vs " + err_here + ")";
  }
  return "the best overall (" + best_text + ") reaches rel_out_err " + err_best + " vs " + err_here + " here (" +
         bits_best + " vs " + bits_here + " bits/element)";
}

RuntimeChoice choose(const SweepSpec& spec, size_t i, const std::vector<SweepRecord>& records,
                     const SweepAnalysis& analysis,
                     const std::map<std::pair<std::string, std::string>, size_t>& index) {
  RuntimeChoice choice;
  choice.target = spec.runtimes[i];
  const RuntimeView* view = i < spec.runtime_views.size() ? &spec.runtime_views[i] : nullptr;
  choice.title = view != nullptr && !view->title.empty() ? view->title : choice.target.name;
  choice.version = view != nullptr ? view->version : choice.target.version;

  // The runtime's own options that were evaluated, in table order. Two options with the same
  // pair share a record; the first (in table order) is the one named.
  std::vector<std::pair<size_t, const RuntimeOption*>> candidates;
  if (view != nullptr) {
    for (const RuntimeOption& o : view->options) {
      auto it = index.find({o.k_spec, o.v_spec});
      if (it != index.end()) candidates.emplace_back(it->second, &o);
    }
  }
  const Objective objective = spec.budget.objective;
  for (const auto& [r, option] : candidates) {
    if (!analysis.verdicts[r].feasible) continue;
    if (!choice.record || better(objective, records[r], r, records[*choice.record], *choice.record)) {
      choice.record = r;
      choice.option = *option;
    }
  }
  if (!choice.record) {
    // Nothing it can express meets the budget: the option with the lowest error is shown as the
    // closest (never as a recommendation); a failed option only when none ran.
    for (const auto& [r, option] : candidates) {
      if (!records[r].ok) continue;
      if (!choice.closest || better(Objective::min_error, records[r], r, records[*choice.closest], *choice.closest)) {
        choice.closest = r;
        choice.closest_option = *option;
      }
    }
    if (!choice.closest && !candidates.empty()) {
      choice.closest = candidates.front().first;
      choice.closest_option = *candidates.front().second;
    }
  }

  if (!analysis.best) {
    choice.gap = "no evaluated configuration meets the budget";
    return choice;
  }
  // A research scheme, or a K/V pair the runtime cannot combine, wins "not available in X".
  const SweepRecord& best = records[*analysis.best];
  const bool expressible = std::any_of(candidates.begin(), candidates.end(),
                                       [&](const auto& c) { return c.first == *analysis.best; });
  const std::string best_text = pair_text(best) + (expressible ? "" : "; not available in " + choice.title);
  if (candidates.empty()) {
    choice.gap = "none of its options was evaluated; the best overall is " + best_text;
  } else if (!choice.record) {
    choice.gap = "none of its options meets the budget; the best overall (" + best_text + ") does with " +
                 num(best.bits(), 4) + " bits/element and rel_out_err " + num(err(best), 3);
  } else if (*choice.record != *analysis.best) {
    choice.gap = gap_text(objective, best, best_text, records[*choice.record]);
  }
  return choice;
}

}  // namespace

SweepAnalysis analyze_sweep(const SweepSpec& spec, const std::vector<SweepRecord>& records, const Registry& registry) {
  SweepAnalysis analysis;
  // Memory is reported whenever the workload names a model: at the fit context with a fit
  // budget, else at the evaluated context.
  std::optional<MemoryModel> memory;
  if (spec.model) {
    int64_t context = spec.scenario.contexts.empty() ? spec.scenario.workload.tokens : spec.scenario.contexts.front();
    if (spec.budget.fit && spec.budget.fit->ctx > 0) context = spec.budget.fit->ctx;
    memory.emplace(spec.model->shape, context, registry);
  }
  analysis.verdicts.reserve(records.size());
  for (const SweepRecord& r : records) analysis.verdicts.push_back(judge(spec, r, memory ? &*memory : nullptr));

  analysis.frontier = pareto_frontier(records);
  for (size_t i = 0; i < records.size(); ++i) {
    if (!analysis.verdicts[i].feasible) continue;
    if (!analysis.best || better(spec.budget.objective, records[i], i, records[*analysis.best], *analysis.best)) {
      analysis.best = i;
    }
  }

  // First record of each (k, v): a merged sweep keeps one record per point.
  std::map<std::pair<std::string, std::string>, size_t> index;
  for (size_t i = 0; i < records.size(); ++i) index.emplace(std::pair{records[i].k, records[i].v}, i);
  for (size_t i = 0; i < spec.runtimes.size(); ++i) {
    analysis.runtimes.push_back(choose(spec, i, records, analysis, index));
  }
  return analysis;
}

}  // namespace kvtune
