// The packed KV cache's fill and read kernels. Every byte is written by the host+device steps of
// kvtune/codecs/packed_layout.h (the same functions the CPU layout tests run), so a region filled
// with all `capacity` tokens is byte for byte the CPU scheme's quantize() of that block.
//
// quantize_append runs in launches on one stream, each after the previous one completed:
//   1. fit the groups the new tokens touch (scales, minima):
//        narrow groups (per token, per channel group, fp8 per token or fixed scale):
//          fit_groups_kernel, one thread per group (encode_group);
//        whole-block groups (axis=tensor, axis=channel without a group, fp8 dynamic per block):
//          block_range_kernel / channel_range_kernel reduce chunks of tokens in parallel; with
//          more than one chunk the per-chunk ranges go to scratch space inside the region's code
//          bytes (rewritten in step 2: a whole-block call rewrites every code) and
//          combine_ranges_kernel folds them into store_group. min and max are exact in any order.
//   2. encode_units_kernel: one thread per payload unit of the new tokens (encode_unit), which
//      reads the scales of step 1 back.
// Each kernel loops over regions (sequence b, KV head h) along grid y and over its work along grid
// x, in int64 with grid-stride loops: a cache can hold more than 2^31 elements.
// Scale convention: quantize divides by the scale, dequantize multiplies.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kvtune/codecs/packed_layout.h"
#include "kvtune/cuda/kv_cache.h"
#include "launch.cuh"

namespace kvtune::cuda {
namespace {

using codec::PackedLayout;

constexpr int kThreads = 256;
constexpr int64_t kMaxGridY = 65535;                  // hardware limit of gridDim.y
constexpr int64_t kMaxBlocks = int64_t{1} << 20;      // per launch; beyond it the grid-stride loops take over
constexpr int64_t kChunkElements = int64_t{1} << 16;  // elements one block reduces in a whole-block fit

// Where the regions of a cache lie: region r = b * kv_heads + h starts at
// cache + b * seq_stride + h * head_stride.
struct Regions {
  int64_t count = 0;  // batch * kv_heads
  int64_t kv_heads = 1;
  int64_t head_stride = 0;  // bytes
  int64_t seq_stride = 0;   // bytes; 0: every sequence reads the same regions
};

__device__ __forceinline__ int64_t region_offset(const Regions& R, int64_t r) {
  return (r / R.kv_heads) * R.seq_stride + (r % R.kv_heads) * R.head_stride;
}

// The float being quantized at (token t, channel c) of one region, t in the call's tokens.
struct TokenSource {
  const float* x;       // [new_tokens, head_dim] float32: the region's rows of the call's input
  int64_t first_token;  // the token row 0 of x holds
  int64_t head_dim;
  KVTUNE_HD float operator()(int64_t t, int64_t c) const { return x[(t - first_token) * head_dim + c]; }
};

__device__ __forceinline__ float positive_infinity() { return __int_as_float(0x7f800000); }

// The comparisons of codec::encode_group's scan. An empty range is (+inf, -inf).
__device__ __forceinline__ void merge(float other_lo, float other_hi, float& lo, float& hi) {
  lo = other_lo < lo ? other_lo : lo;
  hi = other_hi > hi ? other_hi : hi;
}
__device__ __forceinline__ void fold(float v, float& lo, float& hi) { merge(v, v, lo, hi); }

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Per-chunk ranges of a whole-block fit: (lo, hi) float pairs [chunks][groups], at the first
// 8-byte boundary of the region's code bytes (the host checked they fit).
__device__ __forceinline__ float* chunk_ranges(uint8_t* packed, const PackedLayout& L) {
  const uintptr_t code = reinterpret_cast<uintptr_t>(packed + L.code_offset);
  return reinterpret_cast<float*>((code + 7) & ~uintptr_t{7});
}

// Phase 1, narrow groups: one thread per group [g0, g0 + groups) of every region; each group
// reads only tokens of the call (the alignment rules quantize_append checks).
__global__ void __launch_bounds__(kThreads)
    fit_groups_kernel(const float* x,  // [regions, new_tokens, head_dim] float32
                      uint8_t* cache,  // regions as `regions` describes
                      Regions regions, PackedLayout L, int64_t first_token, int64_t new_tokens, int64_t g0,
                      int64_t groups) {
  for (int64_t r = blockIdx.y; r < regions.count; r += gridDim.y) {
    uint8_t* packed = cache + region_offset(regions, r);  // [L.bytes]: region r's block
    const TokenSource src{x + r * new_tokens * L.head_dim, first_token, L.head_dim};
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < groups; i += int64_t(gridDim.x) * blockDim.x) {
      codec::encode_group(L, packed, g0 + i, src);  // a fixed fp8 scale reads no element
    }
  }
}

// Block-wide (lo, hi) of every thread's; the result is in thread 0. Every thread calls it.
__device__ __forceinline__ void block_range(float& lo, float& hi, float* s_lo, float* s_hi) {  // s_*: [kThreads/32]
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float other_lo = __shfl_xor_sync(0xffffffffu, lo, offset);
    const float other_hi = __shfl_xor_sync(0xffffffffu, hi, offset);
    merge(other_lo, other_hi, lo, hi);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // the previous call's thread 0 has read s_lo / s_hi
  if (lane == 0) {
    s_lo[warp] = lo;
    s_hi[warp] = hi;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) merge(s_lo[w], s_hi[w], lo, hi);
  }
}

