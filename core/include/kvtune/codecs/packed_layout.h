// Where every code, scale and minimum of a packed block lives, computed from a scheme's
// DeviceFormat, and the per-element encode/decode steps of each format. The CPU schemes write
// these layouts (plugins/int, fp8, float, ggml) and the CUDA kernels read and write them through
// these functions, so a region of a GPU cache holding `tokens` tokens is byte for byte the CPU
// scheme's quantize() of the same [tokens, head_dim] block (tests/unit/packed_layout_test.cpp).
//
// This is the only place a built-in layout is written down. Each built-in family keeps its
// parameters as the DeviceFormat its device_format() returns and takes its footprint(), its
// tiling (rows_per_tile, cols_per_group, groups) and the offsets its CPU quantize/dequantize
// write and read at (scale_offset, min_offset, code_offset) from packed_layout() of that very
// format; the kernels call the same function on the same struct. So a family and its kernel
// cannot disagree about where a byte lives; what the CPU fast paths put in those bytes is
// checked against decode_element/encode_unit by tests/unit/packed_layout_test.cpp (and the
// conformance check device_format_matches_packed_layout for every registered scheme).
//
//   kind        block layout (offsets from the start of the block)
//   f32/f16/bf16  [T*D values, row-major]
//   fp8         [G f32 scales][T*D codes]       G = 0 (unit), T (per token), 1 (one per block)
//   integer     [G scales][G minima if asym][bit stream of T*D codes, element i at bits i*b..]
//   ggml        [T * D/32 blocks, row-major]    element (t, c) in block t*D/32 + c/32, slot c%32
//   mx/nvfp4    [f32 tensor scale (nvfp4 only)][T*D/B scale bytes][pad to 16][T*D codes]
//               B = group (16 or 32) consecutive channels of a token share the scale byte of
//               block (t*D + c)/B; 4-bit codes pack two per byte, element i in the low nibble of
//               byte i/2 when i is even (CUDA's fp4x2 order), else the high nibble
//
// Integer and fp8 groups are tiles of rows_per_tile tokens x cols_per_group channels numbered
// token block by token block: g = (t / rows_per_tile) * groups_per_row + c / cols_per_group.
// An empty block (tokens or head_dim < 1) has no groups and no bytes.
// Scale convention everywhere: quantize divides by the scale, dequantize multiplies.
#pragma once

#include <cstdint>

#include "kvtune/codecs/fp8_codec.h"
#include "kvtune/codecs/ggml_blocks.h"
#include "kvtune/codecs/int_codec.h"
#include "kvtune/codecs/microscale.h"
#include "kvtune/codecs/scale_storage.h"
#include "kvtune/device_format.h"
#include "kvtune/hd.h"
#include "kvtune/numeric/half.h"

