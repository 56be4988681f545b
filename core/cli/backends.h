// The evaluator backend a command runs on: "cpu", or, in a build with the CUDA backend, "cuda" and
// "cuda-kernel" (kvtune/cuda/cuda_backend.h). The core only sees an EvalBackend.
#pragma once

#include <string>

#include "kvtune/eval_backend.h"

namespace kvtune::cli {

// Throws InputError naming `where` when the backend is unknown, was not built, or has no device.
EvalBackendPtr make_backend(const std::string& name, const std::string& where);

}  // namespace kvtune::cli
