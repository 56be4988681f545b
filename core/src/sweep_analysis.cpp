#include "kvtune/sweep_analysis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <limits>
#include <map>
#include <utility>

#include "kvtune/error.h"

namespace kvtune {
namespace {

double err(const SweepRecord& r) { return r.metric(Metric::rel_out_err).mean; }

// Memory of one sequence for the model at `context`; storage functions are built once per spec.
class MemoryModel {
 public:
  MemoryModel(const ModelShape& shape, int64_t context, const SweepSpec& spec)
      : shape_(shape), context_(context), spec_(spec) {}

  MemoryEstimate estimate(const std::string& k, const std::string& v) {
    return estimate_memory(shape_, context_, storage(k), storage(v));
  }
  // A derived record's exempt layers are counted with their own storage. Every layer of a model
  // without sliding-window layers holds the same bytes, so the sum is exact; with sliding layers the
  // exempt ones are counted as average layers (which layers slide is not part of the shape).
  MemoryEstimate estimate(const SweepRecord& r) {
    const MemoryEstimate base = estimate(r.k, r.v);
    if (!r.derived()) return base;
    if (r.exempt_pattern == "sliding_window") return sliding_exempt(r, base);
    const MemoryEstimate exempt = estimate(r.exempt, r.exempt);
    const auto layers = static_cast<uint64_t>(shape_.layers), n = static_cast<uint64_t>(r.exempt_layers.size());
    MemoryEstimate out = base;
    if (shape_.sliding_layers == 0) {
      out.total_bytes = base.total_bytes / layers * (layers - n) + exempt.total_bytes / layers * n;
    } else {
      out.total_bytes = static_cast<uint64_t>(std::ceil((double(base.total_bytes) * double(layers - n) +
                                                         double(exempt.total_bytes) * double(n)) / double(layers)));
    }
    const double l = double(layers), e = double(n);
    out.k_bits = ((l - e) * base.k_bits + e * exempt.k_bits) / l;
    out.v_bits = ((l - e) * base.v_bits + e * exempt.v_bits) / l;
    out.bytes_per_token = double(out.total_bytes) / double(context_);
    return out;
  }
  int64_t context() const { return context_; }

 private:
  // Every sliding layer at the exempt dtype over its window, every other layer at the record's
  // pair over the whole context: each kind counted exactly with its own storage.
  MemoryEstimate sliding_exempt(const SweepRecord& r, const MemoryEstimate& base) {
    const ModelShape global = {shape_.layers - shape_.sliding_layers, shape_.kv_heads, shape_.head_dim, 0, 0};
    const ModelShape sliding = {shape_.sliding_layers, shape_.kv_heads, shape_.head_dim, shape_.sliding_window,
                                shape_.sliding_layers};
    MemoryEstimate out = base;
    out.total_bytes = estimate_memory(global, context_, storage(r.k), storage(r.v)).total_bytes +
                      estimate_memory(sliding, context_, storage(r.exempt), storage(r.exempt)).total_bytes;
    const MemoryEstimate exempt = estimate(r.exempt, r.exempt);
    const double l = double(shape_.layers), e = double(shape_.sliding_layers);
    out.k_bits = ((l - e) * base.k_bits + e * exempt.k_bits) / l;
    out.v_bits = ((l - e) * base.v_bits + e * exempt.v_bits) / l;
    out.bytes_per_token = double(out.total_bytes) / double(context_);
    return out;
  }

  const RoleStorage& storage(const std::string& spec) {
    auto it = cache_.find(spec);
    if (it == cache_.end()) it = cache_.emplace(spec, scheme_storage(spec_.scheme(spec))).first;
    return it->second;
  }

