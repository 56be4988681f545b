// The fp8 family's hot loops over contiguous floats: branch-free, vectorizable versions of the
// codec in kvtune/codecs/fp8_codec.h (which stays the reference), bit-identical to it for every
// float input (tests/unit/fp8_fast_test.cpp checks all 2^32 patterns).
#pragma once

#include <cstdint>

#include "kvtune/codecs/fp8_codec.h"

namespace kvtune::builtin::fp8_kernels {

// y[i] = fp8_dequantize(fp8_quantize(x[i], scale, format), scale, format).
void roundtrip(const float* x, float scale, float* y, int64_t n, codec::Fp8Format format);

// roundtrip() of each row of a [rows, cols] block at its own scale, fp8_fit_scale(abs_max(row)):
// the per-token dynamic mode.
void roundtrip_per_row(const float* x, int64_t rows, int64_t cols, float* y, codec::Fp8Format format);

// roundtrip() of `blocks` consecutive blocks of `block` floats, block k at scale[k] (the MX
// formats' E4M3 elements): one call for the whole run instead of one per block. `ahead`: how many
// blocks after the run x holds, read ahead (prefetched) one block per block computed on AVX-512.
void roundtrip_blocks(const float* x, const float* scale, int64_t blocks, int64_t block, float* y,
                      codec::Fp8Format format, int64_t ahead);

// codes[i] = fp8_quantize(x[i], scale, format).
void quantize(const float* x, float scale, uint8_t* codes, int64_t n, codec::Fp8Format format);

// y[i] = fp8_dequantize(codes[i], scale, format).
void dequantize(const uint8_t* codes, float scale, float* y, int64_t n, codec::Fp8Format format);

// max(0, max |x[i]|) over the non-NaN x[i], as the sequential std::max(amax, |x[i]|) computes it.
float abs_max(const float* x, int64_t n);

}  // namespace kvtune::builtin::fp8_kernels
