#include "backends.h"

#include <algorithm>

#include "kvtune/error.h"
#include "kvtune/scenario.h"

#if KVTUNE_WITH_CUDA
#include "kvtune/cuda/cuda_backend.h"
#endif

namespace kvtune::cli {

EvalBackendPtr make_backend(const std::string& name, const std::string& where) {
  if (std::find(kEvalBackends.begin(), kEvalBackends.end(), name) == kEvalBackends.end()) {
    std::string valid;
    for (const std::string& b : kEvalBackends) valid += (valid.empty() ? "" : ", ") + b;
    throw InputError(where + ": unknown backend '" + name + "'; expected one of: " + valid);
  }
  if (name == "cpu") return cpu_backend();
#if KVTUNE_WITH_CUDA
  return cuda::make_cuda_backend(name == "cuda-kernel", where);
#else
  throw InputError(where + ": backend '" + name +
                   "' needs the CUDA backend, and this kvtune was built without it (configure with the CUDA "
                   "toolkit installed, -DKVTUNE_CUDA=ON)");
#endif
}

}  // namespace kvtune::cli
