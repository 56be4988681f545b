// The tokenint round trip of a whole block, compiled per x86 target (KVTUNE_MULTIVERSION) so that
// roundtrip_fitted_row's element loops and fit_row's extremes run in AVX-512 or AVX2 vectors where
// the machine has them. The arithmetic is tokenint_codec.h's, element for element.
#pragma once

#include <cstdint>

#include "tokenint_codec.h"

namespace kvtune::builtin::tokenint {

// y[r] = roundtrip_fitted_row(x[r], fit_row(x[r])) for each of `rows` rows of d floats (row-major,
// contiguous); x and y may be the same block.
void roundtrip_rows(const float* x, int64_t rows, int64_t d, const Config& c, float* y);

}  // namespace kvtune::builtin::tokenint
