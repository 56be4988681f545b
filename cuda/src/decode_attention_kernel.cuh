// The fused split-K decode attention kernel (private to cuda/src). Included by one .cu file per K
// codec family (decode_attention_k_*.cu), each instantiating its 5 V families x 3 head dims x 3
// group bounds, so the 225 instances compile in parallel; decode_attention.cu holds the host
// dispatch and the merge.
//
// One thread block of kThreads = 128 threads owns one (split, KV head, sequence). The kernel is
// built for a bound G (1, 4 or 8) on the group's query heads, and runs with the smallest bound that
// holds the group: a lane keeps G queries and G accumulators of 8 channels in registers, so a
// smaller group uses fewer registers (more blocks per SM) and fewer instructions per token. A token's
// head_dim channels are split into runs of 8 consecutive channels, one run per lane: kLanes =
// D / 8 lanes per token ("a slot"), kSlots = 128 / kLanes slots per block. Each iteration a slot
// takes kTokensPerSlot tokens (slot s, token i: base + i * kSlots + s, so a warp reads
// consecutive rows), and every lane
//   1. decodes its K run in registers, dots it with its 8 channels of every query of the group,
//   2. reduces the group's partial dots over the slot's lanes (reduce_scatter: for G = 8, 7-9
//      shuffles for all 8 queries instead of 8 * log2(kLanes)); afterwards lane "owner" of query g
//      holds g's logit,
//   3. the owner keeps the online softmax (max m, sum l) of its query, in the log2 domain, and
//      publishes the probabilities and the rescale factor through shared memory,
//   4. decodes its V run and accumulates p * v for every query into fp32 registers.
// Loads for the next iteration are issued as soon as a run's registers are free (K after the dot
// products, V after the accumulation), so two iterations of loads are in flight.
// At the end the slots' (m, l, acc) are combined through shared memory and the block writes
// either `out` (one split) or the split's unnormalized output and (m, l) to the workspace, which
// the merge kernel in decode_attention.cu combines.
//
// Decoders read exactly the bytes kvtune/codecs/packed_layout.h places and produce exactly
// decode_element's values: the same float operations in the same order (the target compiles with
// --fmad=false, so a multiply-add stays two roundings), with exact shortcuts only (a small
// integer's float from its bits, a hardware f16/fp8 -> f32 conversion, which is exact). The
// attention arithmetic itself is not bit-exact and uses explicit fused multiply-adds.
// Scale convention: quantize divides by the scale, dequantize multiplies.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kvtune/codecs/ggml_blocks.h"
#include "kvtune/codecs/microscale.h"
#include "kvtune/codecs/packed_layout.h"
#include "kvtune/cuda/decode_attention.h"
#include "kvtune/device_format.h"
#include "kvtune/numeric/half.h"
#include "launch.cuh"

