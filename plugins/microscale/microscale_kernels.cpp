#include "microscale_kernels.h"

#include <cstdint>

#include "kvtune/codecs/microscale.h"
#include "kvtune/numeric/bits.h"
#include "kvtune/numeric/multiversion.h"
#include "fp8/fp8_kernels.h"

namespace kvtune::builtin::microscale_kernels {
namespace {

// One block of B floats (abs_max_bits, with the block length known at compile time).
template <int B>
inline float abs_max_of(const float* x) {
  return abs_max_bits(x, B);
}

// MX scales are powers of two, so their blocks multiply by the exact reciprocal (the same bits);
// nvfp4's E4M3 scales divide.
template <int B, bool TiesAway>
inline void e2m1_block(const float* x, float scale, float* y) {
  if (const float r = exact_reciprocal(scale); r != 0.0f) {
    for (int j = 0; j < B; ++j) y[j] = codec::e2m1_round<TiesAway>(x[j] * r) * scale;
    return;
  }
  for (int j = 0; j < B; ++j) {
    const float v = scale > 0.0f ? x[j] / scale : 0.0f;
    y[j] = codec::e2m1_round<TiesAway>(v) * scale;
  }
}

// One multiversioned function per block size (target_clones does not apply to templates), each
// with its block loop inlined.
#define KVTUNE_MICRO_LOOPS(B)                                                                                  \
  KVTUNE_MULTIVERSION void abs_max_blocks_##B(const float* x, int64_t blocks, float* amax) {                   \
    for (int64_t k = 0; k < blocks; ++k) amax[k] = abs_max_of<B>(x + k * B);                                   \
  }                                                                                                            \
  KVTUNE_MULTIVERSION void e2m1_blocks_##B(const float* x, const float* scale, int64_t blocks, bool ties_away, \
                                           float* y) {                                                         \
    for (int64_t k = 0; k < blocks; ++k) {                                                                     \
      if (ties_away) {                                                                                         \
        e2m1_block<B, true>(x + k * B, scale[k], y + k * B);                                                   \
      } else {                                                                                                 \
        e2m1_block<B, false>(x + k * B, scale[k], y + k * B);                                                  \
      }                                                                                                        \
    }                                                                                                          \
  }
KVTUNE_MICRO_LOOPS(16)
KVTUNE_MICRO_LOOPS(32)
#undef KVTUNE_MICRO_LOOPS

KVTUNE_MULTIVERSION void mx_scales(float* amax, int64_t blocks, float element_max) {
  for (int64_t k = 0; k < blocks; ++k) amax[k] = codec::e8m0_up_value(amax[k] / element_max);
}

// The E4M3 block codes' values through the fp8 family's branch-free codec (a scale of 1 leaves
// x / 1 = x), then times the tensor scale.
void nvfp4_scales(float* amax, int64_t blocks, float global) {
  for (int64_t k = 0; k < blocks; ++k) amax[k] = amax[k] / codec::kE2M1MaxFinite / global;
  fp8_kernels::roundtrip(amax, 1.0f, amax, blocks, codec::Fp8Format::e4m3);
  for (int64_t k = 0; k < blocks; ++k) amax[k] = amax[k] * global;
}

}  // namespace

void scales_from_amax(float* amax, int64_t blocks, float element_max, float nvfp4_global) {
  if (nvfp4_global > 0.0f) return nvfp4_scales(amax, blocks, nvfp4_global);
  mx_scales(amax, blocks, element_max);
}

void block_abs_max(const float* x, int64_t blocks, int64_t block, float* amax) {
  if (block == 16) return abs_max_blocks_16(x, blocks, amax);
  abs_max_blocks_32(x, blocks, amax);
}

void e2m1_roundtrip(const float* x, const float* scale, int64_t blocks, int64_t block, bool ties_away, float* y) {
  if (block == 16) return e2m1_blocks_16(x, scale, blocks, ties_away, y);
  e2m1_blocks_32(x, scale, blocks, ties_away, y);
}

}  // namespace kvtune::builtin::microscale_kernels
