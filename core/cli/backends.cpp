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

void add_backend_used(nlohmann::json& doc, const std::vector<EvalResult>& runs) {
  nlohmann::json& rows = doc.at("rows");
  size_t row = 0;
  for (const EvalResult& r : runs) {
    for (const PairResult& p : r.pairs) rows.at(row++)["backend_used"] = p.backend_used;
  }
}

void print_backend_used(std::ostream& out, const EvalResult& result) {
  for (const PairResult& p : result.pairs) {
    if (p.backend_used == result.backend) continue;
    out << "  " << p.name << ": attention by " << p.backend_used << "; rel_out_err above is the simulator's\n";
  }
}

}  // namespace kvtune::cli
