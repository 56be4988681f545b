#include "kvtune/eval_backend.h"

namespace kvtune {
namespace {

class CpuBackend final : public EvalBackend {
 public:
  std::string name() const override { return "cpu"; }
  void roundtrip(const Scheme& scheme, ConstMatrixView x, const QuantContext& ctx, MatrixView out) const override {
    scheme.roundtrip(x, ctx, out);
  }
  bool roundtrips_slices_cheaply() const override { return true; }
};

}  // namespace

EvalBackendPtr cpu_backend() {
  static const EvalBackendPtr backend = std::make_shared<CpuBackend>();
  return backend;
}

}  // namespace kvtune
