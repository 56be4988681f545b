// Helpers of the suites that run the scenarios of sweeps/.
#pragma once

#include <cstddef>
#include <string>

#include "builtin.h"
#include "kvtune/evaluator.h"
#include "kvtune/scenario.h"

namespace kvtune::testing {

// sweeps/<file>, loaded.
inline Scenario scenario(const std::string& file) {
  return load_scenario(std::string(KVTUNE_SOURCE_DIR) + "/sweeps/" + file);
}

// The result of the scenario's first workload, with the builtin schemes.
inline EvalResult first_result(const Scenario& sc) { return evaluate_scenario(sc, builtin_registry()).at(0); }

// The mean of metric `m` over the cases of pair `pair`.
inline double mean(const EvalResult& r, size_t pair, Metric m) { return r.pairs.at(pair).summary(m).mean; }

}  // namespace kvtune::testing
