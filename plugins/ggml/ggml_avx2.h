// The fused round trips of the q8_0, q4_0, q5_0, q4_1, q5_1 and iq4_nl blocks on AVX2 with F16C,
// eight blocks at a time: each block's scale from one vector reduction over the eight, its f16
// rounding by F16C, then every element as the scalar codec computes it (the same operations in the
// same order, no FMA), so the results are the scalar fused round trips' bits (tested on ties, zero
// blocks, f16 overflow and subnormal scales, and equal magnitudes of both signs). iq4_nl's scale
// refit sums over a block in element order: there each lane holds one block, so every sum keeps
// the scalar order.
#pragma once

#include <cstdint>

namespace kvtune::builtin::ggml_avx2 {

enum class Format { q8_0, q8_0_x86, q4_0, q4_1, q5_0, q5_1, iq4_nl };  // ggml_kernels::Type's order

// Whether this machine has AVX2 and F16C (false on other architectures).
bool available();

// Round-trips the leading multiple of 8 of `blocks` 32-element blocks of x into y and returns how
// many it did; the caller does the rest. Only call when available().
int64_t roundtrip(Format format, const float* x, float* y, int64_t blocks);

}  // namespace kvtune::builtin::ggml_avx2
