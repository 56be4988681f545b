// The evaluator backend a command runs on: "cpu", or, in a build with the CUDA backend, "cuda" and
// "cuda-kernel" (kvtune/cuda/cuda_backend.h). The core only sees an EvalBackend.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "kvtune/eval_backend.h"
#include "kvtune/evaluator.h"

namespace kvtune::cli {

// Throws InputError naming `where` when the backend is unknown, was not built, or has no device.
EvalBackendPtr make_backend(const std::string& name, const std::string& where);

// Adds "backend_used" (PairResult::backend_used) to every row of a to_json document (report.h),
// whose rows are the runs' pairs in order, so a pair the fused kernel declined is never read as
// the kernel's.
void add_backend_used(nlohmann::json& doc, const std::vector<EvalResult>& runs);

// Console: one line per pair that did not run on result.backend, saying what computed it and why.
void print_backend_used(std::ostream& out, const EvalResult& result);

}  // namespace kvtune::cli
