// What a sweep's records mean against its budget: the feasible set, the Pareto frontier (bits per
// element vs rel_out_err), the best feasible configuration, and for each target runtime the best
// feasible configuration it can express (only its own options count), with the gap to the
// unconstrained best. Pure computation over records: violations and gaps are data (kinds, metrics,
// bounds, values); kvtune/sweep_report.h renders them in words.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kvtune/memory.h"
#include "kvtune/sweep.h"
#include "kvtune/sweep_run.h"

namespace kvtune {

// Why a record misses the budget.
struct Violation {
  enum class Kind {
    failed,          // the point did not run; detail: its scheme's message
    metric,          // term does not hold for value
    no_samples,      // term's metric has no samples (e.g. no needles)
    bits,            // value (bits/element) > bound (max_bits)
    memory_fit,      // sequences wanted, fit of them fit: bytes_per_sequence each in free_bytes,
                     // both per GPU of `gpus` (tensor parallel; 1 GPU without)
    memory_unknown,  // the memory model refused a scheme for the model; detail: why
    no_model,        // a memory budget needs the workload's model preset
    undecided,       // budget.confidence: term's interval straddles its bound (or the record has
                     // no interval, `interval` then empty); value: the estimate
  };
  Kind kind = Kind::failed;
  BudgetTerm term;           // metric, no_samples, undecided
  double value = 0.0, bound = 0.0;
  // metric and undecided under budget.confidence: the statistic's interval at `level`.
  std::optional<Interval> interval;
  double level = 0.0;
  uint64_t sequences = 0, fit = 0, bytes_per_sequence = 0, free_bytes = 0;
  int64_t gpus = 1;          // memory_fit
  std::string detail;        // a scheme's own message (failed, memory_unknown)
};

const char* violation_kind_name(Violation::Kind kind);

// How a runtime's choice stands against the best configuration overall.
struct Gap {
  enum class Kind {
    best,            // the runtime's choice is the best overall
    no_best,         // no evaluated configuration meets the budget
    none_evaluated,  // none of the runtime's options was evaluated
    none_feasible,   // none of its options meets the budget; the best overall does
    behind,          // its best feasible option is not the best overall
  };
  Kind kind = Kind::best;
  bool best_expressible = true;  // the runtime can express the best overall configuration
  // Where it cannot only because it stores this model's keys in another channel order (the best
  // overall's types are its own, judged in the checkpoint's order): that pair order ("adjacent").
  std::string best_key_order;
  Objective objective = Objective::min_bits;  // what "behind" is measured in (bits, or error)
};

const char* gap_kind_name(Gap::Kind kind);

// RecordVerdict::excess, in words for reports.
inline constexpr const char* kViolationExcessMeasure =
    "the largest relative excess over a bound: (value - bound) / |bound|, or missing sequences / wanted";

struct RecordVerdict {
  bool feasible = false;
  // budget.confidence only: not feasible, yet nothing fails for sure either: every violation is an
  // interval straddling its bound. More cases or queries would decide it.
  bool undecided = false;
  std::vector<Violation> violations;
  // How far the record misses its budget: the largest relative excess over a bound among its
  // violations ((value - bound) / |bound| for an upper bound, (bound - value) / |bound| for a lower
  // one, (wanted - fitting) / wanted sequences for a memory fit). 0 when feasible; infinity when a
  // violation has no size (the point failed, a metric has no samples, memory is unknown). The
  // closest option is the one with the smallest excess (violation_excess_measure says so in words).
  double excess = 0.0;
  std::optional<MemoryEstimate> memory; // per sequence at the fit context (or the evaluated one) for the model
  std::optional<uint64_t> sequences;    // that fit, with a fit budget (on each GPU of its tensor_parallel)
  std::optional<uint64_t> bytes_per_sequence_per_gpu;  // with a fit budget: one GPU's share of memory->total_bytes
};

struct RuntimeChoice {
  RuntimeTarget target;
  std::string title;                 // "llama.cpp"
  std::string version;               // resolved
  std::optional<size_t> record;      // index into the records: the runtime's best feasible point
  std::optional<RuntimeOption> option;  // the option that realises it (settings to paste, caveats)
  std::optional<size_t> closest;     // no feasible option: the option point with the smallest excess
  std::optional<RuntimeOption> closest_option;
  // When the recommended option needs something the user may not have (settings.needs, e.g. a
  // checkpoint with calibrated scales): the best feasible option that needs nothing, if any.
  std::optional<size_t> fallback;
  std::optional<RuntimeOption> fallback_option;
  Gap gap;                           // to the unconstrained best (SweepAnalysis::best)
  // The fit's GPU count (budget.fit tensor_parallel; 1 without a fit). Above 1 the options carry the
  // version's [[tensor_parallel]] setting, or, where the table has none, gpus_unset says that no
  // setting for the GPUs is printed.
  int64_t gpus = 1;
  bool gpus_unset = false;
  // The [[tensor_parallel]] divisions (kTensorParallelDivides) the workload's model breaks on `gpus`
  // GPUs: the runtime would refuse to start it, whatever the option.
  std::vector<std::string> gpus_refused;
  // With a memory fit, the sequences of `context` tokens it asks for (both 0 without a fit): the
  // options carry the version's [[context]] setting for them, or, where the table has none,
  // context_unset says that no setting for them is printed.
  int64_t context = 0, sequences = 0;
  bool context_unset = false;
  // The [[context]] entry's default cache share, and how many sequences of the shown option (the
  // recommended one, else the closest) fit each GPU under it: the fit's count with the runtime's
  // own reserve (activations still not counted, so an upper bound).
  std::optional<CacheShare> cache_share;
  std::optional<uint64_t> sequences_in_share;
  // Where the [[context]] entry says how the runtime rounds each sequence's cells (RuntimeEntry::cells)
  // and that changes the shown option's memory: the cells one sequence gets, its bytes (the whole
  // model's and one GPU's) and, with a memory fit, how many such sequences fit each GPU. The share
  // above is then counted with these bytes.
  struct Allocation {
    AllocatedCells cells;
    uint64_t bytes_per_sequence = 0, bytes_per_sequence_per_gpu = 0;
    std::optional<uint64_t> sequences;
  };
  std::optional<Allocation> allocation;
};

struct SweepAnalysis {
  std::vector<RecordVerdict> verdicts;  // one per record
  std::vector<size_t> frontier;         // Pareto-optimal ok records, by bits ascending
  std::optional<size_t> best;           // fewest bits among the feasible, ties: lower rel_out_err
  std::optional<size_t> closest;        // nothing feasible: the ok record with the smallest excess
  std::vector<RuntimeChoice> runtimes;  // one per spec.runtimes
};

// The context the sweep evaluates (a capture's whole samples, context 0: its shortest sample).
int64_t evaluated_context(const SweepSpec& spec);
// The context the memory figures are for: serve_ctx, else the fit's with a fit budget, else the
// evaluated one.
int64_t memory_context(const SweepSpec& spec);
// A served context (memory_context) longer than the workload's model was trained for (its preset's
// max_context): runtimes refuse such a context limit or cap it unless rope scaling is set up.
bool served_beyond_model_context(const SweepSpec& spec);

// Memory comes from the spec's own schemes (SweepSpec::scheme).
SweepAnalysis analyze_sweep(const SweepSpec& spec, const std::vector<SweepRecord>& records);

// One sequence's cache for the workload's model at `context` tokens, as analyze_sweep counts it
// (exempt layers with their own storage); nullopt without a model or when a scheme cannot store
// the model's head size.
std::optional<MemoryEstimate> record_memory(const SweepSpec& spec, const SweepRecord& record, int64_t context);

// The Pareto-optimal ok records on (bits(record), mean rel_out_err), by bits ascending: a record is
// on it when it is the first of its bits value and its error is below every error at fewer bits
// (an exact tie keeps only its first record).
std::vector<size_t> pareto_frontier(const std::vector<SweepRecord>& records,
                                    const std::function<double(const SweepRecord&)>& bits = &SweepRecord::bits);

}  // namespace kvtune
