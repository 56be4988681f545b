// A plain description of a scheme's packed layout that CUDA kernels understand (DESIGN §3).
// Fused kernels can only decode the codec kinds listed here; a scheme without a device format
// runs on the CPU path or through its own whole-kernel launches. Where each byte of a format
// lives is computed from this struct by kvtune/codecs/packed_layout.h.
#pragma once

#include <cstdint>

namespace kvtune {

// The ggml kinds are llama.cpp's block types (kvtune/codecs/ggml_blocks.h); q8_0_x86 stores the
// same bytes as q8_0 but is quantized the way ggml-cpu's x86 path rounds. The block-scaled floats
// (kvtune/codecs/microscale.h) keep one scale per `group` consecutive channels of a token:
// mxfp4 (E2M1, E8M0 scale), mxfp8 (E4M3, E8M0 scale), nvfp4 (E2M1, E4M3 scale, an f32 per block).
enum class CodecKind : uint8_t {
  f32 = 0, f16 = 1, bf16 = 2, integer = 3, fp8_e4m3 = 4, fp8_e5m2 = 5,
  q8_0 = 6, q8_0_x86 = 7, q4_0 = 8, q4_1 = 9, q5_0 = 10, q5_1 = 11, iq4_nl = 12,
  mxfp4 = 13, mxfp8 = 14, nvfp4 = 15,
};
enum class GroupAxis : uint8_t { tensor = 0, channel = 1, token = 2 };
enum class ScaleType : uint8_t { f32 = 0, f16 = 1, bf16 = 2 };

struct DeviceFormat {
  CodecKind kind = CodecKind::f32;
  uint8_t bits = 32;                 // payload bits per element
  GroupAxis axis = GroupAxis::tensor;
  int32_t group = 0;                 // elements per group along the other axis; 0 = whole axis
  ScaleType scale_type = ScaleType::f32;
  bool asymmetric = false;           // scale and minimum per group (x = code * scale + min)
  bool scales_stored = true;         // false: the block holds no scales and the scale is 1 (fp8 scale=unit)
  float static_scale = 0.0f;         // fp8 with a fixed (or calibrated) scale, nvfp4 with a fixed per-tensor
                                     // scale: that scale; 0 = fitted per block
  float tensor_bound = 0.0f;         // nvfp4 with a fitted per-tensor scale: amax / tensor_bound (0: 448 * 6)
  bool ties_away = false;            // E2M1 elements (mxfp4, nvfp4): a tie rounds away from zero as
                                     // SGLang's fp4_mx_block16 does; false: to even, as CUDA's cvt
};

}  // namespace kvtune
