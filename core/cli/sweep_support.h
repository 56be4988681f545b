// What `sweep`, `merge` and `recommend` share on the command line: the context a sweep file is read
// in (the command's registry and its plugins, model presets, runtime tables from configs/), Ctrl-C
// during a run, and the reports written and printed at the end. The sweep itself — reading,
// running, the output directory and merging — is the core's (kvtune/sweep*.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "progress_line.h"
#include "kvtune/sweep.h"
#include "kvtune/sweep_html.h"
#include "kvtune/sweep_run.h"

namespace kvtune::cli {

// The command's registry, configs/models and configs/runtimes (found relative to the executable),
// the file's plugins loaded on top, and expansion progress on `progress` (null: none).
SweepContext sweep_context(ProgressLine* progress = nullptr);

// Runs the sweep with Ctrl-C turned into a stop after the running batch, showing its progress on
// `progress` (stopped before anything else is printed). Returns the records, or nullopt after an
// interrupt (having said what was written and the command that resumes it).
std::optional<std::vector<SweepRecord>> run_interruptible(const SweepSpec& spec, SweepRunOptions run,
                                                          const std::string& resume_command, ProgressLine& progress);

// Analyses the records, writes summary.json, frontier.csv and report.md into `out` (and
// report.html with `html`, the chart scripts), and prints the console summary (or summary.json
// with `json`).
// Refuses (InputError) a report file of `out` that cannot be written because a directory (or, for
// report-charts/, a file) is in its place: checked before the evaluation, so a run is not refused
// after its results were written.
void check_report_outputs(const std::string& out, bool html);

void report(const SweepSpec& spec, const std::vector<SweepRecord>& records, const std::string& out, bool json,
            const std::optional<std::vector<ChartScript>>& html = std::nullopt);

// The exit status of an interrupted run (128 + SIGINT).
inline constexpr int kInterruptedStatus = 130;

}  // namespace kvtune::cli
