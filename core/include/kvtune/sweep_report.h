// Rendering a sweep's analysis (sweep_analysis.h): the console summary, and the files written
// beside results.jsonl: summary.json, frontier.csv and report.md. The console summary and report.md
// carry the same content: the workload, the budget, the Pareto frontier, the best feasible
// configuration and, per target runtime, the best configuration it can express with the settings
// to paste, its caveats and the gap to the best overall. A runtime whose options all miss the
// budget is said to, and its closest option is shown with its violations, never as a
// recommendation. Everything here is a pure function of the spec, the records and the analysis.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "kvtune/sweep.h"
#include "kvtune/sweep_analysis.h"
#include "kvtune/sweep_run.h"

namespace kvtune {

// The words of a violation ("rel_out_err 0.0312 > 0.02", "no needle samples", ...) and of a
// runtime's gap to the best overall (empty when its choice is the best).
std::string violation_text(const Violation& violation);
std::vector<std::string> violation_texts(const RecordVerdict& verdict);
std::string note_text(const SweepNote& note);
std::vector<std::string> note_texts(const std::vector<SweepNote>& notes);
std::string gap_text(const std::vector<SweepRecord>& records, const SweepAnalysis& analysis, const RuntimeChoice& choice);

// The console summary.
void print_sweep_summary(std::ostream& out, const SweepSpec& spec, const std::vector<SweepRecord>& records,
                         const SweepAnalysis& analysis);

// summary.json (pretty-printed, ending in a newline): name, source, spec_hash (16 hex digits),
// workload, objective, budget, counts, frontier, best, runtimes, notes. A point carries its specs,
// bits, every metric summary (null where it does not apply), feasibility, violations and memory.
std::string sweep_summary_json(const SweepSpec& spec, const std::vector<SweepRecord>& records,
                               const SweepAnalysis& analysis);

// frontier.csv: one line per frontier point under the header
// k,v,k_bits,v_bits,bits,rel_out_err,rel_out_err_p95,attn_kl_p95,needle_hit,bytes_per_token,feasible,
// exempt_layers,undecided,rel_out_err_lo,rel_out_err_hi,rel_out_err_p95_lo,rel_out_err_p95_hi,
// attn_kl_p95_lo,attn_kl_p95_hi,needle_hit_lo,needle_hit_hi,level
// (fields with commas or quotes are quoted; needle_hit and bytes_per_token empty when unknown, the
// interval ends and level empty when the record has no intervals).
std::string frontier_csv(const SweepSpec& spec, const std::vector<SweepRecord>& records, const SweepAnalysis& analysis);

// report.md: the console summary's content as Markdown.
std::string sweep_report_md(const SweepSpec& spec, const std::vector<SweepRecord>& records,
                            const SweepAnalysis& analysis);

// Writes summary.json, frontier.csv and report.md into `out_dir` (which must exist), each
// atomically. InputError naming the path when one cannot be written.
void write_sweep_report(const std::string& out_dir, const SweepSpec& spec, const std::vector<SweepRecord>& records,
                        const SweepAnalysis& analysis);

}  // namespace kvtune