namespace kvtune::cuda::detail {

inline constexpr int kThreads = 128;      // threads per block
inline constexpr int kTokensPerSlot = 4;  // tokens a slot takes per iteration
inline constexpr int kRun = 8;            // consecutive channels a lane decodes per token
static_assert(kMaxGroup == 8, "the group bounds are 1, 4 and 8 (launch_group_bound)");

// The bounds on the group the kernel is built for: G = 1 (MHA), 4 (groups 2-4) and 8 (groups 5-8).
// Each bound costs a full set of instances (compile time), hence three rather than every power of two.
template <int G>
inline constexpr bool kIsGroupBound = G == 1 || G == 4 || G == 8;

// The smallest group a bound serves: the bound below it, plus one.
template <int G>
inline constexpr int kSmallestGroup = G == 8 ? 5 : (G == 4 ? 2 : 1);

// The codec families the kernel is templated on; the kind within a family is a runtime value.
enum class Family : uint8_t { half, fp8, integer, ggml, micro };

// row_shift value: the whole region is one tile of tokens (integer axis=tensor, or a channel
// group at least as long as the region).
inline constexpr int32_t kOneTile = -2;

// What a decoder needs to know about one cache, computed on the host from its CacheDesc and
// packed_layout(format, capacity, head_dim). Offsets are bytes from the start of a region.
struct CodecArgs {
  const uint8_t* cache = nullptr;  // regions at cache + b * seq_stride + h * head_stride, device
  int64_t head_stride = 0, seq_stride = 0;
  int64_t scale_offset = 0, min_offset = 0, code_offset = 0;
  int64_t rows_per_tile = 1;   // integer: tokens per group tile
  int64_t groups_per_row = 0;  // integer: groups per token row
  int32_t row_shift = 0;       // integer: log2(rows_per_tile) when a power of two, kOneTile, or -1 (divide)
  int32_t col_shift = 0;       // integer: log2(cols_per_group); channel groups divide head_dim = 2^k;
                               // micro: log2(channels per scale block), 4 or 5
  int32_t bits = 0;            // integer: bits per code, 2..8
  int32_t block_bytes = 0;     // ggml: bytes per 32-element block
  CodecKind kind = CodecKind::f16;
  ScaleType scale_type = ScaleType::f32;  // integer: dtype of scales and minima
  bool asymmetric = false;                // integer: a minimum per group
  bool has_scales = false;                // fp8: the region stores f32 scales
  bool per_token_scale = false;           // fp8: one scale per token (else one per region)
};

struct KernelParams {
  const float* q = nullptr;           // [batch, kv_heads * group, D] float32, device
  const int32_t* seq_lens = nullptr;  // [batch], device
  float* out = nullptr;               // [batch, kv_heads * group, D] float32, device (num_splits == 1)
  float* ws_out = nullptr;            // [batch * kv_heads * group, num_splits, D] unnormalized partial outputs
  float* ws_stats = nullptr;          // [batch * kv_heads * group, num_splits, 2] (max, sum), log2 domain
  CodecArgs k, v;
  int32_t kv_heads = 0;
  int32_t group = 1;
  int32_t num_splits = 1;
  int64_t max_seq_len = 0;
  int64_t chunk = 0;     // tokens per split: ceil(max_seq_len / num_splits)
  float q_scale = 0.0f;  // softmax_scale * log2(e): logits come out in the log2 domain
};

// ---- loads ----------------------------------------------------------------------------------
// Read-only loads through the non-coherent cache path (the kernel never writes the caches).

__device__ __forceinline__ uint32_t load_u16(const uint8_t* p) {  // p: 2-byte aligned
  return __ldg(reinterpret_cast<const unsigned short*>(p));
}

// 8 bytes at a 2-byte aligned address, little-endian, as two 32-bit words.
__device__ __forceinline__ uint2 load8_align2(const uint8_t* p) {
  return make_uint2(load_u16(p) | (load_u16(p + 2) << 16), load_u16(p + 4) | (load_u16(p + 6) << 16));
}

// n = 2..8 bytes at p, little-endian, at any alignment: 16-bit loads where p is even and n is,
// else byte loads. Out of line: only odd code widths and misaligned code offsets come here.
static __device__ __noinline__ uint64_t load_bytes_any(const uint8_t* p, int n) {
  uint64_t v = 0;
  if ((n & 1) == 0 && (reinterpret_cast<uintptr_t>(p) & 1u) == 0) {
    for (int k = 0; 2 * k < n; ++k) v |= static_cast<uint64_t>(load_u16(p + 2 * k)) << (16 * k);
    return v;
  }
  for (int k = 0; k < n; ++k) v |= static_cast<uint64_t>(__ldg(p + k)) << (8 * k);
  return v;
}

// n = 2..8 bytes at p, little-endian: one load when n is 2, 4 or 8 and p is aligned to it (every
// lane then is, given an aligned code offset: lane runs start n bytes apart), two for 8 bytes on a
// 4-byte boundary, else load_bytes_any.
__device__ __forceinline__ uint64_t load_bytes(const uint8_t* p, int n) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (n == 8 && (a & 7u) == 0) {
    const uint2 w = __ldg(reinterpret_cast<const uint2*>(p));
    return w.x | (static_cast<uint64_t>(w.y) << 32);
  }
  if ((n & 3) == 0 && (a & 3u) == 0) {  // 4, or 8 after a code offset that is 4 mod 8
    uint64_t v = __ldg(reinterpret_cast<const unsigned int*>(p));
    if (n == 8) v |= static_cast<uint64_t>(__ldg(reinterpret_cast<const unsigned int*>(p + 4))) << 32;
    return v;
  }
  if (n == 2 && (a & 1u) == 0) return load_u16(p);
  return load_bytes_any(p, n);
}

// f16_bits_to_f32 in one conversion instruction: f16 -> f32 is exact, so the value is the same.
__device__ __forceinline__ float f16_value(uint32_t bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits & 0xffffu)));
}

// The two f16 values in a 32-bit word (low half first) as floats.
__device__ __forceinline__ float2 f16x2_value(uint32_t bits) {
  __half2_raw pair;
  pair.x = static_cast<unsigned short>(bits & 0xffffu);
  pair.y = static_cast<unsigned short>(bits >> 16);
  return __half22float2(__half2(pair));
}

// A stored scale or minimum: read_scale (kvtune/codecs/scale_storage.h) with aligned loads (scale
// and minimum arrays start on a multiple of their element size in a 16-byte aligned region).
__device__ __forceinline__ float load_scale(const uint8_t* base, int64_t index, ScaleType t) {
  if (t == ScaleType::f32) return __ldg(reinterpret_cast<const float*>(base) + index);
  const uint32_t h = __ldg(reinterpret_cast<const unsigned short*>(base) + index);
  return t == ScaleType::f16 ? f16_value(h) : __uint_as_float(h << 16);  // bf16_bits_to_f32
}

// float(u) for u < 2^23, minus `bias` (an integer-valued float, |bias| <= 2^8): 2^23 + u has u in
// its mantissa, and subtracting 2^23 + bias is exact, so this equals float(int(u) - bias) without
// an integer-to-float conversion (a quarter-rate instruction).
__device__ __forceinline__ float small_int_float(uint32_t u, float bias) {
  return __uint_as_float(0x4B000000u | u) - (8388608.0f + bias);
}

// ---- decoders: one run of kRun = 8 channels [c0, c0 + 8) of token t ------------------------
// Raw holds what load() fetched from memory; decode() turns it into decode_element's values.

// f16 and bf16 share one decoder (one family, so one set of kernel instances: each family costs
// a full set per K or V family, group bound and head dim); the kind is a uniform branch per run.
struct HalfDecoder {  // f16 / bf16: 8 values = 16 bytes, 16-byte aligned
  struct Raw {
    uint4 w;
  };
  template <int D>
  __device__ static Raw load(const CodecArgs&, const uint8_t* region, int64_t t, int c0) {
    return {__ldg(reinterpret_cast<const uint4*>(region + 2 * (t * D + c0)))};
  }
  __device__ static void decode(const CodecArgs& a, const uint8_t*, const Raw& r, int, const float*, float (&x)[kRun]) {
    if (a.kind == CodecKind::bf16) return decode_kind<true>(r, x);
    return decode_kind<false>(r, x);
  }

