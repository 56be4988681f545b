#include "tokenint_kernels.h"

#include "kvtune/numeric/multiversion.h"

namespace kvtune::builtin::tokenint {

KVTUNE_MULTIVERSION void roundtrip_rows(const float* x, int64_t rows, int64_t d, const Config& c, float* y) {
  for (int64_t r = 0; r < rows; ++r) roundtrip_row(x + r * d, d, c, y + r * d);
}

}  // namespace kvtune::builtin::tokenint
