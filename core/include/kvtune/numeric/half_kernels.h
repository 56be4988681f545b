// Bulk float32 <-> f16/bf16 conversions, round to nearest even, bit-identical to the scalar
// functions in kvtune/numeric/half.h. f16 uses the F16C instructions when the CPU has them (their
// RNE mode is the IEEE conversion the scalar code implements); bf16 is branch-free integer code
// compiled for AVX2 and baseline.
#pragma once

#include <cstdint>

namespace kvtune::half_kernels {

void f32_to_f16(const float* x, uint16_t* out, int64_t n);
void f16_to_f32(const uint16_t* in, float* y, int64_t n);
void f32_to_bf16(const float* x, uint16_t* out, int64_t n);
void bf16_to_f32(const uint16_t* in, float* y, int64_t n);

// y = x rounded to f16 / bf16, without materializing the 16-bit codes.
void round_to_f16(const float* x, float* y, int64_t n);
void round_to_bf16(const float* x, float* y, int64_t n);

}  // namespace kvtune::half_kernels
