// Host side of the fused decode attention (kvtune/cuda/decode_attention.h): what the kernels
// support, the split heuristic, the workspace, parameter validation, the closed switch from
// codec kinds to the K-family translation units, and the kernel that merges the splits.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "decode_attention_kernel.cuh"
#include "kvtune/codecs/packed_layout.h"
#include "kvtune/cuda/decode_attention.h"

namespace kvtune::cuda {
namespace {

using detail::Family;

inline constexpr int64_t kMinSplitTokens = 256;  // choose_num_splits never makes splits shorter
inline constexpr int64_t kBlocksPerSm = 4;       // two resident blocks per SM (registers), two waves
inline constexpr int32_t kMaxGridYZ = 65535;     // gridDim.y (KV heads) and gridDim.z (sequences)

// The family whose decoder reads `kind`, or why none does. A closed switch: a kind added to
// CodecKind without a device decoder lands in the default and is named there.
std::string family_of(CodecKind kind, Family& family) {
  switch (kind) {
    case CodecKind::f16:
    case CodecKind::bf16:
      family = Family::half;
      return {};
    case CodecKind::fp8_e4m3:
    case CodecKind::fp8_e5m2:
      family = Family::fp8;
      return {};
    case CodecKind::integer:
      family = Family::integer;
      return {};
    case CodecKind::q8_0:
    case CodecKind::q8_0_x86:
    case CodecKind::q4_0:
    case CodecKind::q4_1:
    case CodecKind::q5_0:
    case CodecKind::q5_1:
    case CodecKind::iq4_nl:
      family = Family::ggml;
      return {};
    case CodecKind::mxfp4:
    case CodecKind::mxfp8:
    case CodecKind::nvfp4:
      family = Family::micro;
      return {};
    case CodecKind::f32:
      return "codec kind f32 has no fused decoder (a float32 cache runs on the CPU path; store it as f16 or bf16 "
             "for the GPU)";
    default:
      return "codec kind " + std::to_string(static_cast<int>(kind)) + " is unknown to the fused kernels";
  }
}

bool is_power_of_two(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

int32_t log2_of(int64_t power_of_two) {
  int32_t n = 0;
  while ((int64_t{1} << n) < power_of_two) ++n;
  return n;
}

// Why the kernels cannot decode `f` at this head_dim; empty when they can.
std::string format_unsupported(const char* role, const DeviceFormat& f, int32_t head_dim) {
  const std::string who = std::string(role) + " format: ";
  Family family{};
  const std::string why = family_of(f.kind, family);
  if (!why.empty()) return who + why;
  if (family == Family::micro) {
    if ((f.group != 16 && f.group != 32) || f.bits != (f.kind == CodecKind::mxfp8 ? 8 : 4)) {
      return who + "a block-scaled float needs 16 or 32 channels per scale and " +
             std::string(f.kind == CodecKind::mxfp8 ? "8" : "4") + "-bit codes (found group " +
             std::to_string(f.group) + ", " + std::to_string(f.bits) + " bits)";
    }
    return {};  // 16 and 32 divide every head_dim the kernels take
  }
  if (family != Family::integer) return {};
  if (f.bits < 2 || f.bits > 8)
    return who + "integer codes of " + std::to_string(f.bits) + " bits (the kernels decode 2..8)";
  switch (f.scale_type) {
    case ScaleType::f32:
    case ScaleType::f16:
    case ScaleType::bf16:
      break;
    default:
      return who + "scale dtype " + std::to_string(static_cast<int>(f.scale_type)) + " is unknown";
  }
  switch (f.axis) {
    case GroupAxis::tensor:
      return {};
    case GroupAxis::channel:
      if (f.group < 0) return who + "negative channel group " + std::to_string(f.group);
      return {};
    case GroupAxis::token:
      if (f.group < 0 || (f.group > 0 && head_dim > 0 && head_dim % f.group != 0)) {
        return who + "a token group of " + std::to_string(f.group) + " channels does not divide head_dim " +
               std::to_string(head_dim);
      }
      return {};
    default:
      return who + "group axis " + std::to_string(static_cast<int>(f.axis)) + " is unknown";
  }
}

detail::CodecArgs codec_args(const CacheDesc& c, const uint8_t* cache) {
  const codec::PackedLayout L = codec::packed_layout(c.format, c.capacity, c.head_dim);
  detail::CodecArgs a;
  a.cache = cache;
  a.head_stride = c.head_stride;
  a.seq_stride = c.seq_stride;
  a.scale_offset = L.scale_offset;
  a.min_offset = L.min_offset;
  a.code_offset = L.code_offset;
  a.rows_per_tile = L.rows_per_tile;
  a.groups_per_row = L.groups_per_row;
  if (L.rows_per_tile >= c.capacity) {
    a.row_shift = detail::kOneTile;
  } else {
    a.row_shift = is_power_of_two(L.rows_per_tile) ? log2_of(L.rows_per_tile) : -1;
  }
  // Integer channel groups divide head_dim (a power of two), so they are powers of two too.
  a.col_shift = c.format.kind == CodecKind::integer || codec::is_micro(c.format.kind) ? log2_of(L.cols_per_group) : 0;
  a.bits = c.format.bits;
  a.block_bytes = L.block_bytes;
  a.kind = c.format.kind;
  a.scale_type = c.format.scale_type;
  a.asymmetric = c.format.asymmetric;
  a.has_scales = L.groups > 0;
  a.per_token_scale = c.format.axis == GroupAxis::token;
  return a;
}

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

// Everything decode_attention() needs to hold before it launches; no CUDA call is made.
bool valid_cache(const CacheDesc& c, const uint8_t* cache, int64_t max_seq_len) {
  if (cache == nullptr || !aligned16(cache)) return false;
  // Token indices fit 32 bits in the kernels' tile arithmetic.
  if (c.capacity < max_seq_len || c.capacity > INT32_MAX || c.kv_heads < 1 || c.kv_heads > kMaxGridYZ) return false;
  const int64_t region = codec::packed_layout(c.format, c.capacity, c.head_dim).bytes;
  if (c.head_stride < region || c.head_stride % 16 != 0) return false;
  if (c.seq_stride != 0 && (c.seq_stride < c.kv_heads * c.head_stride || c.seq_stride % 16 != 0)) return false;
  return true;
}

bool valid_params(const DecodeAttentionParams& p) {
  if (p.q == nullptr || p.seq_lens == nullptr || p.out == nullptr) return false;
  if (!aligned16(p.q)) return false;  // the kernel reads q as float4
  if (p.batch < 1 || p.batch > kMaxGridYZ) return false;
  if (p.group < 1 || p.group > kMaxGroup) return false;
  if (p.k.head_dim != p.v.head_dim || p.k.kv_heads != p.v.kv_heads) return false;
  if (!decode_attention_unsupported(p.k.format, p.v.format, p.k.head_dim, p.group).empty()) return false;
  if (p.max_seq_len < 1) return false;
  if (!valid_cache(p.k, p.k_cache, p.max_seq_len) || !valid_cache(p.v, p.v_cache, p.max_seq_len)) return false;
  if (p.num_splits < 1) return false;
  if (p.num_splits > 1 && p.workspace == nullptr) return false;
  if (!std::isfinite(p.softmax_scale)) return false;
  // The merge kernel's grid: one block per query head.
  if (int64_t{p.batch} * p.k.kv_heads * p.group > INT32_MAX) return false;
  return true;
}

// One block per query head (batch * kv_heads * group), head_dim threads: out = sum_s w_s O_s /
// sum_s w_s l_s with w_s = 2^(m_s - max_s m_s); splits that saw no tokens (m = -inf) weigh 0.
__global__ void merge_splits_kernel(const float* ws_out,    // [heads, num_splits, head_dim]
                                    const float* ws_stats,  // [heads, num_splits, 2] (max, sum)
                                    float* out,             // [heads, head_dim]
                                    int32_t num_splits, int32_t head_dim) {
  const int64_t head = blockIdx.x;
  const int c = threadIdx.x;
  const float neg_inf = __uint_as_float(0xff800000u);
  const float* stats = ws_stats + head * num_splits * 2;
  float m = neg_inf;
  for (int s = 0; s < num_splits; ++s) m = fmaxf(m, stats[2 * s]);
  float num = 0.0f, den = 0.0f;
  if (m != neg_inf) {
    for (int s = 0; s < num_splits; ++s) {
      const float ms = stats[2 * s];
      if (ms == neg_inf) continue;
      const float w = exp2f(ms - m);
      den = __fmaf_rn(w, stats[2 * s + 1], den);
      num = __fmaf_rn(w, ws_out[(head * num_splits + s) * head_dim + c], num);
    }
  }
  out[head * head_dim + c] = den > 0.0f ? num / den : 0.0f;  // den = 0: an empty sequence reads as zeros
}

// One thread per (token, run of kRun channels): the attention kernel's load() and decode() of the
// run, written out. The iq4_nl table lives in shared memory, as in the attention kernel.
template <class Dec, int D>
__global__ void decoders_kernel(const detail::CodecArgs a, int64_t tokens, float* out) {
  __shared__ float s_iq4nl[16];
  if (threadIdx.x < 16) s_iq4nl[threadIdx.x] = ggml::iq4nl_value(static_cast<int>(threadIdx.x));
  __syncthreads();
  constexpr int kLanes = D / detail::kRun;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t t = i / kLanes;
  if (t >= tokens) return;
  const int c0 = static_cast<int>(i % kLanes) * detail::kRun;
  const typename Dec::Raw raw = Dec::template load<D>(a, a.cache, t, c0);
  float x[detail::kRun];
  Dec::decode(a, a.cache, raw, c0, s_iq4nl, x);
  for (int j = 0; j < detail::kRun; ++j) out[t * D + c0 + j] = x[j];
}

template <class Dec>
cudaError_t launch_decoders(const detail::CodecArgs& a, int32_t head_dim, int64_t tokens, float* out,
                            cudaStream_t stream) {
  constexpr unsigned kThreads = 128;
  const auto blocks = static_cast<unsigned>((tokens * (head_dim / detail::kRun) + kThreads - 1) / kThreads);
  switch (head_dim) {
    case 64: return detail::launch(decoders_kernel<Dec, 64>, blocks, kThreads, stream, a, tokens, out);
    case 128: return detail::launch(decoders_kernel<Dec, 128>, blocks, kThreads, stream, a, tokens, out);
    case 256: return detail::launch(decoders_kernel<Dec, 256>, blocks, kThreads, stream, a, tokens, out);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

size_t decode_attention_workspace_bytes(int32_t batch, int32_t kv_heads, int32_t group, int32_t head_dim,
                                        int32_t num_splits) {
  if (num_splits <= 1 || batch < 1 || kv_heads < 1 || group < 1 || head_dim < 1) return 0;
  // Partial outputs [heads, num_splits, head_dim], then (max, sum) [heads, num_splits, 2].
  const size_t rows = static_cast<size_t>(batch) * static_cast<size_t>(kv_heads) * static_cast<size_t>(group) *
                      static_cast<size_t>(num_splits);
  return rows * (static_cast<size_t>(head_dim) + 2) * sizeof(float);
}

int32_t choose_num_splits(int32_t batch, int32_t kv_heads, int64_t max_seq_len, int sm_count) {
  if (batch < 1 || kv_heads < 1 || max_seq_len < 1 || sm_count < 1) return 1;
  const int64_t blocks = int64_t{batch} * kv_heads;
  int64_t splits = (int64_t{sm_count} * kBlocksPerSm + blocks - 1) / blocks;
  const int64_t longest = max_seq_len / kMinSplitTokens;  // splits of at least kMinSplitTokens tokens
  if (splits > longest) splits = longest;
  return splits < 1 ? 1 : static_cast<int32_t>(splits);
}

std::string decode_attention_unsupported(const DeviceFormat& k, const DeviceFormat& v, int32_t head_dim,
                                         int32_t group) {
  std::string why;
  auto add = [&](const std::string& reason) {
    if (reason.empty()) return;
    why += (why.empty() ? "" : "; ") + reason;
  };
  if (head_dim != 64 && head_dim != 128 && head_dim != 256) {
    add("head_dim " + std::to_string(head_dim) + " (the fused kernels are built for 64, 128 and 256)");
  }
  if (group < 1 || group > kMaxGroup) {
    add("a group of " + std::to_string(group) + " query heads per KV head (the kernels take 1.." +
        std::to_string(kMaxGroup) + ")");
  }
  add(format_unsupported("K", k, head_dim));
  add(format_unsupported("V", v, head_dim));
  return why;
}

cudaError_t decode_attention(const DecodeAttentionParams& p, cudaStream_t stream) {
  if (!valid_params(p)) return cudaErrorInvalidValue;
  Family k_family{}, v_family{};
  family_of(p.k.format.kind, k_family);  // valid_params checked both kinds
  family_of(p.v.format.kind, v_family);

  detail::KernelParams kp;
  kp.q = p.q;
  kp.seq_lens = p.seq_lens;
  kp.out = p.out;
  kp.k = codec_args(p.k, p.k_cache);
  kp.v = codec_args(p.v, p.v_cache);
  kp.kv_heads = p.k.kv_heads;
  kp.group = p.group;
  kp.num_splits = p.num_splits;
  kp.max_seq_len = p.max_seq_len;
  kp.chunk = (p.max_seq_len + p.num_splits - 1) / p.num_splits;
  kp.q_scale = static_cast<float>(static_cast<double>(p.softmax_scale) * 1.4426950408889634);  // log2(e)
  const int64_t heads = int64_t{p.batch} * p.k.kv_heads * p.group;
  if (p.num_splits > 1) {
    kp.ws_out = p.workspace;
    kp.ws_stats = p.workspace + heads * p.num_splits * p.k.head_dim;
  }

  const dim3 grid(static_cast<unsigned>(p.num_splits), static_cast<unsigned>(p.k.kv_heads),
                  static_cast<unsigned>(p.batch));
  const int d = p.k.head_dim;
  cudaError_t err = cudaErrorInvalidValue;
  switch (k_family) {
    case Family::half:
      err = detail::launch_decode_attention_k_half(kp, v_family, d, grid, stream);
      break;
    case Family::fp8:
      err = detail::launch_decode_attention_k_fp8(kp, v_family, d, grid, stream);
      break;
    case Family::integer:
      err = detail::launch_decode_attention_k_int(kp, v_family, d, grid, stream);
      break;
    case Family::ggml:
      err = detail::launch_decode_attention_k_ggml(kp, v_family, d, grid, stream);
      break;
    case Family::micro:
      err = detail::launch_decode_attention_k_micro(kp, v_family, d, grid, stream);
      break;
  }
  if (err != cudaSuccess || p.num_splits == 1) return err;
  return detail::launch(merge_splits_kernel, static_cast<unsigned>(heads), static_cast<unsigned>(d), stream,
                        kp.ws_out, kp.ws_stats, p.out, p.num_splits, d);
}

cudaError_t decode_attention_decoders(const CacheDesc& desc, const uint8_t* cache, int64_t tokens, float* out,
                                      cudaStream_t stream) {
  if (out == nullptr || tokens < 1 || !valid_cache(desc, cache, tokens)) return cudaErrorInvalidValue;
  if (!decode_attention_unsupported(desc.format, desc.format, desc.head_dim, 1).empty()) return cudaErrorInvalidValue;
  Family family{};
  family_of(desc.format.kind, family);
  const detail::CodecArgs a = codec_args(desc, cache);
  switch (family) {
    case Family::half: return launch_decoders<detail::HalfDecoder>(a, desc.head_dim, tokens, out, stream);
    case Family::fp8: return launch_decoders<detail::Fp8Decoder>(a, desc.head_dim, tokens, out, stream);
    case Family::integer: return launch_decoders<detail::IntDecoder>(a, desc.head_dim, tokens, out, stream);
    case Family::ggml: return launch_decoders<detail::GgmlDecoder>(a, desc.head_dim, tokens, out, stream);
    case Family::micro: return launch_decoders<detail::MicroDecoder>(a, desc.head_dim, tokens, out, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace kvtune::cuda
