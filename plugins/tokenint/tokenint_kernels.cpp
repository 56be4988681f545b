#include "tokenint_kernels.h"

#include "kvtune/numeric/multiversion.h"

namespace kvtune::builtin::tokenint {

KVTUNE_MULTIVERSION void roundtrip_rows(const float* x, int64_t rows, int64_t d, const Config& c, float* y) {
  if (rows <= 0) return;
  RowParams next = fit_row(x, d, c);
  for (int64_t r = 0; r < rows; ++r) {
    const RowParams p = next;
    // The next row's parameters before this row's elements: their chain of dependent steps (the
    // extremes, a division, the reciprocal) then runs beside this row's element loop.
    if (r + 1 < rows) next = fit_row(x + (r + 1) * d, d, c);
    roundtrip_fitted_row(x + r * d, d, c, p, y + r * d);
  }
}

}  // namespace kvtune::builtin::tokenint
