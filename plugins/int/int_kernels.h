// The int family's hot loops over contiguous floats. Each has a portable definition by the formula
// (the `_exact` reference, division per element) and, on x86-64 with AVX2 (sixteen lanes with
// AVX-512), a fast path that multiplies by the reciprocal of the scale and falls back to division
// for any vector holding a value near a rounding tie, so its levels are identical to the reference
// (proof in int_kernels.cpp; tests/unit/int_kernels_test.cpp checks it on ties and random data).
#pragma once

#include <cstdint>

#include "kvtune/device_format.h"

namespace kvtune::builtin::int_kernels {

// lo[c] = min over rows of x[r, c], hi[c] = max, for a [rows, n] row-major block (rows >= 1).
void column_min_max(const float* x, int64_t rows, int64_t n, float* lo, float* hi);

// Min and max of x[0..n), n >= 1.
void min_max(const float* x, int64_t n, float& lo, float& hi);

// 1 / divisor when it is finite, else 0: the fast path's reciprocal, computed once per group.
// A zero reciprocal makes the kernels divide.
float fast_reciprocal(float divisor);

// One group per column: y[c] = level(x[c]) * out_scale[c] (+ out_min[c] when asymmetric), with
//   sym level  = rne(clamp(x / divisor, -qmax, qmax))
//   asym level = rne(clamp((x - minimum) / divisor, 0, top)).
// Passing out_scale = 1 and out_min = 0 yields the levels themselves. `reciprocal` holds
// fast_reciprocal(divisor[c]), or is null to divide.
void sym_columns(const float* x, const float* divisor, const float* reciprocal, const float* out_scale, float qmax,
                 float* y, int64_t n);
void asym_columns(const float* x, const float* minimum, const float* divisor, const float* reciprocal,
                  const float* out_scale, const float* out_min, float top, float* y, int64_t n);

// sym_columns / asym_columns on each row of a [rows, n] tile (row stride n), the same parameters
// for every row; on AVX-512 sixteen columns at a time down the rows, bit-identical. `stream` asks
// for non-temporal stores (streams_output() in plugins/streaming_stores.h must hold for y). `next`,
// when not null, is read ahead (prefetched) over the same [rows, n] extent while the tile runs: the
// rows the caller reads next.
void sym_column_tile(const float* x, int64_t rows, int64_t n, const float* divisor, const float* reciprocal,
                     const float* out_scale, float qmax, float* y, bool stream, const float* next);
void asym_column_tile(const float* x, int64_t rows, int64_t n, const float* minimum, const float* divisor,
                      const float* reciprocal, const float* out_scale, const float* out_min, float top, float* y,
                      bool stream, const float* next);

// One group for all n elements.
void sym_segment(const float* x, float divisor, float reciprocal, float out_scale, float qmax, float* y, int64_t n);
void asym_segment(const float* x, float minimum, float divisor, float reciprocal, float out_scale, float out_min,
                  float top, float* y, int64_t n);

// Round trip of a [rows, d] block with one group per `group` channels of each token (axis=token),
// its scale (and minimum) stored as `scale_type`, fused into one sweep per group. Returns false,
// doing nothing, where no fast path exists (no AVX2, group not a multiple of 8); the result is
// bit-identical to the generic path. `stream` asks for non-temporal stores where the groups run
// sixteen lanes wide (streams_output() in plugins/streaming_stores.h must hold for y).
bool token_groups(const float* x, int64_t rows, int64_t d, int64_t group, int bits, bool asym, ScaleType scale_type,
                  float* y, bool stream);

// The stored parameters of n groups from their extremes lo[g], hi[g]: minimum (0 when symmetric),
// scale, divisor and fast_reciprocal(divisor), each as the codec computes it (eight groups at a time
// on AVX2 + F16C, bit-identical). Returns whether every reciprocal is nonzero (the kernels may
// multiply by all of them).
bool group_params(const float* lo, const float* hi, int64_t n, int bits, bool asym, ScaleType scale_type,
                  float* minimum, float* scale, float* divisor, float* reciprocal);

// The references the fast paths must equal.
void sym_segment_exact(const float* x, float divisor, float out_scale, float qmax, float* y, int64_t n);
void asym_segment_exact(const float* x, float minimum, float divisor, float out_scale, float out_min, float top,
                        float* y, int64_t n);

}  // namespace kvtune::builtin::int_kernels
