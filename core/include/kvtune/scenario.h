// Scenario files (TOML) for `kvtune simulate`: a workload, its seeds, metric options and a list of
// K/V scheme pairs. Every error names file:line:column and what was expected.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvtune/evaluator.h"
#include "kvtune/registry.h"
#include "kvtune/workload.h"

namespace kvtune {

struct PairRequest {
  std::string name;   // label; the specs when not given
  std::string k, v;   // scheme specs
  std::string where;  // "file:line:col" or "--pair ..." for error messages
};

struct Scenario {
  std::string name;
  WorkloadConfig workload;
  std::vector<uint64_t> seeds{0};
  int64_t topk = 8;
  std::vector<PairRequest> pairs;
};

Scenario parse_scenario(std::string_view text, const std::string& source_name);
Scenario load_scenario(const std::string& path);

// Builds an evaluation plan: one scheme per distinct canonical K spec and V spec (the separable
// evaluation quantizes each once). Errors are prefixed with the pair's `where`.
EvalPlan build_plan(const std::vector<PairRequest>& pairs, const Registry& registry, int64_t topk);

}  // namespace kvtune
