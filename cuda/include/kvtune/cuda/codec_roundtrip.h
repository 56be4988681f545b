// Device round trips through the shared codec headers (see cuda/src/codec_roundtrip.cu). Host
// dispatchers return cudaError_t and never allocate: the caller owns the device buffers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kvtune::cuda {

enum class GgmlType { q8_0, q8_0_x86, q4_0, q4_1, q5_0, q5_1, iq4_nl };

// y[blocks * 32] = dequantize(quantize(x)) in ggml's block format `type`; device pointers.
cudaError_t ggml_roundtrip(GgmlType type, const float* x, float* y, int64_t blocks, cudaStream_t stream = nullptr);

// y[n] = fp8(x / scale) * scale, E4M3 or E5M2 with saturation (cuda_fp8.h's __NV_SATFINITE); device pointers.
cudaError_t fp8_roundtrip(const float* x, float* y, int64_t n, float scale, bool e5m2, cudaStream_t stream = nullptr);

}  // namespace kvtune::cuda
