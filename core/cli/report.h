// Rendering evaluation results: the aligned console table and the JSON document.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "kvtune/evaluator.h"

namespace kvtune::cli {

void print_table(std::ostream& out, const EvalResult& result);
nlohmann::json to_json(const EvalResult& result);

}  // namespace kvtune::cli