  template <bool kBf16>
  __device__ static void decode_kind(const Raw& r, float (&x)[kRun]) {
    const uint32_t w[4] = {r.w.x, r.w.y, r.w.z, r.w.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if constexpr (kBf16) {  // bf16_bits_to_f32: the bits are the top half of the float32
        x[2 * k] = __uint_as_float(w[k] << 16);
        x[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
      } else {  // f16 -> f32 is exact (f16_bits_to_f32's value)
        const float2 f = f16x2_value(w[k]);
        x[2 * k] = f.x;
        x[2 * k + 1] = f.y;
      }
    }
  }
};

struct Fp8Decoder {  // fp8: 8 codes = 8 bytes at code_offset + t * D + c0 (4-byte aligned)
  struct Raw {
    uint2 codes;
    float scale;
  };
  template <int D>
  __device__ static Raw load(const CodecArgs& a, const uint8_t* region, int64_t t, int c0) {
    const uint8_t* p = region + a.code_offset + t * D + c0;
    Raw r;
    if ((reinterpret_cast<uintptr_t>(p) & 7u) == 0) {
      r.codes = __ldg(reinterpret_cast<const uint2*>(p));
    } else {
      r.codes = make_uint2(__ldg(reinterpret_cast<const unsigned int*>(p)),
                           __ldg(reinterpret_cast<const unsigned int*>(p + 4)));
    }
    // fp8_block_scale: f32 scales, per token or one per region, else 1.
    r.scale = a.has_scales
                  ? __ldg(reinterpret_cast<const float*>(region + a.scale_offset) + (a.per_token_scale ? t : 0))
                  : 1.0f;
    return r;
  }
  // fp8_to_f32(code) * scale (fp8_dequantize) for the codes in w's low two bytes. Every fp8 value
  // is an f16 value and f16 -> f32 is exact, so converting through f16 gives fp8_to_f32's value.
  __device__ static float2 decode_pair(uint32_t w, bool e5m2, float scale) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    const __half2 h = __half2(
        __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w & 0xffffu), e5m2 ? __NV_E5M2 : __NV_E4M3));
    const float2 f = __half22float2(h);
    return make_float2(f.x * scale, f.y * scale);
#else
    // No fp8 conversion instruction before sm_89: each code into the high byte of an f16.
    const uint32_t high = __byte_perm(w, 0u, 0x1404u);  // [0, b0, 0, b1]: e5m2 is f16's top byte
    float2 f;
    if (e5m2) {
      f = f16x2_value(high);
    } else {
      // e4m3 S.EEEE.MMM as f16 S.0EEEE.MMM0000000 is the value / 2^8 (bias 15 vs 7), subnormals
      // included; 0x7f / 0xff are NaN.
      f = f16x2_value((high & 0x80008000u) | ((high & 0x7f007f00u) >> 1));
      f.x = (w & 0x7fu) == 0x7fu ? __uint_as_float(0x7fffffffu) : f.x * 256.0f;
      f.y = ((w >> 8) & 0x7fu) == 0x7fu ? __uint_as_float(0x7fffffffu) : f.y * 256.0f;
    }
    return make_float2(f.x * scale, f.y * scale);
#endif
  }
  __device__ static void decode(const CodecArgs& a, const uint8_t*, const Raw& r, int, const float*, float (&x)[kRun]) {
    const bool e5m2 = a.kind == CodecKind::fp8_e5m2;
    const uint32_t w[2] = {r.codes.x, r.codes.y};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = decode_pair(w[k / 2] >> (16 * (k % 2)), e5m2, r.scale);
      x[2 * k] = f.x;
      x[2 * k + 1] = f.y;
    }
  }
};

struct IntDecoder {  // integer: 8 codes = `bits` bytes starting on a byte (the run starts at 8i)
  struct Raw {
    uint64_t codes;
    int64_t group;         // the group of channel c0 (the run's first)
    float scale, minimum;  // the run's group when one group covers it (col_shift >= 3)
  };
  template <int D>
  __device__ static Raw load(const CodecArgs& a, const uint8_t* region, int64_t t, int c0) {
    Raw r;
    const int64_t element = t * D + c0;  // a multiple of 8: bit element * bits is a byte boundary
    r.codes = load_bytes(region + a.code_offset + (element >> 3) * a.bits, a.bits);
    // group_index: (t / rows_per_tile) * groups_per_row + c / cols_per_group
    // (32-bit division: the host admits capacities below 2^31.)
    const int64_t tile = a.row_shift >= 0          ? (t >> a.row_shift)
                         : a.row_shift == kOneTile ? 0
                                                   : static_cast<uint32_t>(t) / static_cast<uint32_t>(a.rows_per_tile);
    r.group = tile * a.groups_per_row + (c0 >> a.col_shift);
    r.scale = r.minimum = 0.0f;
    if (a.col_shift >= 3) {
      r.scale = load_scale(region + a.scale_offset, r.group, a.scale_type);
      if (a.asymmetric) r.minimum = load_scale(region + a.min_offset, r.group, a.scale_type);
    }
    return r;
  }
  // The code width as a compile-time constant (one uniform switch per run): each element is then
  // a constant shift and mask of the run's 64 bits instead of a 64-bit shift by j * bits, which
  // the first GPU run measured at twice f16's instructions per token (docs/performance.md).
  __device__ static void decode(const CodecArgs& a, const uint8_t* region, const Raw& r, int, const float*,
                                float (&x)[kRun]) {
    if (a.col_shift < 3) return decode_narrow_groups(a, region, r, x);
    switch (a.bits) {
      case 2: return decode_width<2>(r, a.asymmetric, x);
      case 3: return decode_width<3>(r, a.asymmetric, x);
      case 4: return decode_width<4>(r, a.asymmetric, x);
      case 5: return decode_width<5>(r, a.asymmetric, x);
      case 6: return decode_width<6>(r, a.asymmetric, x);
      case 7: return decode_width<7>(r, a.asymmetric, x);
      default: return decode_width<8>(r, a.asymmetric, x);  // the host admits widths 2..8
    }
  }

