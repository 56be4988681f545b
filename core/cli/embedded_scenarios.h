// Files compiled into the binary, so `kvtune simulate`, `kvtune sweep` and `kvtune recommend` run
// with no files of their own.
#pragma once

namespace kvtune::cli {

extern const char* const kDefaultScenario;      // sweeps/seed-table.toml
extern const char* const kDefaultScenarioName;  // "sweeps/seed-table.toml (embedded)"
extern const char* const kDefaultSweep;         // sweeps/default.toml
extern const char* const kDefaultSweepName;     // "sweeps/default.toml (embedded)"
extern const char* const kRecommendTemplate;    // sweeps/recommend.toml (recommend overrides model, context, budget)

}  // namespace kvtune::cli
