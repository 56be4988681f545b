// Fused split-K decode attention over a packed K and V cache (FlashInfer decode.cuh, ggml-cuda
// fattn): one new query per query head, GQA groups of 1-8 query heads per KV head, head_dim 64,
// 128 or 256, K and V formats independent. Each thread block owns one (split, KV head, sequence),
// dequantizes K and V in registers, keeps an online softmax in fp32 and writes a partial output;
// a merge kernel combines the splits. With one split the first kernel writes `out` directly.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kvtune/cuda/kv_cache.h"

namespace kvtune::cuda {

inline constexpr int kMaxGroup = 8;  // query heads per KV head the kernels are built for

struct DecodeAttentionParams {
  const float* q = nullptr;          // [batch, kv_heads * group, head_dim] float32, device
  const uint8_t* k_cache = nullptr;  // regions described by k, device
  const uint8_t* v_cache = nullptr;  // regions described by v, device
  CacheDesc k, v;                    // same head_dim and kv_heads; formats independent
  const int32_t* seq_lens = nullptr;  // [batch] tokens of each sequence (1..capacity), device
  float* out = nullptr;              // [batch, kv_heads * group, head_dim] float32, device
  int32_t batch = 0;
  int32_t group = 1;                 // query heads per KV head, 1..kMaxGroup
  int64_t max_seq_len = 0;           // >= every seq_lens[b]; sizes the splits
  int32_t num_splits = 1;            // splits of the token axis; 1 = no merge pass
  float softmax_scale = 0.0f;        // logit = softmax_scale * q . k (1/sqrt(head_dim) usually)
  float* workspace = nullptr;        // decode_attention_workspace_bytes(...) bytes, device; null if num_splits = 1
};

// Workspace for the partial outputs and softmax statistics of every split.
size_t decode_attention_workspace_bytes(int32_t batch, int32_t kv_heads, int32_t group, int32_t head_dim,
                                        int32_t num_splits);

// A split count that fills the device: enough (sequence, KV head, split) blocks for every SM a
// few times over, each split at least 256 tokens long.
int32_t choose_num_splits(int32_t batch, int32_t kv_heads, int64_t max_seq_len, int sm_count);

// Empty when the fused kernels can decode this K/V pair at this shape, else why not (a format
// without a device codec, head_dim not 64/128/256, a group beyond kMaxGroup).
std::string decode_attention_unsupported(const DeviceFormat& k, const DeviceFormat& v, int32_t head_dim,
                                         int32_t group);

cudaError_t decode_attention(const DecodeAttentionParams& p, cudaStream_t stream = nullptr);

// The fused kernels' decoders alone: the first `tokens` rows of one region (the cache's first
// sequence and KV head) as decode_attention decodes them, written to `out` ([tokens, head_dim]
// float32, device). Each value is decode_element's bit for bit by design; tests/gpu checks it, for
// the decoders' arithmetic is otherwise seen only through the attention's rounding. A check, not a
// path evaluation uses. cudaErrorInvalidValue for what decode_attention would refuse (the format,
// the head_dim, the cache's alignment or strides), `tokens` outside [1, capacity], or a null `out`.
cudaError_t decode_attention_decoders(const CacheDesc& desc, const uint8_t* cache, int64_t tokens, float* out,
                                      cudaStream_t stream = nullptr);

}  // namespace kvtune::cuda