  // One group covers the run (col_shift >= 3): its scale (and minimum) came with the load.
  // int_sym_value: float(code - 2^(bits-1)) * s; int_asym_value: float(code) * s + m.
  template <int kBits>
  __device__ static void decode_width(const Raw& r, bool asymmetric, float (&x)[kRun]) {
    constexpr uint32_t kMask = (1u << kBits) - 1u;
    if (asymmetric) {
#pragma unroll
      for (int j = 0; j < kRun; ++j) {
        x[j] = small_int_float(static_cast<uint32_t>(r.codes >> (j * kBits)) & kMask, 0.0f) * r.scale + r.minimum;
      }
    } else {
#pragma unroll
      for (int j = 0; j < kRun; ++j) {
        x[j] = small_int_float(static_cast<uint32_t>(r.codes >> (j * kBits)) & kMask, float(1 << (kBits - 1))) * r.scale;
      }
    }
  }

  // Groups of 1, 2 or 4 channels (int:group=1|2|4): channel c0 + j is in group r.group +
  // (j >> col_shift), so each element reads its own scale (and minimum). Rare, so the width stays a
  // runtime value here: one copy of this path per call site rather than one per width, which had
  // taken most of the integer instances' compile time.
  __device__ static void decode_narrow_groups(const CodecArgs& a, const uint8_t* region, const Raw& r, float (&x)[kRun]) {
    const uint32_t mask = (1u << a.bits) - 1u;
    const float bias = a.asymmetric ? 0.0f : float(1 << (a.bits - 1));
#pragma unroll
    for (int j = 0; j < kRun; ++j) {
      const uint32_t code = static_cast<uint32_t>(r.codes >> (j * a.bits)) & mask;
      const int64_t g = r.group + (j >> a.col_shift);
      const float s = load_scale(region + a.scale_offset, g, a.scale_type);
      x[j] = a.asymmetric ? small_int_float(code, bias) * s + load_scale(region + a.min_offset, g, a.scale_type)
                          : small_int_float(code, bias) * s;
    }
  }
};

// Where a ggml block keeps its parts and how a code becomes a value (ggml_blocks.h's table):
//   q8_0  d, qs[32]          float(int8(q)) * d    int8(q) = (q ^ 0x80) - 128
//   q4_0  d, qs[16]          float(q - 8) * d
//   q4_1  d, m, qs[16]       float(q) * d + m
//   q5_0  d, qh, qs[16]      float(q - 16) * d     q = nibble | fifth bit << 4
//   q5_1  d, m, qh, qs[16]   float(q) * d + m
//   iq4_nl d, qs[16]         d * iq4nl_value(q)
struct GgmlShape {
  int min_offset;  // byte offset of m; 0: none
  int qh_offset;   // byte offset of the fifth bits; 0: none
  int qs_offset;   // byte offset of the codes
  bool nibbles;    // 4-bit codes, byte j holding elements j (low) and j + 16 (high); else bytes
  float bias;      // subtracted from the code (q8_0: from q ^ 0x80)
  bool codebook;   // iq4_nl
};

__device__ __forceinline__ GgmlShape ggml_shape(CodecKind kind) {
  switch (kind) {
    case CodecKind::q8_0:
    case CodecKind::q8_0_x86:
      return {0, 0, 2, false, 128.0f, false};
    case CodecKind::q4_0:
      return {0, 0, 2, true, 8.0f, false};
    case CodecKind::q4_1:
      return {2, 0, 4, true, 0.0f, false};
    case CodecKind::q5_0:
      return {0, 2, 6, true, 16.0f, false};
    case CodecKind::q5_1:
      return {2, 4, 8, true, 0.0f, false};
    default:
      return {0, 0, 2, true, 0.0f, true};  // iq4_nl (the host admits ggml kinds only)
  }
}