// Phase 1, one group over the whole block (axis=tensor, fp8 dynamic per block): block (k, r)
// reduces tokens [k * rows_per_chunk, ...) of region r. One chunk stores the group directly.
__global__ void __launch_bounds__(kThreads)
    block_range_kernel(const float* x,  // [regions, capacity, head_dim] float32
                       uint8_t* cache,  // regions as `regions` describes
                       Regions regions, PackedLayout L, int64_t rows_per_chunk, int64_t chunks) {
  __shared__ float s_lo[kThreads / 32], s_hi[kThreads / 32];
  const int64_t n = L.tokens * L.head_dim, chunk = rows_per_chunk * L.head_dim;
  for (int64_t r = blockIdx.y; r < regions.count; r += gridDim.y) {
    const float* xr = x + r * n;                          // [capacity, head_dim]
    uint8_t* packed = cache + region_offset(regions, r);  // [L.bytes]: region r's block
    for (int64_t k = blockIdx.x; k < chunks; k += gridDim.x) {
      const int64_t e1 = min64(n, (k + 1) * chunk);
      float lo = positive_infinity(), hi = -positive_infinity();
      for (int64_t e = k * chunk + threadIdx.x; e < e1; e += kThreads) fold(xr[e], lo, hi);
      block_range(lo, hi, s_lo, s_hi);
      if (threadIdx.x == 0) {
        if (chunks == 1) {
          codec::store_group(L, packed, 0, lo, hi);
        } else {
          float* ranges = chunk_ranges(packed, L);  // [chunks][1] pairs
          ranges[2 * k] = lo;
          ranges[2 * k + 1] = hi;
        }
      }
    }
  }
}

// Phase 1, one group per channel over the whole block (int axis=channel without a group):
// threads are blockDim.x channels x blockDim.y token lanes; block (k, r) reduces tokens
// [k * rows_per_chunk, ...) of every channel of region r.
__global__ void __launch_bounds__(kThreads)
    channel_range_kernel(const float* x,  // [regions, capacity, head_dim] float32
                         uint8_t* cache,  // regions as `regions` describes
                         Regions regions, PackedLayout L, int64_t rows_per_chunk, int64_t chunks) {
  __shared__ float s_lo[kThreads], s_hi[kThreads];  // [blockDim.y][blockDim.x]
  const int64_t d = L.head_dim, n = L.tokens * d;
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  for (int64_t r = blockIdx.y; r < regions.count; r += gridDim.y) {
    const float* xr = x + r * n;                          // [capacity, head_dim]
    uint8_t* packed = cache + region_offset(regions, r);  // [L.bytes]: region r's block
    for (int64_t k = blockIdx.x; k < chunks; k += gridDim.x) {
      const int64_t t0 = k * rows_per_chunk, t1 = min64(L.tokens, t0 + rows_per_chunk);
      // Every thread runs every pass (uniform trip count), so the barriers are block-wide.
      for (int64_t c0 = 0; c0 < d; c0 += blockDim.x) {
        const int64_t c = c0 + threadIdx.x;
        float lo = positive_infinity(), hi = -positive_infinity();
        if (c < d) {
          for (int64_t t = t0 + threadIdx.y; t < t1; t += blockDim.y) fold(xr[t * d + c], lo, hi);
        }
        __syncthreads();  // the previous pass's row 0 has read s_lo / s_hi
        s_lo[tid] = lo;
        s_hi[tid] = hi;
        __syncthreads();
        if (threadIdx.y == 0 && c < d) {
          for (unsigned y = 1; y < blockDim.y; ++y) {
            merge(s_lo[y * blockDim.x + threadIdx.x], s_hi[y * blockDim.x + threadIdx.x], lo, hi);
          }
          const int64_t g = codec::group_index(L, 0, c);  // = c: one token block
          if (chunks == 1) {
            codec::store_group(L, packed, g, lo, hi);
          } else {
            float* ranges = chunk_ranges(packed, L);  // [chunks][groups] pairs
            ranges[2 * (k * L.groups + g)] = lo;
            ranges[2 * (k * L.groups + g) + 1] = hi;
          }
        }
      }
    }
  }
}

