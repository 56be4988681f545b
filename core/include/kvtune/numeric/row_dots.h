// Many dot products of double rows against float key rows, as the synthetic workload's sink tilt
// and needles take them (workload.cpp).
#pragma once

#include <cstdint>

namespace kvtune {

// out[i * t + j] = rows[i * d + 0] * keys[j * d + 0] + ... + rows[i * d + d - 1] * keys[j * d + d - 1]
// for every row i < n and key j < t, each summed from 0.0 in the order e = 0, 1, ..., d - 1 with
// every product and sum rounded (the bits of the one-pair loop `s += a[e] * b[e]`), eight keys at
// a time in the lanes of a vector.
void row_key_dots(const double* rows, int64_t n, const float* keys, int64_t t, int64_t d, double* out);

}  // namespace kvtune
