// The tokenint round trip of a whole block, compiled per x86 target (KVTUNE_MULTIVERSION) so that
// roundtrip_fitted_row's element loops run in AVX2 vectors where the machine has them. On AVX-512
// (D a multiple of 16) the rows' parameters are fitted sixteen rows at a time in vector lanes and
// their elements run in one kernel per convention; there the conventions that divide by the scale
// multiply by its reciprocal where that cannot change a code, and divide where it could
// (tokenint_kernels.cpp). The results are tokenint_codec.h's, element for element and row for row.
#pragma once

#include <cstdint>

#include "tokenint_codec.h"

namespace kvtune::builtin::tokenint {

// p[r] = fit_row(x[r]) for each of `rows` rows of d floats (row-major, contiguous), field for
// field: on AVX-512 and d a multiple of 16, sixteen rows at a time in vector lanes.
void fit_rows(const float* x, int64_t rows, int64_t d, const Config& c, RowParams* p);

// y[r] = roundtrip_fitted_row(x[r], fit_row(x[r])) for each of `rows` rows of d floats; x and y
// may be the same block.
void roundtrip_rows(const float* x, int64_t rows, int64_t d, const Config& c, float* y);

}  // namespace kvtune::builtin::tokenint