struct GgmlDecoder {  // ggml: the run's 8 elements lie in block (t * D/32 + c0/32), slots j0..j0+7
  struct Raw {
    uint2 qs;     // the bytes holding the run's 8 codes
    uint32_t qh;  // q5_*: the block's fifth bits; else 0
    uint32_t dm;  // the f16 bits of d (low half) and m (high half, q4_1 / q5_1)
  };
  // The kind as a compile-time constant (one uniform switch per run), so the shape's offsets,
  // masks and bias are constants and the parts a kind lacks cost nothing.
  template <int D>
  __device__ static Raw load(const CodecArgs& a, const uint8_t* region, int64_t t, int c0) {
    switch (a.kind) {
      case CodecKind::q8_0:
      case CodecKind::q8_0_x86: return load_kind<CodecKind::q8_0, D>(a, region, t, c0);  // one layout
      case CodecKind::q4_0: return load_kind<CodecKind::q4_0, D>(a, region, t, c0);
      case CodecKind::q4_1: return load_kind<CodecKind::q4_1, D>(a, region, t, c0);
      case CodecKind::q5_0: return load_kind<CodecKind::q5_0, D>(a, region, t, c0);
      case CodecKind::q5_1: return load_kind<CodecKind::q5_1, D>(a, region, t, c0);
      default: return load_kind<CodecKind::iq4_nl, D>(a, region, t, c0);  // the host admits ggml kinds only
    }
  }
  __device__ static void decode(const CodecArgs& a, const uint8_t*, const Raw& r, int c0, const float* iq4nl_table,
                                float (&x)[kRun]) {
    switch (a.kind) {
      case CodecKind::q8_0:
      case CodecKind::q8_0_x86: return decode_kind<CodecKind::q8_0>(r, c0, iq4nl_table, x);
      case CodecKind::q4_0: return decode_kind<CodecKind::q4_0>(r, c0, iq4nl_table, x);
      case CodecKind::q4_1: return decode_kind<CodecKind::q4_1>(r, c0, iq4nl_table, x);
      case CodecKind::q5_0: return decode_kind<CodecKind::q5_0>(r, c0, iq4nl_table, x);
      case CodecKind::q5_1: return decode_kind<CodecKind::q5_1>(r, c0, iq4nl_table, x);
      default: return decode_kind<CodecKind::iq4_nl>(r, c0, iq4nl_table, x);
    }
  }

  template <CodecKind kKind, int D>
  __device__ static Raw load_kind(const CodecArgs& a, const uint8_t* region, int64_t t, int c0) {
    const GgmlShape s = ggml_shape(kKind);
    const uint8_t* block = region + (t * (D / ggml::kBlock) + c0 / ggml::kBlock) * a.block_bytes;
    const int j0 = c0 % ggml::kBlock;  // 0, 8, 16 or 24
    // Blocks are 2-byte aligned only (18, 20, 22, 24 and 34 bytes): 16-bit loads.
    Raw r;
    r.dm = load_u16(block);
    if (s.min_offset != 0) r.dm |= load_u16(block + s.min_offset) << 16;
    r.qh = s.qh_offset != 0 ? load_u16(block + s.qh_offset) | (load_u16(block + s.qh_offset + 2) << 16) : 0u;
    r.qs = load8_align2(block + s.qs_offset + (s.nibbles ? j0 % 16 : j0));
    return r;
  }
  template <CodecKind kKind>
  __device__ static void decode_kind(const Raw& r, int c0, const float* iq4nl_table, float (&x)[kRun]) {
    const GgmlShape s = ggml_shape(kKind);
    const int j0 = c0 % ggml::kBlock;
    const int shift = s.nibbles && j0 >= 16 ? 4 : 0;  // high nibbles hold elements 16..31
    const uint32_t mask = s.nibbles ? 0xfu : 0xffu;
    const uint32_t flip = s.nibbles ? 0u : 0x80u;
    const float d = f16_value(r.dm);  // ggml::get_half
    const float m = f16_value(r.dm >> 16);
    // ggml_element's arithmetic for element j0 + j of the block.
#pragma unroll
    for (int j = 0; j < kRun; ++j) {
      const uint32_t byte = ((j < 4 ? r.qs.x : r.qs.y) >> (8 * (j % 4))) & 0xffu;
      const uint32_t fifth = s.qh_offset != 0 ? ((r.qh >> (j0 + j)) & 1u) << 4 : 0u;
      const uint32_t q = (((byte >> shift) & mask) | fifth) ^ flip;
      if (s.codebook) {
        x[j] = d * iq4nl_table[q & 0xfu];  // the codebook in shared memory
      } else {
        const float level = small_int_float(q, s.bias);
        x[j] = s.min_offset != 0 ? level * d + m : level * d;
      }
    }
  }
};

// mxfp4 / mxfp8 / nvfp4: a run of 8 channels starting at a multiple of 8 lies inside one scale
// block of 16 or 32. The block's scale byte, then 4 (E2M1) or 8 (E4M3) code bytes at
// code_offset + i * bits / 8 (a 16-byte aligned code_offset, so 4- and 8-byte aligned loads).
// decode_element's arithmetic: micro_scale(), then micro_dequantize() of each code.
struct MicroDecoder {
  struct Raw {
    uint2 codes;
    float scale;
  };
  template <int D>
  __device__ static Raw load(const CodecArgs& a, const uint8_t* region, int64_t t, int c0) {
    const int64_t i = t * D + c0;
    const uint8_t code = __ldg(region + a.scale_offset + (i >> a.col_shift));
    Raw r;
    r.scale = a.kind == CodecKind::nvfp4 ? codec::nvfp4_block_scale(code, __ldg(reinterpret_cast<const float*>(region)))
                                         : codec::e8m0_to_f32(code);
    if (a.bits == 8) {
      r.codes = __ldg(reinterpret_cast<const uint2*>(region + a.code_offset + i));
    } else {
      r.codes = make_uint2(__ldg(reinterpret_cast<const unsigned int*>(region + a.code_offset + i / 2)), 0u);
    }
    return r;
  }
  __device__ static void decode(const CodecArgs& a, const uint8_t*, const Raw& r, int, const float*, float (&x)[kRun]) {
    const codec::MicroElement e = a.kind == CodecKind::mxfp8 ? codec::MicroElement::e4m3 : codec::MicroElement::e2m1;
#pragma unroll
    for (int j = 0; j < kRun; ++j) {
      const uint32_t code = a.bits == 8 ? ((j < 4 ? r.codes.x : r.codes.y) >> (8 * (j % 4))) & 0xffu
                                        : (r.codes.x >> (4 * j)) & 0xfu;  // element 2k low nibble, 2k + 1 high
      x[j] = codec::micro_dequantize(static_cast<uint8_t>(code), r.scale, e);
    }
  }
};

