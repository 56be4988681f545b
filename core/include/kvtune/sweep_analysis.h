// What a sweep's records mean against its budget: the feasible set, the Pareto frontier (bits per
// element vs rel_out_err), the best feasible configuration, and for each target runtime the best
// feasible configuration it can express (only its own options count), with the gap to the
// unconstrained best. Pure computation over records; kvtune/sweep_report.h renders it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvtune/memory.h"
#include "kvtune/sweep.h"
#include "kvtune/sweep_run.h"

namespace kvtune {

struct RecordVerdict {
  bool feasible = false;
  std::vector<std::string> violations;  // "rel_out_err 0.031 > 0.02", "needs 41.2 GiB > 40 GiB", ...
  std::optional<MemoryEstimate> memory; // per sequence at the fit context (or the evaluated one) for the model
  std::optional<uint64_t> sequences;    // that fit, with a fit budget
};

struct RuntimeChoice {
  RuntimeTarget target;
  std::string title;                 // "llama.cpp"
  std::string version;               // resolved
  std::optional<size_t> record;      // index into the records: the runtime's best feasible point
  std::optional<RuntimeOption> option;  // the option that realises it (settings to paste, caveats)
  std::optional<size_t> closest;     // no feasible option: the option point with the lowest error
  std::optional<RuntimeOption> closest_option;
  std::string gap;                   // to the unconstrained best, in words; empty when it is the best
};

struct SweepAnalysis {
  std::vector<RecordVerdict> verdicts;  // one per record
  std::vector<size_t> frontier;         // Pareto-optimal ok records, by bits ascending
  std::optional<size_t> best;           // fewest bits among the feasible, ties: lower rel_out_err
  std::vector<RuntimeChoice> runtimes;  // one per spec.runtimes
};

SweepAnalysis analyze_sweep(const SweepSpec& spec, const std::vector<SweepRecord>& records, const Registry& registry);

}  // namespace kvtune