  ModelShape shape_;
  int64_t context_;
  const SweepSpec& spec_;
  std::map<std::string, RoleStorage> cache_;
};

// (value - bound) / |bound| when value lies beyond the bound in `direction` (+1: above an upper
// bound, -1: below a lower one); an absolute excess for a bound of 0.
double relative_excess(double value, double bound, double direction) {
  const double over = direction * (value - bound);
  return bound == 0.0 ? over : over / std::fabs(bound);
}

double excess_of(const Violation& v) {
  switch (v.kind) {
    case Violation::Kind::metric:
      return relative_excess(v.value, v.bound, v.term.kind == BoundKind::at_most ? 1.0 : -1.0);
    case Violation::Kind::undecided:  // how far the interval's worst end reaches past the bound
      if (!v.interval) return std::numeric_limits<double>::infinity();
      return v.term.kind == BoundKind::at_most ? relative_excess(v.interval->hi, v.bound, 1.0)
                                               : relative_excess(v.interval->lo, v.bound, -1.0);
    case Violation::Kind::bits:
      return relative_excess(v.value, v.bound, 1.0);
    case Violation::Kind::memory_fit:
      return v.sequences == 0 ? 0.0 : double(v.sequences - v.fit) / double(v.sequences);
    default:
      return std::numeric_limits<double>::infinity();  // no size: failed, no samples, memory unknown
  }
}

// A term judged on its interval at `level`: it holds when the interval's worst end meets the
// bound, fails when even its best end misses it, and is undecided in between. A summary without
// an interval (written without one) is undecided: nothing says how far its estimate may be off.
void judge_on_interval(const BudgetTerm& term, const Summary& s, double level, std::vector<Violation>& violations) {
  const double v = term.value(s);
  Violation out{.term = term, .value = v, .bound = term.bound, .level = level};
  if (!s.has_intervals() || s.level != level) {
    out.kind = Violation::Kind::undecided;
    violations.push_back(out);
    return;
  }
  const Interval& ci = term.interval(s);
  out.interval = ci;
  const bool upper = term.kind == BoundKind::at_most;
  if (term.holds(upper ? ci.hi : ci.lo) && term.holds(v)) return;
  out.kind = term.holds(upper ? ci.lo : ci.hi) ? Violation::Kind::undecided : Violation::Kind::metric;
  violations.push_back(out);
}

RecordVerdict judge(const SweepSpec& spec, const SweepRecord& r, MemoryModel* memory) {
  RecordVerdict verdict;
  auto& violations = verdict.violations;
  if (!r.ok) {
    violations.push_back({.kind = Violation::Kind::failed, .detail = r.error});
    return verdict;
  }
  const SweepBudget& b = spec.budget;
  for (const BudgetTerm& term : b.terms) {
    const Summary& s = r.metric(term.metric);
    if (s.count == 0) {
      violations.push_back({.kind = Violation::Kind::no_samples, .term = term, .bound = term.bound});
    } else if (b.confidence) {
      judge_on_interval(term, s, *b.confidence, violations);
    } else if (const double v = term.value(s); !term.holds(v)) {
      violations.push_back({.kind = Violation::Kind::metric, .term = term, .value = v, .bound = term.bound});
    }
  }
  if (b.max_bits && !(r.bits() <= *b.max_bits)) {
    violations.push_back({.kind = Violation::Kind::bits, .value = r.bits(), .bound = *b.max_bits});
  }

  if (memory != nullptr) {
    try {
      verdict.memory = memory->estimate(r);
    } catch (const InputError& e) {
      // The points were validated against the workload's head_dim; a model preset with another
      // head_dim can still refuse a scheme. Only a fit budget makes that a violation.
      if (b.fit) violations.push_back({.kind = Violation::Kind::memory_unknown, .detail = e.what()});
    }
  }
  if (b.fit) {
    if (!spec.model) {
      violations.push_back({.kind = Violation::Kind::no_model});
    } else if (verdict.memory) {
      const MemoryFit& f = *b.fit;
      // On each GPU of the tensor-parallel group (one GPU without one).
      const GpuFit gpu = fit_per_gpu(spec.model->shape, *verdict.memory, f.gpu_mem, f.weights, f.tensor_parallel);
      verdict.sequences = gpu.sequences;
      verdict.bytes_per_sequence_per_gpu = gpu.sequence_bytes;
      if (gpu.sequences < static_cast<uint64_t>(f.sequences)) {
        violations.push_back({.kind = Violation::Kind::memory_fit,
                              .sequences = static_cast<uint64_t>(f.sequences),
                              .fit = gpu.sequences,
                              .bytes_per_sequence = gpu.sequence_bytes,
                              .free_bytes = gpu.free_bytes,
                              .gpus = gpu.gpus});
      }
    }
  }
  verdict.feasible = violations.empty();
  verdict.undecided = !violations.empty() && std::all_of(violations.begin(), violations.end(), [](const Violation& v) {
    return v.kind == Violation::Kind::undecided;
  });
  for (const Violation& v : violations) verdict.excess = std::max(verdict.excess, excess_of(v));
  return verdict;
}

// "a is closer to the budget than b": smaller excess, then lower error, then record order.
bool closer(const SweepAnalysis& analysis, const std::vector<SweepRecord>& records, size_t a, size_t b) {
  const double ea = analysis.verdicts[a].excess, eb = analysis.verdicts[b].excess;
  if (ea != eb) return ea < eb;
  if (err(records[a]) != err(records[b])) return err(records[a]) < err(records[b]);
  return a < b;
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

// The cache one GPU of the fit gets under a runtime's default share: `share` of the GPU less the
// weights, or `share` of what the weights leave (activations not counted).
uint64_t share_cache_bytes(const MemoryFit& f, const CacheShare& c) {
  const double gpu = double(f.gpu_mem), weights = double(weights_per_gpu(f.weights, f.tensor_parallel));
  const double bytes = c.of_free ? c.share * (gpu - weights) : c.share * gpu - weights;
  return bytes > 0.0 ? static_cast<uint64_t>(bytes) : 0;
}

// The shown option's cache as the runtime allocates it, where its [[context]] entry rounds cells
// (RuntimeEntry::cells) and the result differs from kvtune's own count; nullopt otherwise.
std::optional<RuntimeChoice::Allocation> runtime_allocation(const SweepSpec& spec, const RuntimeView* view,
                                                            const std::vector<SweepRecord>& records,
                                                            const SweepAnalysis& analysis, const RuntimeChoice& choice) {
  const std::optional<size_t> shown = choice.record ? choice.record : choice.closest;
  if (view == nullptr || !spec.model || !shown) return std::nullopt;
  const CellAllocation* cells = cells_for(*view, spec.model->architecture);
  if (cells == nullptr) return std::nullopt;
  const RecordVerdict& kvtune = analysis.verdicts[*shown];
  if (!kvtune.memory) return std::nullopt;
  const int64_t context = memory_context(spec), sequences = spec.budget.fit ? spec.budget.fit->sequences : 1;
  RuntimeChoice::Allocation out;
  out.cells = allocated_cells(spec.model->shape, context, sequences, *cells);
  MemoryModel allocated(allocated_shape(spec.model->shape, out.cells), out.cells.slot, spec);
  out.bytes_per_sequence = allocated.estimate(records[*shown]).total_bytes;
  if (out.bytes_per_sequence == kvtune.memory->total_bytes) return std::nullopt;  // nothing to add
  out.bytes_per_sequence_per_gpu = out.bytes_per_sequence;
  if (spec.budget.fit) {
    const MemoryFit& f = *spec.budget.fit;
    MemoryEstimate estimate = *kvtune.memory;
    estimate.total_bytes = out.bytes_per_sequence;
    const GpuFit gpu = fit_per_gpu(spec.model->shape, estimate, f.gpu_mem, f.weights, f.tensor_parallel);
    out.bytes_per_sequence_per_gpu = gpu.sequence_bytes;
    out.sequences = gpu.sequences;
  }
  return out;
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
  std::deque<RuntimeOption> exempted;  // options with layers kept at the runtime's exemption dtype
  if (view != nullptr) {
    for (const RuntimeOption& o : view->options) {
      auto it = index.find({o.k_spec, o.v_spec});
      if (it != index.end()) candidates.emplace_back(it->second, &o);
    }
    // A runtime with a layer exemption can also express each option's derived records whose exempt
    // layers keep the dtype its exemption stores.
    if (const std::optional<RuntimeOption>& ex = view->layer_exemption) {
      for (const RuntimeOption& o : view->options) {
        for (size_t r = 0; r < records.size(); ++r) {
          const SweepRecord& d = records[r];
          if (!d.derived() || d.k != o.k_spec || d.v != o.v_spec || d.exempt != ex->k_spec) continue;
          if (d.exempt_pattern.empty()) {
            exempted.push_back(with_exempt_layers(o, *ex, d.exempt_layers));
          } else if (std::find(ex->attention_types.begin(), ex->attention_types.end(), d.exempt_pattern) !=
                     ex->attention_types.end()) {
            exempted.push_back(with_exempt_attention_type(o, *ex, d.exempt_pattern));
          } else {  // the pattern spelled as the model's layer indices
            exempted.push_back(with_exempt_layers(o, *ex, spec.scenario.workload.sliding_layers));
          }
          candidates.emplace_back(r, &exempted.back());
        }
      }
    }
  }
  const Objective objective = spec.budget.objective;
  // The best feasible option; with `needs_nothing`, among the options that need nothing.
  auto best_feasible = [&](bool needs_nothing, std::optional<size_t>& record, std::optional<RuntimeOption>& chosen) {
    for (const auto& [r, option] : candidates) {
      if (!analysis.verdicts[r].feasible || (needs_nothing && !option->settings.needs.empty())) continue;
      if (!record || better(objective, records[r], r, records[*record], *record)) {
        record = r;
        chosen = *option;
      }
    }
  };
  best_feasible(false, choice.record, choice.option);
  if (choice.option && !choice.option->settings.needs.empty()) {
    best_feasible(true, choice.fallback, choice.fallback_option);
  }
  if (!choice.record) {
    // Nothing it can express meets the budget: the option that misses it by the least is shown
    // as the closest (never as a recommendation); a failed option only when none ran.
    for (const auto& [r, option] : candidates) {
      if (!records[r].ok) continue;
      if (!choice.closest || closer(analysis, records, r, *choice.closest)) {
        choice.closest = r;
        choice.closest_option = *option;
      }
    }
    if (!choice.closest && !candidates.empty()) {
      choice.closest = candidates.front().first;
      choice.closest_option = *candidates.front().second;
    }
  }

  // On several GPUs every option shown carries the runtime's setting for them, and a GPU count the
  // model's heads do not fit is named.
  choice.gpus = spec.budget.fit ? spec.budget.fit->tensor_parallel : 1;
  const RuntimeOption* parallel = view != nullptr && view->tensor_parallel ? &*view->tensor_parallel : nullptr;
  choice.gpus_unset = choice.gpus > 1 && parallel == nullptr;
  if (choice.gpus > 1 && parallel != nullptr) {
    for (std::optional<RuntimeOption>* o : {&choice.option, &choice.fallback_option, &choice.closest_option}) {
      if (*o) *o = with_tensor_parallel(**o, *parallel, choice.gpus);
    }
    if (spec.model) {
      choice.gpus_refused =
          broken_gpu_divisions(parallel->divides, spec.model->q_heads, spec.model->shape.kv_heads, choice.gpus);
    }
  }

  choice.allocation = runtime_allocation(spec, view, records, analysis, choice);

  // With a memory fit every option shown also carries the runtime's setting for its sequences.
  if (spec.budget.fit) {
    choice.context = memory_context(spec);
    choice.sequences = spec.budget.fit->sequences;
    const RuntimeOption* context = view != nullptr && view->context ? &*view->context : nullptr;
    choice.context_unset = context == nullptr;
    for (std::optional<RuntimeOption>* o : {&choice.option, &choice.fallback_option, &choice.closest_option}) {
      if (*o && context != nullptr) *o = with_context(**o, *context, choice.context, choice.sequences);
    }
    if (context != nullptr && context->cache_share) {
      choice.cache_share = context->cache_share;
      const std::optional<size_t> shown = choice.record ? choice.record : choice.closest;
      const std::optional<uint64_t> per_sequence =
          choice.allocation ? choice.allocation->bytes_per_sequence_per_gpu
          : shown           ? analysis.verdicts[*shown].bytes_per_sequence_per_gpu
                            : std::nullopt;
      if (per_sequence && *per_sequence > 0) {
        choice.sequences_in_share = share_cache_bytes(*spec.budget.fit, *context->cache_share) / *per_sequence;
      }
    }
  }

  choice.gap.objective = objective;
  if (!analysis.best) {
    choice.gap.kind = Gap::Kind::no_best;
    return choice;
  }
  // A research scheme, or a K/V pair the runtime cannot combine, is "not available" in it.
  choice.gap.best_expressible = std::any_of(candidates.begin(), candidates.end(),
                                            [&](const auto& c) { return c.first == *analysis.best; });
  if (!choice.gap.best_expressible && view != nullptr && !view->key_order.empty()) {
    const SweepRecord& best = records[*analysis.best];
    std::string k;
    try {
      k = in_key_order(best.k, view->key_order, *spec.registry);
    } catch (const InputError&) {  // a spec the pair order cannot wrap: not one of the runtime's
    }
    const auto same_types = [&](const RuntimeOption& o) { return o.k_spec == k && o.v_spec == best.v; };
    if (std::any_of(view->options.begin(), view->options.end(), same_types)) choice.gap.best_key_order = view->key_order;
  }
  if (candidates.empty()) {
    choice.gap.kind = Gap::Kind::none_evaluated;
  } else if (!choice.record) {
    choice.gap.kind = Gap::Kind::none_feasible;
  } else if (*choice.record != *analysis.best) {
    choice.gap.kind = Gap::Kind::behind;
  }
  return choice;
}

}  // namespace

const char* violation_kind_name(Violation::Kind kind) {
  switch (kind) {
    case Violation::Kind::failed: return "failed";
    case Violation::Kind::metric: return "metric";
    case Violation::Kind::no_samples: return "no_samples";
    case Violation::Kind::bits: return "bits";
    case Violation::Kind::memory_fit: return "memory_fit";
    case Violation::Kind::memory_unknown: return "memory_unknown";
    case Violation::Kind::no_model: return "no_model";
    case Violation::Kind::undecided: return "undecided";
  }
  return "?";
}

const char* gap_kind_name(Gap::Kind kind) {
  switch (kind) {
    case Gap::Kind::best: return "best";
    case Gap::Kind::no_best: return "no_best";
    case Gap::Kind::none_evaluated: return "none_evaluated";
    case Gap::Kind::none_feasible: return "none_feasible";
    case Gap::Kind::behind: return "behind";
  }
  return "?";
}

std::optional<MemoryEstimate> record_memory(const SweepSpec& spec, const SweepRecord& record, int64_t context) {
  if (!spec.model) return std::nullopt;
  MemoryModel memory(spec.model->shape, context, spec);
  try {
    return memory.estimate(record);
  } catch (const InputError&) {
    return std::nullopt;  // the scheme cannot store this head size: analyze_sweep says why
  }
}

std::vector<size_t> pareto_frontier(const std::vector<SweepRecord>& records,
                                    const std::function<double(const SweepRecord&)>& bits) {
  std::vector<size_t> order;
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i].ok && !std::isnan(err(records[i])) && !std::isnan(bits(records[i]))) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    const SweepRecord& a = records[x];
    const SweepRecord& b = records[y];
    if (bits(a) != bits(b)) return bits(a) < bits(b);
    if (err(a) != err(b)) return err(a) < err(b);
    return x < y;
  });
  std::vector<size_t> frontier;
  double lowest = std::numeric_limits<double>::infinity();
  for (size_t n = 0; n < order.size(); ++n) {
    const SweepRecord& r = records[order[n]];
    const bool first_of_bits = n == 0 || bits(records[order[n - 1]]) != bits(r);
    if (first_of_bits && err(r) < lowest) frontier.push_back(order[n]);
    lowest = std::min(lowest, err(r));
  }
  return frontier;
}

