// The int family's hot loops over contiguous floats, compiled for AVX2 and for baseline x86-64
// and picked at run time (GCC target_clones), so one binary runs everywhere and vectorizes where
// it can. Every loop is element-wise or per-lane, so the result is identical on both paths.
#pragma once

#include <cstdint>

namespace kvtune::builtin::int_kernels {

// lo[c] = min(lo[c], x[c]), hi[c] = max(hi[c], x[c]) for c < n.
void column_min_max(const float* x, int64_t n, float* lo, float* hi);

// Min and max of x[0..n).
void min_max(const float* x, int64_t n, float& lo, float& hi);

// Per-element parameters (one group per column):
//   y[c] = level(x[c]) * out_scale[c] (+ out_min[c] when asymmetric).
// Passing out_scale = 1 and out_min = 0 yields the levels themselves.
void sym_columns(const float* x, const float* divisor, const float* out_scale, float qmax, float* y, int64_t n);
void asym_columns(const float* x, const float* minimum, const float* divisor, const float* out_scale,
                  const float* out_min, float top, float* y, int64_t n);

// One group for all n elements.
void sym_segment(const float* x, float divisor, float out_scale, float qmax, float* y, int64_t n);
void asym_segment(const float* x, float minimum, float divisor, float out_scale, float out_min, float top, float* y,
                  int64_t n);

}  // namespace kvtune::builtin::int_kernels
