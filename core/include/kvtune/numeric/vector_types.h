// GCC/clang vector types whose loads and stores may use any address of their element type: the
// kernels read rows straight through them (a memcpy into a vector was split into stores that the
// load after them could not forward from).
//
// The alignment is lowered on a typedef of the vector type, never written beside vector_size():
// clang ignores aligned() there and keeps the vector's own (64 bytes for sixteen floats), so its
// builds could move them with aligned instructions, and UBSan reports every such access.
#pragma once

#include <cstdint>

namespace kvtune::simd {

typedef float f32x8_lanes __attribute__((vector_size(32)));
typedef float f32x16_lanes __attribute__((vector_size(64)));
typedef double f64x8_lanes __attribute__((vector_size(64)));
typedef int64_t i64x8_lanes __attribute__((vector_size(64)));
typedef uint64_t u64x8_lanes __attribute__((vector_size(64)));

typedef f32x8_lanes v8f __attribute__((aligned(4)));
typedef f32x16_lanes v16f __attribute__((aligned(4)));
typedef f64x8_lanes v8d __attribute__((aligned(8)));
typedef i64x8_lanes v8l __attribute__((aligned(8)));
typedef u64x8_lanes v8u __attribute__((aligned(8)));

}  // namespace kvtune::simd
