// What `sweep`, `merge` and `recommend` share: the context a sweep file is read in (registry,
// model presets, runtime tables from configs/), the output directory's inputs (sweep.toml as
// given, resolved.json as expanded), and the reports written and printed at the end.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvtune/sweep.h"
#include "kvtune/sweep_run.h"

namespace kvtune::cli {

inline constexpr const char* kSweepSpecFile = "sweep.toml";

// `registry`, configs/models and configs/runtimes (found relative to the executable).
SweepContext sweep_context(const Registry& registry);

// A sweep file's context: the command's registry plus the file's own `plugins = [...]`, which must
// be loaded before the file's candidates can be validated. Owns the registry it points to.
struct LoadedSweep {
  std::unique_ptr<Registry> registry;
  SweepSpec spec;
};
LoadedSweep load_sweep_with_plugins(std::string_view text, const std::string& source_name);

// Creates `out` and writes sweep.toml (the spec's text, so `merge` and `--resume` can re-read it)
// and resolved.json (candidates, points, runtimes and notes after expansion).
void prepare_out_dir(const std::string& out, const SweepSpec& spec);

// prepare_out_dir, then run_sweep.
std::vector<SweepRecord> run_and_record(const SweepSpec& spec, const Registry& registry, const SweepRunOptions& options);

// Analyses the records, writes summary.json, frontier.csv and report.md into `out`, and prints
// the console summary (or summary.json with `json`).
void report(const SweepSpec& spec, const Registry& registry, const std::vector<SweepRecord>& records,
            const std::string& out, bool json);

}  // namespace kvtune::cli