// Phase 1 of a multi-chunk whole-block fit: one thread per group folds its chunk ranges.
__global__ void __launch_bounds__(kThreads) combine_ranges_kernel(uint8_t* cache,  // regions as `regions` describes
                                                                  Regions regions, PackedLayout L, int64_t chunks) {
  for (int64_t r = blockIdx.y; r < regions.count; r += gridDim.y) {
    uint8_t* packed = cache + region_offset(regions, r);  // [L.bytes]: region r's block
    const float* ranges = chunk_ranges(packed, L);        // [chunks][groups] pairs
    for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < L.groups;
         g += int64_t(gridDim.x) * blockDim.x) {
      float lo = positive_infinity(), hi = -positive_infinity();
      for (int64_t k = 0; k < chunks; ++k) {
        merge(ranges[2 * (k * L.groups + g)], ranges[2 * (k * L.groups + g) + 1], lo, hi);
      }
      // The scales lie before the code bytes: writing them leaves the ranges intact.
      codec::store_group(L, packed, g, lo, hi);
    }
  }
}

// Phase 2: one thread per payload unit [u0, u0 + units) of every region.
__global__ void __launch_bounds__(kThreads)
    encode_units_kernel(const float* x,  // [regions, new_tokens, head_dim] float32
                        uint8_t* cache,  // regions as `regions` describes
                        Regions regions, PackedLayout L, int64_t first_token, int64_t new_tokens, int64_t u0,
                        int64_t units) {
  for (int64_t r = blockIdx.y; r < regions.count; r += gridDim.y) {
    uint8_t* packed = cache + region_offset(regions, r);  // [L.bytes]: region r's block
    const TokenSource src{x + r * new_tokens * L.head_dim, first_token, L.head_dim};
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < units; i += int64_t(gridDim.x) * blockDim.x) {
      codec::encode_unit(L, packed, u0 + i, src);
    }
  }
}

// One thread per element of the first `tokens` tokens of every region.
__global__ void __launch_bounds__(kThreads) dequantize_kernel(const uint8_t* cache,  // regions as `regions` describes
                                                              Regions regions, PackedLayout L, int64_t tokens,
                                                              float* out) {  // [regions, tokens, head_dim] float32
  const int64_t d = L.head_dim, n = tokens * d;
  for (int64_t r = blockIdx.y; r < regions.count; r += gridDim.y) {
    const uint8_t* packed = cache + region_offset(regions, r);  // [L.bytes]: region r's block
    float* o = out + r * n;                                     // [tokens, head_dim]
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
      const int64_t t = i / d;
      o[i] = codec::decode_element(L, packed, t, i - t * d);
    }
  }
}

// ---- host side -----------------------------------------------------------------------------

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// gridDim.y covers the regions (up to the hardware limit), gridDim.x `blocks_per_region` blocks,
// capped so one launch stays within kMaxBlocks; the kernels' loops cover the rest.
dim3 region_grid(int64_t blocks_per_region, int64_t regions) {
  const int64_t y = std::min(regions, kMaxGridY);
  const int64_t x = std::clamp<int64_t>(blocks_per_region, 1, std::max<int64_t>(1, kMaxBlocks / y));
  return dim3(static_cast<unsigned>(x), static_cast<unsigned>(y));
}

