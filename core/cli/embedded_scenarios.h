// Scenario files compiled into the binary, so `kvtune simulate` runs with no arguments.
#pragma once

namespace kvtune::cli {

extern const char* const kDefaultScenario;      // sweeps/seed-table.toml
extern const char* const kDefaultScenarioName;  // "sweeps/seed-table.toml (embedded)"

}  // namespace kvtune::cli
