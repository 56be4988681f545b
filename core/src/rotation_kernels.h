// The row transforms behind the rotation policies (core/src/policy.cpp's RotatedScheme): the
// Hadamard groups of rotation=hadamard, vLLM's randomized Hadamard transform (rotation=rht) and the
// Haar matrix of rotation=random, vectorized for the CPU found at run time. Each gives the bits of
// its scalar reference (kvtune/codecs/{hadamard,rht,random_rotation}.h): tests/unit/rotation_test.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "kvtune/matrix.h"

namespace kvtune::rotation_kernels {

// Each contiguous group of `group` channels of every row of src, Hadamard-transformed into dst
// (the same shape; it may be src). The transform is an involution: the same call rotates back.
void rotate_rows(ConstMatrixView src, MatrixView dst, int64_t group);

// vLLM's RHT of every row of src into dst (the same shape; it may be src), or its inverse when
// back; signs = rht_signs(cols).
void rht_rows(ConstMatrixView src, MatrixView dst, const std::vector<float>& signs, bool back);

// Every row of x times the Haar matrix Q of (cols, seed), or its transpose when back.
void rotate_rows_random(MatrixView x, uint64_t seed, bool back);

// Whether a round trip into `out` may write its rotation back with rotate_back_streamed: AVX-512,
// 64-byte-aligned rows of whole vectors, and an output that outgrows the cache (outgrows_cache).
bool streams_back(MatrixView out);

// The rotation back into the output with streaming stores: the RHT's inverse when signs is given,
// else the Hadamard groups of `group` channels. False, nothing written, where there is no such
// path (the caller rotates back itself). end_streamed_stores() after the last call orders the
// stores before whatever comes next.
bool rotate_back_streamed(ConstMatrixView src, MatrixView dst, int64_t group, const float* signs);
void end_streamed_stores();

}  // namespace kvtune::rotation_kernels