namespace kvtune::codec {

struct PackedLayout {
  DeviceFormat format;
  int64_t tokens = 0, head_dim = 0;
  int64_t rows_per_tile = 1, cols_per_group = 1, groups_per_row = 0, groups = 0;
  int64_t scale_offset = 0, min_offset = 0, code_offset = 0;  // bytes from the start of the block
  int64_t bytes = 0;                                           // the whole block: the scheme's footprint
  int32_t block_bytes = 0;                                     // ggml: bytes per 32-element block
};

KVTUNE_HD bool is_ggml(CodecKind k) { return k >= CodecKind::q8_0 && k <= CodecKind::iq4_nl; }
KVTUNE_HD bool is_fp8(CodecKind k) { return k == CodecKind::fp8_e4m3 || k == CodecKind::fp8_e5m2; }
KVTUNE_HD bool is_float(CodecKind k) { return k == CodecKind::f32 || k == CodecKind::f16 || k == CodecKind::bf16; }
KVTUNE_HD bool is_micro(CodecKind k) { return k == CodecKind::mxfp4 || k == CodecKind::mxfp8 || k == CodecKind::nvfp4; }
KVTUNE_HD MicroElement micro_element(CodecKind k) { return k == CodecKind::mxfp8 ? MicroElement::e4m3 : MicroElement::e2m1; }

// sizeof(block_*) in ggml-common.h; 0 for a kind that is not a ggml block.
KVTUNE_HD int32_t ggml_block_bytes(CodecKind k) {
  switch (k) {
    case CodecKind::q8_0:
    case CodecKind::q8_0_x86: return ggml::kQ8_0Bytes;
    case CodecKind::q4_0: return ggml::kQ4_0Bytes;
    case CodecKind::q4_1: return ggml::kQ4_1Bytes;
    case CodecKind::q5_0: return ggml::kQ5_0Bytes;
    case CodecKind::q5_1: return ggml::kQ5_1Bytes;
    case CodecKind::iq4_nl: return ggml::kIq4nlBytes;
    default: return 0;
  }
}

KVTUNE_HD PackedLayout packed_layout(const DeviceFormat& f, int64_t tokens, int64_t head_dim) {
  PackedLayout L;
  L.format = f;
  L.tokens = tokens;
  L.head_dim = head_dim;
  if (tokens < 1 || head_dim < 1) return L;  // an empty block has no groups and no bytes
  if (is_float(f.kind)) {
    L.bytes = tokens * head_dim * (f.kind == CodecKind::f32 ? 4 : 2);
  } else if (is_ggml(f.kind)) {
    L.block_bytes = ggml_block_bytes(f.kind);
    L.bytes = tokens * (head_dim / ggml::kBlock) * L.block_bytes;
  } else if (is_micro(f.kind)) {
    const int64_t blocks = tokens * head_dim / f.group;  // the scheme checks that group divides head_dim
    L.cols_per_group = f.group;
    L.groups = f.kind == CodecKind::nvfp4 ? 1 : 0;  // the per-tensor scale
    L.groups_per_row = L.groups;
    L.rows_per_tile = tokens;
    L.scale_offset = 4 * L.groups;
    L.min_offset = L.scale_offset;
    L.code_offset = (L.scale_offset + blocks + 15) / 16 * 16;
    L.bytes = L.code_offset + tokens * head_dim * f.bits / 8;
  } else if (is_fp8(f.kind)) {
    const bool per_token = f.axis == GroupAxis::token;
    L.rows_per_tile = per_token ? 1 : tokens;
    L.cols_per_group = head_dim;
    L.groups_per_row = f.scales_stored ? 1 : 0;
    L.groups = f.scales_stored ? (per_token ? tokens : 1) : 0;
    L.min_offset = L.code_offset = 4 * L.groups;
    L.bytes = L.code_offset + tokens * head_dim;
  } else {  // integer (plugins/int/int_family.cpp quantizes with this tiling)
    int64_t rows = tokens, cols = head_dim;
    if (f.axis == GroupAxis::channel) {
      cols = 1;
      rows = f.group > 0 ? f.group : tokens;
    } else if (f.axis == GroupAxis::token) {
      rows = 1;
      cols = f.group > 0 ? f.group : head_dim;
    }
    L.rows_per_tile = rows;
    L.cols_per_group = cols;
    L.groups_per_row = head_dim / cols;
    L.groups = L.groups_per_row * ((tokens + rows - 1) / rows);
    const int64_t sb = scale_bytes(f.scale_type);
    L.min_offset = L.groups * sb;
    L.code_offset = L.min_offset + (f.asymmetric ? L.groups * sb : 0);
    L.bytes = L.code_offset + packed_code_bytes(tokens * head_dim, f.bits);
  }
  return L;
}

KVTUNE_HD int64_t group_index(const PackedLayout& L, int64_t t, int64_t c) {
  return (t / L.rows_per_tile) * L.groups_per_row + c / L.cols_per_group;
}

// The token blocks (tiles of rows_per_tile tokens) of an integer or fp8 block: groups / groups_per_row.
KVTUNE_HD int64_t token_tiles(const PackedLayout& L) { return L.groups_per_row > 0 ? L.groups / L.groups_per_row : 0; }

// A scale of an fp8 block: stored (f32), or 1 when the block stores none.
KVTUNE_HD float fp8_block_scale(const PackedLayout& L, const uint8_t* packed, int64_t t) {
  if (L.groups == 0) return 1.0f;
  return read_scale(packed + L.scale_offset, L.format.axis == GroupAxis::token ? t : 0, ScaleType::f32);
}

// Element j (0..31) of one ggml block, the same arithmetic as ggml::dequantize_*.
KVTUNE_HD float ggml_element(CodecKind k, const uint8_t* block, int j) {
  const float d = ggml::get_half(block);
  switch (k) {
    case CodecKind::q8_0:
    case CodecKind::q8_0_x86:
      return static_cast<float>(static_cast<int8_t>(block[2 + j])) * d;
    case CodecKind::q4_0:
      return static_cast<float>(ggml::low_nibble(block + 2, j) - 8) * d;
    case CodecKind::q4_1:
      return static_cast<float>(ggml::low_nibble(block + 4, j)) * d + ggml::get_half(block + 2);
    case CodecKind::q5_0: {
      uint32_t qh;
      memcpy(&qh, block + 2, 4);
      const int q = ggml::low_nibble(block + 6, j) | static_cast<int>(((qh >> j) & 1u) << 4);
      return static_cast<float>(q - 16) * d;
    }
    case CodecKind::q5_1: {
      uint32_t qh;
      memcpy(&qh, block + 4, 4);
      const int q = ggml::low_nibble(block + 8, j) | static_cast<int>(((qh >> j) & 1u) << 4);
      return static_cast<float>(q) * d + ggml::get_half(block + 2);
    }
    case CodecKind::iq4_nl:
      return d * ggml::iq4nl_value(ggml::low_nibble(block + 2, j));
    default:
      return 0.0f;  // not a ggml kind; packed_layout gave it no blocks
  }
}

// The scale of block b (B consecutive elements) of a block-scaled float: 2^(code - 127) for MX,
// f32(e4m3 code) * the per-tensor scale for NVFP4.
KVTUNE_HD float micro_scale(const PackedLayout& L, const uint8_t* packed, int64_t b) {
  const uint8_t code = packed[L.scale_offset + b];
  if (L.format.kind != CodecKind::nvfp4) return e8m0_to_f32(code);
  return nvfp4_block_scale(code, read_scale(packed, 0, ScaleType::f32));
}

// The element code of element i (row-major) of a block-scaled float.
KVTUNE_HD uint8_t micro_code(const PackedLayout& L, const uint8_t* packed, int64_t i) {
  if (L.format.bits == 8) return packed[L.code_offset + i];
  return static_cast<uint8_t>((packed[L.code_offset + i / 2] >> (4 * (i & 1))) & 0xfu);
}

// The dequantized value of element (t, c) of a packed block.
KVTUNE_HD float decode_element(const PackedLayout& L, const uint8_t* packed, int64_t t, int64_t c) {
  const DeviceFormat& f = L.format;
  const int64_t i = t * L.head_dim + c;
  switch (f.kind) {
    case CodecKind::f32: {
      float v;
      memcpy(&v, packed + 4 * i, 4);
      return v;
    }
    case CodecKind::f16:
    case CodecKind::bf16: {
      uint16_t h;
      memcpy(&h, packed + 2 * i, 2);
      return f.kind == CodecKind::f16 ? f16_bits_to_f32(h) : bf16_bits_to_f32(h);
    }
    case CodecKind::integer: {
      const int64_t g = group_index(L, t, c);
      const float s = read_scale(packed + L.scale_offset, g, f.scale_type);
      const uint32_t code = unpack_code(packed + L.code_offset, i, f.bits);
      return f.asymmetric ? int_asym_value(code, s, read_scale(packed + L.min_offset, g, f.scale_type))
                          : int_sym_value(code, f.bits, s);
    }
    case CodecKind::fp8_e4m3:
    case CodecKind::fp8_e5m2:
      return fp8_dequantize(packed[L.code_offset + i], fp8_block_scale(L, packed, t),
                            f.kind == CodecKind::fp8_e4m3 ? Fp8Format::e4m3 : Fp8Format::e5m2);
    case CodecKind::mxfp4:
    case CodecKind::mxfp8:
    case CodecKind::nvfp4:
      return micro_dequantize(micro_code(L, packed, i), micro_scale(L, packed, i / f.group), micro_element(f.kind));
    default: {
      const int64_t blocks_per_row = L.head_dim / ggml::kBlock;
      const uint8_t* block = packed + (t * blocks_per_row + c / ggml::kBlock) * L.block_bytes;
      return ggml_element(f.kind, block, static_cast<int>(c % ggml::kBlock));
    }
  }
}

// ---- encoding: the steps a quantizer takes, shared by the CPU schemes' tests and the kernels ----

// The stored scale and minimum of an integer group whose elements span [lo, hi].
KVTUNE_HD void fit_int_group(const DeviceFormat& f, float lo, float hi, float& scale, float& minimum) {
  if (f.asymmetric) {
    minimum = stored_minimum(lo, f.scale_type);
    scale = int_asym_scale(minimum, hi, f.bits, f.scale_type);
  } else {
    minimum = 0.0f;
    // std::max(-lo, hi), as plugins/int does: an all-zero group (lo = +0) stores a scale of -0.
    scale = int_sym_scale(-lo < hi ? hi : -lo, f.bits, f.scale_type);
  }
}

// The code of x in an integer group with that stored scale and minimum.
KVTUNE_HD uint32_t int_code(const DeviceFormat& f, float x, float scale, float minimum) {
  const float divisor = int_divisor(scale);
  if (f.asymmetric) {
    return static_cast<uint32_t>(stored_level(int_asym_level(x, minimum, divisor, int_asym_top(f.bits))));
  }
  return static_cast<uint32_t>(stored_level(int_sym_level(x, divisor, int_sym_qmax(f.bits))) + int_sym_offset(f.bits));
}

// The scale of an fp8 group whose largest magnitude is amax: 1 without stored scales, the fixed
// scale of a calibrated scheme, else fitted onto the largest finite value.
KVTUNE_HD float fp8_group_scale(const DeviceFormat& f, float amax) {
  if (!f.scales_stored) return 1.0f;
  if (f.static_scale > 0.0f) return f.static_scale;
  return fp8_fit_scale(amax, f.kind == CodecKind::fp8_e4m3 ? Fp8Format::e4m3 : Fp8Format::e5m2);
}

KVTUNE_HD uint8_t fp8_code(CodecKind k, float x, float scale) {
  return fp8_quantize(x, scale, k == CodecKind::fp8_e4m3 ? Fp8Format::e4m3 : Fp8Format::e5m2);
}

// One ggml block from 32 consecutive values, as ggml writes it into a cache.
KVTUNE_HD void quantize_ggml_block(CodecKind k, const float* x, uint8_t* block) {
  switch (k) {
    case CodecKind::q8_0: return ggml::quantize_q8_0(x, block);
    case CodecKind::q8_0_x86: return ggml::quantize_q8_0_x86(x, block);
    case CodecKind::q4_0: return ggml::quantize_q4_0(x, block);
    case CodecKind::q4_1: return ggml::quantize_q4_1(x, block);
    case CodecKind::q5_0: return ggml::quantize_q5_0(x, block);
    case CodecKind::q5_1: return ggml::quantize_q5_1(x, block);
    case CodecKind::iq4_nl: return ggml::quantize_iq4_nl(x, block);
    default: return;
  }
}

// Whether tokens can be quantized into a block a few at a time. Per-token groups, ggml blocks,
// plain floats and fp8 without a fitted block scale can; per-channel groups can in whole groups
// of `group` tokens (the tail group once the block is full); a scale fitted over the whole block
// (axis=tensor, or axis=channel without a group) needs every token in one call.
KVTUNE_HD bool needs_whole_block(const DeviceFormat& f) {
  if (is_float(f.kind) || is_ggml(f.kind)) return false;
  if (is_fp8(f.kind)) return f.axis == GroupAxis::tensor && f.scales_stored && !(f.static_scale > 0.0f);
  if (is_micro(f.kind)) return f.kind == CodecKind::nvfp4 && !(f.static_scale > 0.0f);
  return f.axis == GroupAxis::tensor || (f.axis == GroupAxis::channel && f.group <= 0);
}


// ---- quantizing tokens into a block, unit by unit -------------------------------------------
// A quantizer first fits the groups its tokens touch (encode_group), then writes the payload
// units of those tokens (encode_unit), which read the stored scales back. Units never share a
// byte, so every unit (and every group) can be its own thread: the CUDA quantize kernel runs
// these very functions, and tests/unit/packed_layout_test.cpp runs them one by one on the host
// against the CPU schemes' bytes. `Src` maps (token, channel) to the float being quantized.

// The tokens and channels group g of an int/fp8 block covers.
struct GroupExtent {
  int64_t t0, t1, c0, c1;
};

// One whole-block scale: fp8 per tensor, the nvfp4 tensor scale.
KVTUNE_HD bool one_block_group(const DeviceFormat& f) {
  return (is_fp8(f.kind) && f.axis != GroupAxis::token) || f.kind == CodecKind::nvfp4;
}

KVTUNE_HD GroupExtent group_extent(const PackedLayout& L, int64_t g) {
  if (one_block_group(L.format)) return {0, L.tokens, 0, L.head_dim};
  const int64_t tile = g / L.groups_per_row, col = g % L.groups_per_row;
  const int64_t t0 = tile * L.rows_per_tile;
  const int64_t t1 = t0 + L.rows_per_tile < L.tokens ? t0 + L.rows_per_tile : L.tokens;
  return {t0, t1, col * L.cols_per_group, (col + 1) * L.cols_per_group};
}

// Stores group g's parameters given its elements' range [lo, hi] (min and max are exact in any
// order, so a parallel reduction stores the same bytes as a scan).
KVTUNE_HD void store_group(const PackedLayout& L, uint8_t* packed, int64_t g, float lo, float hi) {
  const DeviceFormat& f = L.format;
  if (f.kind == CodecKind::nvfp4) {  // the per-tensor scale
    const float amax = -lo > hi ? -lo : hi;
    write_scale(packed, 0, f.static_scale > 0.0f ? f.static_scale : nvfp4_global_scale(amax, f.tensor_bound),
                ScaleType::f32);
    return;
  }
  if (is_fp8(f.kind)) {
    const float amax = -lo > hi ? -lo : hi;
    write_scale(packed + L.scale_offset, g, fp8_group_scale(f, amax), ScaleType::f32);
    return;
  }
  float scale, minimum;
  fit_int_group(f, lo, hi, scale, minimum);
  write_scale(packed + L.scale_offset, g, scale, f.scale_type);
  if (f.asymmetric) write_scale(packed + L.min_offset, g, minimum, f.scale_type);
}

template <class Src>
KVTUNE_HD void encode_group(const PackedLayout& L, uint8_t* packed, int64_t g, const Src& x) {
  if ((is_fp8(L.format.kind) || L.format.kind == CodecKind::nvfp4) && L.format.static_scale > 0.0f) {
    // A fixed scale depends on no element: appending tokens must not read the block's others.
    store_group(L, packed, g, 0.0f, 0.0f);
    return;
  }
  const GroupExtent e = group_extent(L, g);
  float lo = x(e.t0, e.c0), hi = lo;
  for (int64_t t = e.t0; t < e.t1; ++t) {
    for (int64_t c = e.c0; c < e.c1; ++c) {
      const float v = x(t, c);
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
  }
  store_group(L, packed, g, lo, hi);
}

// The groups that tokens [t0, t1) touch: [g0, g1). Empty for formats without groups.
KVTUNE_HD void groups_of_tokens(const PackedLayout& L, int64_t t0, int64_t t1, int64_t& g0, int64_t& g1) {
  g0 = g1 = 0;
  if (L.groups == 0 || t1 <= t0) return;
  if (one_block_group(L.format)) {
    g1 = L.groups;
    return;
  }
  g0 = (t0 / L.rows_per_tile) * L.groups_per_row;
  g1 = ((t1 + L.rows_per_tile - 1) / L.rows_per_tile) * L.groups_per_row;
}

// Payload units: a code byte (integer), an element (floats, fp8), a 32-element block (ggml) or a
// scale block with its codes (mx, nvfp4).
// The units of tokens [t0, t1) are [u0, u1). An integer byte holds codes of every token it
// touches, so a call must start and end on a byte (t * head_dim * bits a multiple of 8 at t0 and
// at t1, or t1 = tokens): otherwise encode_unit would read tokens outside [t0, t1).
KVTUNE_HD void units_of_tokens(const PackedLayout& L, int64_t t0, int64_t t1, int64_t& u0, int64_t& u1) {
  const int64_t d = L.head_dim;
  if (L.format.kind == CodecKind::integer) {
    u0 = t0 * d * L.format.bits / 8;
    u1 = packed_code_bytes(t1 * d, L.format.bits);
  } else if (is_ggml(L.format.kind)) {
    u0 = t0 * (d / ggml::kBlock);
    u1 = t1 * (d / ggml::kBlock);
  } else if (is_micro(L.format.kind)) {
    u0 = t0 * (d / L.format.group);
    u1 = t1 * (d / L.format.group);
  } else {
    u0 = t0 * d;
    u1 = t1 * d;
  }
}

template <class Src>
KVTUNE_HD void encode_unit(const PackedLayout& L, uint8_t* packed, int64_t u, const Src& x) {
  const DeviceFormat& f = L.format;
  const int64_t d = L.head_dim;
  switch (f.kind) {
    case CodecKind::f32: {
      const float v = x(u / d, u % d);
      memcpy(packed + 4 * u, &v, 4);
      return;
    }
    case CodecKind::f16:
    case CodecKind::bf16: {
      const float v = x(u / d, u % d);
      const uint16_t h = f.kind == CodecKind::f16 ? f32_to_f16_bits(v) : f32_to_bf16_bits(v);
      memcpy(packed + 2 * u, &h, 2);
      return;
    }
    case CodecKind::fp8_e4m3:
    case CodecKind::fp8_e5m2: {
      const int64_t t = u / d;
      packed[L.code_offset + u] = fp8_code(f.kind, x(t, u % d), fp8_block_scale(L, packed, t));
      return;
    }
    case CodecKind::integer: {
      // Every code with a bit in byte u, whole: codes [8u / b, (8u + 7) / b].
      const int bits = f.bits;
      const int64_t first = 8 * u / bits, last = (8 * u + 7) / bits;
      const int64_t n = L.tokens * d;
      uint32_t byte = 0;
      for (int64_t i = first; i <= last && i < n; ++i) {
        const int64_t t = i / d, c = i % d, g = group_index(L, t, c);
        const float s = read_scale(packed + L.scale_offset, g, f.scale_type);
        const float m = f.asymmetric ? read_scale(packed + L.min_offset, g, f.scale_type) : 0.0f;
        const int64_t shift = i * bits - 8 * u;  // the code's first bit relative to the byte, may be < 0
        const uint32_t code = int_code(f, x(t, c), s, m);
        byte |= shift >= 0 ? code << shift : code >> -shift;
      }
      packed[L.code_offset + u] = static_cast<uint8_t>(byte & 0xffu);
      return;
    }
    case CodecKind::mxfp4:
    case CodecKind::mxfp8:
    case CodecKind::nvfp4: {  // scale block u: its scale byte from its largest magnitude, then its codes
      const int64_t b = f.group, i0 = u * b, t = i0 / d, c0 = i0 % d;
      const MicroElement e = micro_element(f.kind);
      float amax = 0.0f;
      for (int64_t j = 0; j < b; ++j) {
        const float v = x(t, c0 + j);
        const float a = v < 0.0f ? -v : v;
        amax = a > amax ? a : amax;
      }
      const uint8_t code = f.kind == CodecKind::nvfp4 ? nvfp4_block_code(amax, read_scale(packed, 0, ScaleType::f32))
                                                      : mx_scale_code(amax, e);
      packed[L.scale_offset + u] = code;
      if (u == 0) {  // unit 0 also owns the zero padding between the scale bytes and the codes
        for (int64_t p = L.scale_offset + L.tokens * d / b; p < L.code_offset; ++p) packed[p] = 0;
      }
      const float scale = micro_scale(L, packed, u);
      for (int64_t j = 0; j < b; ++j) {
        const uint8_t q = micro_quantize(x(t, c0 + j), scale, e, f.ties_away);
        if (f.bits == 8) {
          packed[L.code_offset + i0 + j] = q;
        } else if (j % 2 == 0) {
          packed[L.code_offset + (i0 + j) / 2] = q;
        } else {
          packed[L.code_offset + (i0 + j) / 2] |= static_cast<uint8_t>(q << 4);
        }
      }
      return;
    }
    default: {  // ggml
      const int64_t blocks_per_row = d / ggml::kBlock;
      const int64_t t = u / blocks_per_row, c0 = (u % blocks_per_row) * ggml::kBlock;
      float v[ggml::kBlock];
      for (int j = 0; j < ggml::kBlock; ++j) v[j] = x(t, c0 + j);
      quantize_ggml_block(f.kind, v, packed + u * L.block_bytes);
      return;
    }
  }
}

}  // namespace kvtune::codec