// ---- the reduction of G partial dot products over a token's kLanes lanes -------------------

// v[g]: this lane's partial dot product for query g. Returns the full dot product (summed over
// the kLanes lanes of the token) of query owner_query<kLanes, G>(lane): log2(G) halving exchanges
// (G/2 + G/4 + ... shuffles; each keeps half of the queries, the other half going to the partner
// lane) leave one query per group of kLanes / G lanes, then a butterfly sums those lanes.
template <int kLanes, int G>
__device__ __forceinline__ float reduce_scatter(float (&v)[G], int lane) {
  static_assert(kLanes >= 8 && kLanes <= 32 && (kLanes & (kLanes - 1)) == 0, "8, 16 or 32 lanes per token");
  static_assert(kIsGroupBound<G>, "a group bound of 1, 4 or 8");
  constexpr unsigned kAll = 0xffffffffu;
#pragma unroll
  for (int half = G / 2, offset = kLanes / 2; half >= 1; half /= 2, offset /= 2) {
    const bool hi = (lane & offset) != 0;  // keeps the upper half of its queries
#pragma unroll
    for (int k = 0; k < half; ++k) {
      const float send = hi ? v[k] : v[k + half];
      const float keep = hi ? v[k + half] : v[k];
      v[k] = keep + __shfl_xor_sync(kAll, send, offset);
    }
  }
#pragma unroll
  for (int o = kLanes / (2 * G); o >= 1; o /= 2) v[0] += __shfl_xor_sync(kAll, v[0], o);
  return v[0];
}

// The query whose logit reduce_scatter<kLanes, G> leaves in `lane`: bit k of the query (from the
// top) is the lane's bit at kLanes / 2^(k+1).
template <int kLanes, int G>
__device__ __forceinline__ int owner_query(int lane) {
  int query = 0;
#pragma unroll
  for (int half = G / 2, offset = kLanes / 2; half >= 1; half /= 2, offset /= 2) query += (lane & offset) != 0 ? half : 0;
  return query;
}

// Whether query g is one of the group's (g < group): known at compile time below the smallest group
// the bound G serves.
template <int G>
__device__ __forceinline__ bool query_present(int g, int group) {
  return g < kSmallestGroup<G> || g < group;
}

// G consecutive floats of shared memory into registers, 16 bytes at a time where G allows.
template <int G>
__device__ __forceinline__ void load_row(const float* src, float (&dst)[G]) {
  if constexpr (G % 4 == 0) {
#pragma unroll
    for (int k = 0; k < G; k += 4) {
      const float4 w = *reinterpret_cast<const float4*>(src + k);
      dst[k] = w.x, dst[k + 1] = w.y, dst[k + 2] = w.z, dst[k + 3] = w.w;
    }
  } else {
#pragma unroll
    for (int k = 0; k < G; ++k) dst[k] = src[k];
  }
}

// ---- the kernel --------------------------------------------------------------------------

// Blocks per SM the register budget is set for: a group bound of 8 keeps 2 x 8 x 8 floats of
// queries and accumulators per thread (about 240 registers), smaller bounds free registers for more.
template <int G>
inline constexpr int kMinBlocksPerSm = G == 8 ? 2 : (G == 4 ? 3 : 4);

