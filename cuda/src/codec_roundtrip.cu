// Element-wise device round trips of the shared codec headers. Compiling this file with nvcc
// in CI keeps the invariant that every in-tree codec is valid device code;
// tests/gpu/codec_roundtrip_test.cpp compares the results bit for bit with the CPU codecs.
#include <cuda_runtime.h>

#include <cstdint>

#include "kvtune/codecs/fp8_codec.h"
#include "kvtune/codecs/ggml_blocks.h"
#include "kvtune/codecs/hadamard.h"
#include "kvtune/codecs/int_codec.h"
#include "kvtune/cuda/codec_roundtrip.h"
#include "launch.cuh"

namespace kvtune::cuda {
namespace {

// One thread per 32-element ggml block: quantize into registers, dequantize back.
template <void (*Quantize)(const float*, uint8_t*), void (*Dequantize)(const uint8_t*, float*)>
__global__ void ggml_roundtrip_kernel(const float* x, float* y, int64_t blocks) {  // x, y: [blocks * 32]
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= blocks) return;
  uint8_t packed[ggml::kMaxBlockBytes];
  Quantize(x + i * ggml::kBlock, packed);
  Dequantize(packed, y + i * ggml::kBlock);
}

// One thread per element: fp8 encode then decode with a fixed scale (quantize divides by it).
__global__ void fp8_roundtrip_kernel(const float* x, float* y, int64_t n, float scale, bool e5m2) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float v = x[i] / scale;
  y[i] = (e5m2 ? codec::fp8_e5m2_to_f32(codec::f32_to_fp8_e5m2(v)) : codec::fp8_e4m3_to_f32(codec::f32_to_fp8_e4m3(v))) * scale;
}

}  // namespace

cudaError_t ggml_roundtrip(GgmlType type, const float* x, float* y, int64_t blocks, cudaStream_t stream) {
  if (blocks <= 0) return cudaSuccess;
  const int threads = 128;
  const unsigned grid = static_cast<unsigned>((blocks + threads - 1) / threads);
  switch (type) {
    case GgmlType::q8_0:
      return detail::launch(ggml_roundtrip_kernel<ggml::quantize_q8_0, ggml::dequantize_q8_0>, grid, threads, stream, x, y, blocks);
    case GgmlType::q8_0_x86:
      return detail::launch(ggml_roundtrip_kernel<ggml::quantize_q8_0_x86, ggml::dequantize_q8_0>, grid, threads, stream, x, y, blocks);
    case GgmlType::q4_0:
      return detail::launch(ggml_roundtrip_kernel<ggml::quantize_q4_0, ggml::dequantize_q4_0>, grid, threads, stream, x, y, blocks);
    case GgmlType::q4_1:
      return detail::launch(ggml_roundtrip_kernel<ggml::quantize_q4_1, ggml::dequantize_q4_1>, grid, threads, stream, x, y, blocks);
    case GgmlType::q5_0:
      return detail::launch(ggml_roundtrip_kernel<ggml::quantize_q5_0, ggml::dequantize_q5_0>, grid, threads, stream, x, y, blocks);
    case GgmlType::q5_1:
      return detail::launch(ggml_roundtrip_kernel<ggml::quantize_q5_1, ggml::dequantize_q5_1>, grid, threads, stream, x, y, blocks);
    case GgmlType::iq4_nl:
      return detail::launch(ggml_roundtrip_kernel<ggml::quantize_iq4_nl, ggml::dequantize_iq4_nl>, grid, threads, stream, x, y, blocks);
    default:
      return cudaErrorInvalidValue;  // a GgmlType this file does not know
  }
}

cudaError_t fp8_roundtrip(const float* x, float* y, int64_t n, float scale, bool e5m2, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const int threads = 256;
  const unsigned grid = static_cast<unsigned>((n + threads - 1) / threads);
  return detail::launch(fp8_roundtrip_kernel, grid, threads, stream, x, y, n, scale, e5m2);
}

}  // namespace kvtune::cuda
