// The microscale families' hot loops: the largest magnitude of each scale block and the E2M1
// round trip of each block through its scale, branch-free and compiled per target so they
// vectorize; bit-identical to the codec (kvtune/codecs/microscale.h), which stays the reference
// (MicroSchemes.FusedRoundTripIsThePackedOne, Microscale.E2m1RoundIsTheCodecsRoundTrip,
// Microscale.BlockRoundTripLoopIsTheCodecs).
#pragma once

#include <cstdint>

namespace kvtune::builtin::microscale_kernels {

// amax[k] = the largest |x| of block k (`block` = 16 or 32 floats), as the sequential scan
// `a > amax ? a : amax` from +0 finds it (NaNs skipped, a -0 leaves +0).
void block_abs_max(const float* x, int64_t blocks, int64_t block, float* amax);

// The scale of each block from its amax, in place, as MicroScheme's codec calls give it:
// e8m0_to_f32(mx_scale_code(amax, e)) with the element maximum `element_max` (6 or 448), or, with
// `nvfp4_global` > 0, nvfp4_block_scale(nvfp4_block_code(amax, global), global).
void scales_from_amax(float* amax, int64_t blocks, float element_max, float nvfp4_global);

// y = e2m1 value of (x / scale[k]) times scale[k] for every element of block k; a scale that is
// not > 0 stores zeros (micro_quantize's rule).
// `ahead`: how many blocks after the run x holds, read ahead (prefetched) one block per block
// computed on AVX-512, so the next run's maxima find them in cache.
void e2m1_roundtrip(const float* x, const float* scale, int64_t blocks, int64_t block, bool ties_away, float* y,
                    int64_t ahead);

}  // namespace kvtune::builtin::microscale_kernels