// grid (num_splits, kv_heads, batch), kThreads threads; p.group <= G (launch_group_bound picks G).
template <class KDec, class VDec, int D, int G>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm<G>) decode_attention_kernel(const KernelParams p) {
  static_assert(D == 64 || D == 128 || D == 256, "head_dim 64, 128 or 256");
  constexpr int kLanes = D / kRun;           // lanes per token: 8, 16, 32
  constexpr int kSlots = kThreads / kLanes;  // tokens in flight per block: 16, 8, 4
  constexpr int kTile = kSlots * kTokensPerSlot;
  constexpr unsigned kAll = 0xffffffffu;
  const float kNegInf = __uint_as_float(0xff800000u);  // -inf

  // Per-slot partial outputs for the final combine: [kSlots, G, D] (4 KiB per query).
  __shared__ __align__(16) float s_acc[kSlots * G * D];
  // Per-slot probabilities [kTokensPerSlot] and rescale factor, per query, double-buffered.
  __shared__ __align__(16) float s_soft[2][kSlots][kTokensPerSlot + 1][G];
  __shared__ float s_max[kSlots][G], s_sum[kSlots][G], s_weight[kSlots][G];
  __shared__ float s_block_max[G], s_block_sum[G];
  __shared__ float s_iq4nl[16];

  const int split = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x;
  const int lane = tid % kLanes, slot = tid / kLanes, c0 = lane * kRun;
  const int group = p.group;
  if (tid < 16) s_iq4nl[tid] = ggml::iq4nl_value(tid);

  // Sequences longer than max_seq_len are read as max_seq_len tokens (the host checked that
  // every region holds that many), so a bad seq_lens entry cannot read past a region.
  int64_t seq_len = p.seq_lens[b];
  seq_len = seq_len < 0 ? 0 : (seq_len > p.max_seq_len ? p.max_seq_len : seq_len);
  const int64_t t_begin = static_cast<int64_t>(split) * p.chunk;
  const int64_t t_end = t_begin + p.chunk < seq_len ? t_begin + p.chunk : seq_len;

  const int64_t head0 = (static_cast<int64_t>(b) * p.kv_heads + h) * group;  // first query head of the group
  float q[G][kRun];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (query_present<G>(g, group)) {
      const float4* src = reinterpret_cast<const float4*>(p.q + (head0 + g) * D + c0);
      const float4 lo = src[0], hi = src[1];
      const float v[kRun] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
      for (int j = 0; j < kRun; ++j) q[g][j] = v[j] * p.q_scale;
    } else {
#pragma unroll
      for (int j = 0; j < kRun; ++j) q[g][j] = 0.0f;
    }
  }

  const uint8_t* k_region = p.k.cache + b * p.k.seq_stride + h * p.k.head_stride;
  const uint8_t* v_region = p.v.cache + b * p.v.seq_stride + h * p.v.head_stride;

  const int my_query = owner_query<kLanes, G>(lane);
  const bool writer = (lane & (kLanes / G - 1)) == 0;  // one owner lane per query writes
  float run_max = kNegInf, run_sum = 0.0f;             // my_query's online softmax (owner lanes)
  float acc[G][kRun];
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int j = 0; j < kRun; ++j) acc[g][j] = 0.0f;
  }
  __syncthreads();  // s_iq4nl

  if (t_begin < t_end) {  // uniform over the block: every shuffle below has all lanes present
    // Token i of this slot at `base`, clamped to the split's last token (a valid address; its
    // logit is masked below).
    auto token = [&](int64_t base, int i) {
      const int64_t t = base + i * kSlots + slot;
      return t < t_end ? t : t_end - 1;
    };
    typename KDec::Raw kr[kTokensPerSlot];
    typename VDec::Raw vr[kTokensPerSlot];
#pragma unroll
    for (int i = 0; i < kTokensPerSlot; ++i) kr[i] = KDec::template load<D>(p.k, k_region, token(t_begin, i), c0);
#pragma unroll
    for (int i = 0; i < kTokensPerSlot; ++i) vr[i] = VDec::template load<D>(p.v, v_region, token(t_begin, i), c0);

    int buf = 0;
    for (int64_t base = t_begin; base < t_end; base += kTile) {
      const int64_t next = base + kTile;
      // 1-2. logits: this lane's 8 channels, then the slot's sum, owned by lane my_query.
      float logit[kTokensPerSlot];
#pragma unroll
      for (int i = 0; i < kTokensPerSlot; ++i) {
        float kx[kRun];
        KDec::decode(p.k, k_region, kr[i], c0, s_iq4nl, kx);
        float part[G];
#pragma unroll
        for (int g = 0; g < G; ++g) {
          part[g] = 0.0f;
          if (query_present<G>(g, group)) {
#pragma unroll
            for (int j = 0; j < kRun; ++j) part[g] = __fmaf_rn(q[g][j], kx[j], part[g]);
          }
        }
        logit[i] = reduce_scatter<kLanes, G>(part, lane);
        if (base + i * kSlots + slot >= t_end) logit[i] = kNegInf;
      }
      if (next < t_end) {
#pragma unroll
        for (int i = 0; i < kTokensPerSlot; ++i) kr[i] = KDec::template load<D>(p.k, k_region, token(next, i), c0);
      }

      // 3. online softmax of my_query; an all-masked start keeps max = -inf, sum = 0.
      float new_max = run_max;
#pragma unroll
      for (int i = 0; i < kTokensPerSlot; ++i) new_max = fmaxf(new_max, logit[i]);
      const bool none = new_max == kNegInf;
      const float alpha = none ? 1.0f : exp2f(run_max - new_max);
      float prob[kTokensPerSlot], prob_sum = 0.0f;
#pragma unroll
      for (int i = 0; i < kTokensPerSlot; ++i) {
        prob[i] = none ? 0.0f : exp2f(logit[i] - new_max);
        prob_sum += prob[i];
      }
      run_sum = run_sum * alpha + prob_sum;
      run_max = new_max;
      float(&soft)[kTokensPerSlot + 1][G] = s_soft[buf][slot];
      if (writer) {
#pragma unroll
        for (int i = 0; i < kTokensPerSlot; ++i) soft[i][my_query] = prob[i];
        soft[kTokensPerSlot][my_query] = alpha;
      }
      // Orders the writes before the reads; the other buffer's readers of two iterations ago
      // have all passed the previous __syncwarp, so double buffering needs no second one.
      __syncwarp(kAll);

      // 4. rescale (only when some query's max moved) and accumulate p * v.
      {
        float scale[G];
        load_row<G>(soft[kTokensPerSlot], scale);
        bool moved = false;
#pragma unroll
        for (int g = 0; g < G; ++g) moved |= query_present<G>(g, group) && scale[g] != 1.0f;
        if (moved) {
#pragma unroll
          for (int g = 0; g < G; ++g) {
            if (query_present<G>(g, group)) {
#pragma unroll
              for (int j = 0; j < kRun; ++j) acc[g][j] *= scale[g];
            }
          }
        }
      }
#pragma unroll
      for (int i = 0; i < kTokensPerSlot; ++i) {
        float vx[kRun];
        VDec::decode(p.v, v_region, vr[i], c0, s_iq4nl, vx);
        if (base + i * kSlots + slot >= t_end) {  // a clamped token: p = 0, and 0 * inf must not be NaN
#pragma unroll
          for (int j = 0; j < kRun; ++j) vx[j] = 0.0f;
        }
        float pr[G];
        load_row<G>(soft[i], pr);
#pragma unroll
        for (int g = 0; g < G; ++g) {
          if (query_present<G>(g, group)) {
#pragma unroll
            for (int j = 0; j < kRun; ++j) acc[g][j] = __fmaf_rn(pr[g], vx[j], acc[g][j]);
          }
        }
      }
      if (next < t_end) {
#pragma unroll
        for (int i = 0; i < kTokensPerSlot; ++i) vr[i] = VDec::template load<D>(p.v, v_region, token(next, i), c0);
      }
      buf ^= 1;
    }
  }

  // Combine the slots: O_g = sum_s w_s acc_s, L_g = sum_s w_s l_s, w_s = 2^(m_s - M_g).
  if (writer) {
    s_max[slot][my_query] = run_max;
    s_sum[slot][my_query] = run_sum;
  }
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (query_present<G>(g, group)) {
      float4* dst = reinterpret_cast<float4*>(&s_acc[(slot * G + g) * D + c0]);
      dst[0] = make_float4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]);
      dst[1] = make_float4(acc[g][4], acc[g][5], acc[g][6], acc[g][7]);
    }
  }
  __syncthreads();
  if (tid < group) {
    const int g = tid;
    float m = kNegInf;
    for (int s = 0; s < kSlots; ++s) m = fmaxf(m, s_max[s][g]);
    float l = 0.0f;
    for (int s = 0; s < kSlots; ++s) {
      const float w = s_max[s][g] == kNegInf ? 0.0f : exp2f(s_max[s][g] - m);
      s_weight[s][g] = w;
      l = __fmaf_rn(w, s_sum[s][g], l);
    }
    s_block_max[g] = m;
    s_block_sum[g] = l;
  }
  __syncthreads();
  for (int e = tid; e < group * D; e += kThreads) {
    const int g = e / D, c = e % D;
    float o = 0.0f;
#pragma unroll
    for (int s = 0; s < kSlots; ++s) o = __fmaf_rn(s_weight[s][g], s_acc[(s * G + g) * D + c], o);
    const int64_t head = head0 + g;
    if (p.num_splits == 1) {
      const float l = s_block_sum[g];
      p.out[head * D + c] = l > 0.0f ? o / l : 0.0f;  // l = 0: an empty sequence reads as zeros
    } else {
      p.ws_out[(head * p.num_splits + split) * D + c] = o;
    }
  }
  if (p.num_splits > 1 && tid < group) {
    float* stats = p.ws_stats + ((head0 + tid) * p.num_splits + split) * 2;
    stats[0] = s_block_max[tid];
    stats[1] = s_block_sum[tid];
  }
}

