// Whole-tensor loops over ggml blocks with the block codecs inlined, compiled for AVX2 and for
// baseline x86-64 and chosen at run time. The codecs are element-wise within a block, so both
// builds give identical bytes.
#pragma once

#include <cstdint>

namespace kvtune::builtin::ggml_kernels {

enum class Type { q8_0, q8_0_x86, q4_0, q4_1, q5_0, q5_1, iq4_nl };

// x[blocks * 32] -> packed[blocks * B] and back, B the bytes of one 32-element block of `type`
// (the ggml::k*Bytes constant, codec::ggml_block_bytes of its CodecKind).
void quantize(Type type, const float* x, uint8_t* packed, int64_t blocks);
void dequantize(Type type, const uint8_t* packed, float* y, int64_t blocks);

// dequantize(quantize(x)) one block at a time, without materializing the packed tensor.
void roundtrip(Type type, const float* x, float* y, int64_t blocks);

}  // namespace kvtune::builtin::ggml_kernels