// Whether kernels can read and write this format at this head_dim: a kind this file knows, and
// fields packed_layout.h can lay out without dividing by zero or shifting out of range.
bool valid_format(const DeviceFormat& f, int32_t head_dim) {
  switch (f.kind) {
    case CodecKind::f32:
    case CodecKind::f16:
    case CodecKind::bf16:
      return true;
    case CodecKind::integer:
      if (f.bits < 2 || f.bits > 8 || f.group < 0) return false;
      if (f.axis != GroupAxis::tensor && f.axis != GroupAxis::channel && f.axis != GroupAxis::token) return false;
      if (f.scale_type != ScaleType::f32 && f.scale_type != ScaleType::f16 && f.scale_type != ScaleType::bf16) {
        return false;
      }
      return !(f.axis == GroupAxis::token && f.group > 0 && head_dim % f.group != 0);  // the CPU's check_shape
    case CodecKind::fp8_e4m3:
    case CodecKind::fp8_e5m2:
      // A fixed scale is a finite float > 0, or 0 for a fitted one.
      return (f.axis == GroupAxis::tensor || f.axis == GroupAxis::token) && f.static_scale >= 0.0f &&
             f.static_scale <= 3.402823466e38f;
    case CodecKind::q8_0:
    case CodecKind::q8_0_x86:
    case CodecKind::q4_0:
    case CodecKind::q4_1:
    case CodecKind::q5_0:
    case CodecKind::q5_1:
    case CodecKind::iq4_nl:
      return head_dim % ggml::kBlock == 0;
    case CodecKind::mxfp4:
    case CodecKind::mxfp8:
    case CodecKind::nvfp4:
      // 16 or 32 channels per scale, dividing head_dim; 4 or 8 bits as the kind stores.
      return (f.group == 16 || f.group == 32) && head_dim % f.group == 0 &&
             f.bits == (f.kind == CodecKind::mxfp8 ? 8 : 4) && f.static_scale >= 0.0f &&
             f.static_scale <= 3.402823466e38f && !(f.ties_away && f.kind == CodecKind::mxfp8);
  }
  return false;  // a CodecKind this file does not know
}

// Shapes, format and strides a kernel can address without two regions overlapping. A shared
// cache (seq_stride = 0) is fine to read; writing it from more than one sequence would race.
bool valid_cache(const CacheDesc& c, int32_t batch, bool writes) {
  if (batch <= 0 || c.kv_heads <= 0 || c.head_dim <= 0 || c.capacity <= 0) return false;
  if (!valid_format(c.format, c.head_dim)) return false;
  if (c.head_stride < region_bytes(c.format, c.capacity, c.head_dim)) return false;
  if (c.seq_stride == 0) return !(writes && batch > 1);
  return c.seq_stride >= c.kv_heads * c.head_stride;
}

Regions regions_of(const CacheDesc& c, int32_t batch) {
  Regions R;
  R.count = int64_t{batch} * c.kv_heads;
  R.kv_heads = c.kv_heads;
  R.head_stride = c.head_stride;
  R.seq_stride = c.seq_stride;
  return R;
}

// The rules of kv_cache.h: tokens inside the capacity; a whole-block fit needs the whole block;
// per-channel groups in whole groups (the tail one once the block is full); integer codes start
// and end on a byte, since units never share one (the end may be the block's last code).
bool valid_append(const QuantizeParams& p) {
  if (p.x == nullptr || p.cache == nullptr) return false;
  const CacheDesc& c = p.cache_desc;
  if (!valid_cache(c, p.batch, /*writes=*/true)) return false;
  if (p.first_token < 0 || p.new_tokens < 0 || p.first_token > c.capacity - p.new_tokens) return false;
  const DeviceFormat& f = c.format;
  const int64_t end = p.first_token + p.new_tokens;
  if (codec::needs_whole_block(f) && !(p.first_token == 0 && p.new_tokens == c.capacity)) return false;
  if (f.kind != CodecKind::integer) return true;
  if (f.axis == GroupAxis::channel && f.group > 0) {
    if (p.first_token % f.group != 0) return false;
    if (end % f.group != 0 && end != c.capacity) return false;
  }
  const int64_t bits_per_token = int64_t{c.head_dim} * f.bits;
  if (p.first_token * bits_per_token % 8 != 0) return false;
  return end == c.capacity || end * bits_per_token % 8 == 0;
}

