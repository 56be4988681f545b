// The parts of a scenario file that sweep files share verbatim: the [workload] table and the
// top-level seeds. Internal to core/src (toml++ never reaches a public header); defined in
// scenario.cpp, so a scenario and a sweep describe the same workload with the same keys and errors.
#pragma once

#include <string>

#include "kvtune/scenario.h"
#include "toml_reader.h"

namespace kvtune::detail {

// Reads [workload] into sc.workload, sc.contexts, sc.model, sc.layers and sc.heads.
void read_workload(TableReader w, const ModelLookup& models, const ProfileLookup& profiles, Scenario& sc);

// Checks the workload at each of sc.contexts; errors name source_name and [workload].
void validate_workload(const Scenario& sc, const std::string& source_name);

// Reads `seeds` (a count, with an optional `seed_start`, or an array) into sc.seeds.
void read_seeds(TableReader& top, Scenario& sc);

// Reads the top-level `backend` (one of kEvalBackends) into sc.backend.
void read_backend(TableReader& top, Scenario& sc);
// The [metrics] table: topk and precision.
void read_metrics(TableReader& top, Scenario& sc);

// The [workload] keys that describe a synthetic workload: a capture (source = "cache") brings its
// own shape and statistics, so the scenario reader refuses them beside it and a sweep override
// to a capture drops them.
inline constexpr const char* kSyntheticWorkloadKeys[] = {
    "model", "profile", "head_dim", "num_layers", "kv_heads", "q_per_kv", "queries", "keys", "values",
    "queries_profile", "rope", "sinks", "recency", "calibration", "overrides", "sliding_window",
    "sliding_layers", "logit_softcap"};

}  // namespace kvtune::detail