// ---- instantiation: the V families and head dims for one K decoder ---------------------------

// The smallest group bound that holds p.group (1..kMaxGroup, checked by decode_attention()); each
// bound serves the groups from kSmallestGroup<G> up.
template <class KDec, class VDec, int D>
cudaError_t launch_group_bound(const KernelParams& p, dim3 grid, cudaStream_t stream) {
  if (p.group <= 1) return launch(decode_attention_kernel<KDec, VDec, D, 1>, grid, kThreads, stream, p);
  if (p.group <= 4) return launch(decode_attention_kernel<KDec, VDec, D, 4>, grid, kThreads, stream, p);
  return launch(decode_attention_kernel<KDec, VDec, D, 8>, grid, kThreads, stream, p);
}

template <class KDec, class VDec>
cudaError_t launch_head_dim(const KernelParams& p, int head_dim, dim3 grid, cudaStream_t stream) {
  switch (head_dim) {
    case 64:
      return launch_group_bound<KDec, VDec, 64>(p, grid, stream);
    case 128:
      return launch_group_bound<KDec, VDec, 128>(p, grid, stream);
    case 256:
      return launch_group_bound<KDec, VDec, 256>(p, grid, stream);
    default:
      return cudaErrorInvalidValue;  // decode_attention() admits 64, 128 and 256 only
  }
}

template <class KDec>
cudaError_t launch_with_k(const KernelParams& p, Family v, int head_dim, dim3 grid, cudaStream_t stream) {
  switch (v) {
    case Family::half:
      return launch_head_dim<KDec, HalfDecoder>(p, head_dim, grid, stream);
    case Family::fp8:
      return launch_head_dim<KDec, Fp8Decoder>(p, head_dim, grid, stream);
    case Family::integer:
      return launch_head_dim<KDec, IntDecoder>(p, head_dim, grid, stream);
    case Family::ggml:
      return launch_head_dim<KDec, GgmlDecoder>(p, head_dim, grid, stream);
    case Family::micro:
      return launch_head_dim<KDec, MicroDecoder>(p, head_dim, grid, stream);
  }
  return cudaErrorInvalidValue;
}

// One per K family, each in its own translation unit (decode_attention_k_<family>.cu).
cudaError_t launch_decode_attention_k_half(const KernelParams& p, Family v, int head_dim, dim3 grid, cudaStream_t s);
cudaError_t launch_decode_attention_k_fp8(const KernelParams& p, Family v, int head_dim, dim3 grid, cudaStream_t s);
cudaError_t launch_decode_attention_k_int(const KernelParams& p, Family v, int head_dim, dim3 grid, cudaStream_t s);
cudaError_t launch_decode_attention_k_ggml(const KernelParams& p, Family v, int head_dim, dim3 grid, cudaStream_t s);
cudaError_t launch_decode_attention_k_micro(const KernelParams& p, Family v, int head_dim, dim3 grid, cudaStream_t s);

}  // namespace kvtune::cuda::detail