// Phase 1 of a whole-block format: the ranges of its groups (1, or one per channel) over every
// token, split into chunks of about kChunkElements when their ranges fit in the code bytes.
cudaError_t fit_whole_block(const QuantizeParams& p, const PackedLayout& L, const Regions& R, cudaStream_t stream) {
  int64_t rows_per_chunk = std::max<int64_t>(1, ceil_div(kChunkElements, L.head_dim));
  int64_t chunks = ceil_div(L.tokens, rows_per_chunk);
  const int64_t code_bytes = L.bytes - L.code_offset;
  if (chunks > 1 && 8 * chunks * L.groups + 7 > code_bytes) {  // + 7: aligning the ranges to 8 bytes
    rows_per_chunk = L.tokens;
    chunks = 1;
  }
  const dim3 grid = region_grid(chunks, R.count);
  cudaError_t err = cudaSuccess;
  if (L.groups_per_row > 1) {
    const int64_t lanes = std::min<int64_t>(ceil_div(L.head_dim, 32) * 32, kThreads);
    const dim3 block(static_cast<unsigned>(lanes), static_cast<unsigned>(kThreads / lanes));
    err = detail::launch(channel_range_kernel, grid, block, stream, p.x, p.cache, R, L, rows_per_chunk, chunks);
  } else {
    err = detail::launch(block_range_kernel, grid, kThreads, stream, p.x, p.cache, R, L, rows_per_chunk, chunks);
  }
  if (chunks == 1 || err != cudaSuccess) return err;
  const dim3 combine_grid = region_grid(ceil_div(L.groups, kThreads), R.count);
  return detail::launch(combine_ranges_kernel, combine_grid, kThreads, stream, p.cache, R, L, chunks);
}

}  // namespace

int64_t region_bytes(const DeviceFormat& format, int64_t capacity, int32_t head_dim) {
  return codec::packed_layout(format, capacity, head_dim).bytes;
}

CacheDesc dense_cache(const DeviceFormat& format, int64_t capacity, int32_t head_dim, int32_t kv_heads) {
  CacheDesc c;
  c.format = format;
  c.head_dim = head_dim;
  c.capacity = capacity;
  c.kv_heads = kv_heads;
  c.head_stride = ceil_div(region_bytes(format, capacity, head_dim), 16) * 16;
  c.seq_stride = int64_t{kv_heads} * c.head_stride;
  return c;
}

int64_t cache_bytes(const CacheDesc& cache, int32_t batch) {
  if (batch <= 0) return 0;
  if (cache.seq_stride == 0) return int64_t{cache.kv_heads} * cache.head_stride;  // shared by every sequence
  return int64_t{batch} * cache.seq_stride;
}

cudaError_t quantize_append(const QuantizeParams& p, cudaStream_t stream) {
  if (!valid_append(p)) return cudaErrorInvalidValue;  // before any CUDA call
  if (p.new_tokens == 0) return cudaSuccess;
  const CacheDesc& c = p.cache_desc;
  const PackedLayout L = codec::packed_layout(c.format, c.capacity, c.head_dim);
  const Regions R = regions_of(c, p.batch);
  const int64_t end = p.first_token + p.new_tokens;

  if (codec::needs_whole_block(c.format)) {
    if (const cudaError_t err = fit_whole_block(p, L, R, stream); err != cudaSuccess) return err;
  } else {
    int64_t g0 = 0, g1 = 0;
    codec::groups_of_tokens(L, p.first_token, end, g0, g1);
    if (g1 > g0) {
      const cudaError_t err = detail::launch(fit_groups_kernel, region_grid(ceil_div(g1 - g0, kThreads), R.count),
                                             kThreads, stream, p.x, p.cache, R, L, p.first_token, p.new_tokens, g0,
                                             g1 - g0);
      if (err != cudaSuccess) return err;
    }
  }

  int64_t u0 = 0, u1 = 0;
  codec::units_of_tokens(L, p.first_token, end, u0, u1);
  return detail::launch(encode_units_kernel, region_grid(ceil_div(u1 - u0, kThreads), R.count), kThreads, stream, p.x,
                        p.cache, R, L, p.first_token, p.new_tokens, u0, u1 - u0);
}

cudaError_t dequantize(const DequantizeParams& p, cudaStream_t stream) {
  if (p.cache == nullptr || p.out == nullptr) return cudaErrorInvalidValue;
  const CacheDesc& c = p.cache_desc;
  if (!valid_cache(c, p.batch, /*writes=*/false) || p.tokens < 0 || p.tokens > c.capacity) {
    return cudaErrorInvalidValue;
  }
  if (p.tokens == 0) return cudaSuccess;
  const PackedLayout L = codec::packed_layout(c.format, c.capacity, c.head_dim);
  const Regions R = regions_of(c, p.batch);
  return detail::launch(dequantize_kernel, region_grid(ceil_div(p.tokens * c.head_dim, kThreads), R.count), kThreads,
                        stream, p.cache, R, L, p.tokens, p.out);
}

}  // namespace kvtune::cuda
