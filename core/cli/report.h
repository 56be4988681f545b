// Rendering evaluation results: the aligned console tables, the needle depth x context table, its
// CSV form and the JSON document. A scenario run is one EvalResult per context length.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "kvtune/evaluator.h"

namespace kvtune::cli {

void print_table(std::ostream& out, const EvalResult& result);

// Per pair: needle_hit (and needle_mass_ratio) by depth (rows) and context length (columns).
// Prints nothing when no run has needles.
void print_needle_tables(std::ostream& out, const std::vector<EvalResult>& runs);

// The same as CSV, one line per (pair, context, depth):
// pair,k,v,tokens,depth,needles,needle_hit,needle_mass_ratio,needle_hit_lo,needle_hit_hi,
// needle_mass_ratio_lo,needle_mass_ratio_hi (95 % intervals: Wilson for needle_hit, a bootstrap
// over the cases for needle_mass_ratio).
std::string needle_csv(const std::vector<EvalResult>& runs);

// {"name", "contexts", "cases", "head_dim", "queries_per_case", "rows"}: one row per pair and
// context, each with its "tokens", the metric summaries and "needle_depths".
nlohmann::json to_json(const std::string& name, const std::vector<EvalResult>& runs);

}  // namespace kvtune::cli
