// A packed KV cache on the device and the kernels that fill and read it. Plain C++ header (no
// CUDA types beyond cudaError_t/cudaStream_t); kernels take raw pointers and one params struct,
// never allocate, and return cudaError_t (STYLE.md, FlashInfer/ggml-cuda).
//
// Layout: for every (sequence b, KV head h) one region at
//   cache + b * seq_stride + h * head_stride
// holding a scheme's packed block of `capacity` tokens exactly as the CPU scheme's quantize()
// writes a [capacity, head_dim] block (kvtune/codecs/packed_layout.h). A region filled with all
// `capacity` tokens is byte for byte the CPU's bytes. seq_stride may be 0: every sequence then
// reads the same regions (many queries over one cache, as the simulator's evaluator does). The
// kernels load 16 bytes at a time: `cache`, head_stride and seq_stride must be multiples of 16
// (dense_cache rounds regions up to 16; cudaMalloc returns 256-byte aligned memory).
// Scale convention: quantize divides by the scale, dequantize multiplies.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kvtune/device_format.h"

namespace kvtune::cuda {

struct CacheDesc {
  DeviceFormat format;
  int32_t head_dim = 0;
  int64_t capacity = 0;     // tokens per region
  int32_t kv_heads = 0;
  int64_t head_stride = 0;  // bytes between the regions of consecutive KV heads (>= region_bytes())
  int64_t seq_stride = 0;   // bytes between sequences (>= kv_heads * head_stride, or 0: shared)
};

// Bytes of one region: the CPU scheme's footprint(capacity, head_dim).
int64_t region_bytes(const DeviceFormat& format, int64_t capacity, int32_t head_dim);

// A dense cache: regions back to back, each rounded up to 16 bytes.
CacheDesc dense_cache(const DeviceFormat& format, int64_t capacity, int32_t head_dim, int32_t kv_heads);

// Bytes a dense cache of `batch` sequences occupies.
int64_t cache_bytes(const CacheDesc& cache, int32_t batch);

// Appends new_tokens tokens at positions [first_token, first_token + new_tokens) of every region.
// Formats whose scale is fitted over the whole block (codec::needs_whole_block) need
// first_token = 0 and new_tokens = capacity; per-channel groups of G tokens need first_token a
// multiple of G and an end that is a multiple of G or the capacity (callers keep the partial
// group, like KIVI's residual); integer codes must start and end on a byte (first_token * head_dim
// * bits and the end's a multiple of 8, or the end is the capacity), because a byte shared with
// tokens outside the call cannot be written whole. Anything else returns cudaErrorInvalidValue
// before launching.
struct QuantizeParams {
  const float* x = nullptr;  // [batch, kv_heads, new_tokens, head_dim] float32, device
  uint8_t* cache = nullptr;  // regions as described by `cache`, device
  CacheDesc cache_desc;
  int32_t batch = 0;
  int64_t first_token = 0;
  int64_t new_tokens = 0;
};
cudaError_t quantize_append(const QuantizeParams& p, cudaStream_t stream = nullptr);

// out = the dequantized first `tokens` tokens of every region.
struct DequantizeParams {
  const uint8_t* cache = nullptr;  // device
  CacheDesc cache_desc;
  float* out = nullptr;  // [batch, kv_heads, tokens, head_dim] float32, device
  int32_t batch = 0;
  int64_t tokens = 0;
};
cudaError_t dequantize(const DequantizeParams& p, cudaStream_t stream = nullptr);

}  // namespace kvtune::cuda