int64_t evaluated_context(const SweepSpec& spec) {
  // Context 0 (a capture's whole samples): its shortest selected sample.
  return spec.scenario.contexts.empty() || spec.scenario.contexts.front() == 0 ? spec.scenario.workload.tokens
                                                                                : spec.scenario.contexts.front();
}

int64_t memory_context(const SweepSpec& spec) {
  if (spec.serve_ctx > 0) return spec.serve_ctx;
  return spec.budget.fit && spec.budget.fit->ctx > 0 ? spec.budget.fit->ctx : evaluated_context(spec);
}

bool served_beyond_model_context(const SweepSpec& spec) {
  return spec.model && spec.model->max_context > 0 && memory_context(spec) > spec.model->max_context;
}

SweepAnalysis analyze_sweep(const SweepSpec& spec, const std::vector<SweepRecord>& records) {
  SweepAnalysis analysis;
  // Memory is reported whenever the workload names a model: at the served context (serve_ctx or
  // the fit's), else at the evaluated one.
  std::optional<MemoryModel> memory;
  if (spec.model) memory.emplace(spec.model->shape, memory_context(spec), spec);
  analysis.verdicts.reserve(records.size());
  for (const SweepRecord& r : records) analysis.verdicts.push_back(judge(spec, r, memory ? &*memory : nullptr));

  analysis.frontier = pareto_frontier(records);
  for (size_t i = 0; i < records.size(); ++i) {
    if (!analysis.verdicts[i].feasible) continue;
    if (!analysis.best || better(spec.budget.objective, records[i], i, records[*analysis.best], *analysis.best)) {
      analysis.best = i;
    }
  }
  if (!analysis.best) {
    for (size_t i = 0; i < records.size(); ++i) {
      if (records[i].ok && (!analysis.closest || closer(analysis, records, i, *analysis.closest))) analysis.closest = i;
    }
  }

  // First record of each (k, v): a merged sweep keeps one record per point.
  std::map<std::pair<std::string, std::string>, size_t> index;
  for (size_t i = 0; i < records.size(); ++i) {
    if (!records[i].derived()) index.emplace(std::pair{records[i].k, records[i].v}, i);
  }
  for (size_t i = 0; i < spec.runtimes.size(); ++i) {
    analysis.runtimes.push_back(choose(spec, i, records, analysis, index));
  }
  return analysis;
}

}  // namespace kvtune
