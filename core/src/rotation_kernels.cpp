#include "rotation_kernels.h"

#include <algorithm>
#include <cstring>

#include "kvtune/codecs/hadamard.h"
#include "kvtune/codecs/random_rotation.h"
#include "kvtune/codecs/rht.h"
#include "kvtune/numeric/cpu_features.h"
#include "kvtune/numeric/multiversion.h"
#include "kvtune/numeric/vector_types.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KVTUNE_STREAMED_ROTATION 1
#endif

#pragma GCC diagnostic ignored "-Wpsabi"  // the vector helpers are inlined; none crosses an ABI boundary

#define KVTUNE_ROTATION_CLONES KVTUNE_CLONES("arch=x86-64-v4", "arch=x86-64-v3")

// The butterflies as FMAs (KVTUNE_BUTTERFLY_FMA): each in-vector v · (±1) + s becomes one fused
// multiply-add, whose product by ±1 is exact, so its one rounding is the add's: the same bits. No
// other product there meets an add (the scale's and the signs' products feed the butterflies' own
// products and lane swaps), and rht.h's scalar path multiplies by ±1 only. One vector operation
// fewer per in-vector stage: rotation=rht around f32, 32 768 x 128 in cache, 1.46-1.50 -> 1.17-1.30 ms.
// (GCC only: clang, which builds the fuzzers, has no optimize attribute and keeps the plain sums.)
#if defined(__clang__)
#define KVTUNE_BUTTERFLY_FMA
#else
#define KVTUNE_BUTTERFLY_FMA __attribute__((optimize("fp-contract=fast")))
#endif

namespace kvtune::rotation_kernels {
namespace {

// hadamard_transform with the group size a constant, sixteen floats per vector (eight for a group
// of 8): every element goes through the same operations in the same order (the scale, then
// butterflies of length 1, 2, 4, 8 by swapping lanes, then 16 ... N/2 across vectors), so the result
// is the same bits. Within a vector, lane i pairs with lane i ^ len: the lower lane keeps a + b, the
// upper a - b (a the lower lane's value, b the upper's), each as v · (±1) + s with s the partner's
// value: the product by ±1 is exact, so it is the one rounded sum, also as one FMA
// (KVTUNE_BUTTERFLY_FMA; a + b and b + a are the same in IEEE arithmetic). Reads src and writes
// dst, which may be the same group: every value is loaded before the first store.
using simd::v16f;
using simd::v8d;  // the random rotation's sums
using simd::v8f;

// The butterflies across vectors, of Len, 2 Len, ... K / 2 vectors, each length its own
// instantiation so that every index is a constant and v stays in registers (a length known only at
// run time put the array on the stack).
template <int Len, int K>
[[gnu::always_inline]] inline void cross_butterflies(v16f* v) {
  if constexpr (Len < K) {
#pragma GCC unroll 16
    for (int i = 0; i < K; i += 2 * Len) {
#pragma GCC unroll 16
      for (int j = i; j < i + Len; ++j) {
        const v16f a = v[j], b = v[j + Len];
        v[j] = a + b;
        v[j + Len] = a - b;
      }
    }
    cross_butterflies<2 * Len, K>(v);
  }
}

// hadamard_butterflies on the N / 16 vectors of a group held in v: lengths 1, 2, 4, 8 within each
// vector, then 16 ... N/2 across vectors.
template <int N>
[[gnu::always_inline]] inline void butterflies16(v16f* v) {
  constexpr int kVectors = N / 16;
  const v16f sign1 = {1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1},
             sign2 = {1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1},
             sign4 = {1, 1, 1, 1, -1, -1, -1, -1, 1, 1, 1, 1, -1, -1, -1, -1},
             sign8 = {1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1, -1};
#pragma GCC unroll 16
  for (int k = 0; k < kVectors; ++k) {
    v16f x = v[k];
    x = x * sign1 + __builtin_shufflevector(x, x, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
    x = x * sign2 + __builtin_shufflevector(x, x, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
    x = x * sign4 + __builtin_shufflevector(x, x, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
    x = x * sign8 + __builtin_shufflevector(x, x, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
    v[k] = x;
  }
  cross_butterflies<1, kVectors>(v);
}

// hadamard_group's result for N >= 16, left in v (N / 16 vectors).
template <int N>
[[gnu::always_inline]] inline void hadamard_values(const float* src, v16f* v) {
#pragma GCC unroll 16
  for (int k = 0; k < N / 16; ++k) v[k] = *reinterpret_cast<const v16f*>(src + 16 * k) * hadamard_scale(N);
  butterflies16<N>(v);
}

template <int N>
[[gnu::always_inline]] inline void hadamard_group(const float* src, float* dst) {
  static_assert(N % 8 == 0 && (N & (N - 1)) == 0);
  // Loads and stores straight through the vector types (aligned(4): any float address): a memcpy
  // into the array was split into two 16-byte stores that the 32-byte load after it could not
  // forward from, a stall that cost two thirds of the transform.
  if constexpr (N == 8) {
    v8f v = *reinterpret_cast<const v8f*>(src) * hadamard_scale(N);
    const v8f sign1 = {1, -1, 1, -1, 1, -1, 1, -1}, sign2 = {1, 1, -1, -1, 1, 1, -1, -1},
              sign4 = {1, 1, 1, 1, -1, -1, -1, -1};
    v = v * sign1 + __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6);
    v = v * sign2 + __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5);
    v = v * sign4 + __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3);
    *reinterpret_cast<v8f*>(dst) = v;
  } else {
    v16f v[N / 16];
    hadamard_values<N>(src, v);
#pragma GCC unroll 16
    for (int k = 0; k < N / 16; ++k) *reinterpret_cast<v16f*>(dst + 16 * k) = v[k];
  }
}

// rht_forward (Back false) or rht_inverse (Back true) of one head of N floats, src to dst (which
// may be src), in the scalar functions' order: forward the signs' exact products, then the
// butterflies; inverse the butterflies, then (y · s) / N per element, as y · (s / N): s / N = ±2^-k
// is exact, and both round the same real number y · s / N once, so they are the same bits. The
// signs (over N when Back) come in as vectors.
template <int N, bool Back>
[[gnu::always_inline]] inline void rht_values(const float* src, const v16f* signs, v16f* v) {
  static_assert(N % 16 == 0 && (N & (N - 1)) == 0);
#pragma GCC unroll 16
  for (int k = 0; k < N / 16; ++k) {
    v[k] = *reinterpret_cast<const v16f*>(src + 16 * k);
    if constexpr (!Back) v[k] = v[k] * signs[k];
  }
  butterflies16<N>(v);
#pragma GCC unroll 16
  for (int k = 0; k < N / 16; ++k) {
    if constexpr (Back) v[k] = v[k] * signs[k];
  }
}

template <int N, bool Back>
[[gnu::always_inline]] inline void rht_group(const float* src, float* dst, const v16f* signs) {
  v16f v[N / 16];
  rht_values<N, Back>(src, signs, v);
#pragma GCC unroll 16
  for (int k = 0; k < N / 16; ++k) *reinterpret_cast<v16f*>(dst + 16 * k) = v[k];
}

// rht_signs(d) as vectors, over d for the inverse (exact: ±2^-k).
template <int N, bool Back>
[[gnu::always_inline]] inline void rht_sign_vectors(const float* signs, v16f* s) {
#pragma GCC unroll 16
  for (int k = 0; k < N / 16; ++k) {
    s[k] = *reinterpret_cast<const v16f*>(signs + 16 * k);
    if constexpr (Back) s[k] = s[k] * (1.0f / static_cast<float>(N));
  }
}

// The signs are loaded once, into values the row loop keeps in registers: loaded from memory in
// every row, behind the previous row's stores, they made the transform about 1 ms slower at
// 32 768 x 128 (bench_schemes).
template <int N, bool Back>
[[gnu::always_inline]] inline void rht_heads(ConstMatrixView src, MatrixView dst, const float* signs) {
  v16f s[N / 16];
  rht_sign_vectors<N, Back>(signs, s);
  for (int64_t r = 0; r < src.rows; ++r) rht_group<N, Back>(src.row(r), dst.row(r), s);
}

template <int N>
[[gnu::always_inline]] inline void rotate_groups(ConstMatrixView src, MatrixView dst) {
  for (int64_t r = 0; r < src.rows; ++r) {
    for (int64_t c = 0; c < src.cols; c += N) hadamard_group<N>(src.row(r) + c, dst.row(r) + c);
  }
}

// rotate_rows for the groups held in vectors; false for any other group.
KVTUNE_ROTATION_CLONES KVTUNE_BUTTERFLY_FMA bool rotate_rows_in_vectors(ConstMatrixView src, MatrixView dst,
                                                                        int64_t group) {
  switch (group) {
    case 8: return rotate_groups<8>(src, dst), true;
    case 16: return rotate_groups<16>(src, dst), true;
    case 32: return rotate_groups<32>(src, dst), true;
    case 64: return rotate_groups<64>(src, dst), true;
    case 128: return rotate_groups<128>(src, dst), true;
    case 256: return rotate_groups<256>(src, dst), true;
    default: return false;
  }
}

#if KVTUNE_STREAMED_ROTATION
// The values of a group of N floats, streamed to dst. The streamed loops below repeat rht_heads'
// and rotate_groups' shape: a store with a target attribute cannot be inlined into those untargeted
// helpers (GCC refuses the always_inline), so they have loops of their own.
template <int N>
[[gnu::always_inline]] __attribute__((target("avx512f"))) inline void stream_values(float* dst, const v16f* v) {
#pragma GCC unroll 16
  for (int k = 0; k < N / 16; ++k) _mm512_stream_ps(dst + 16 * k, reinterpret_cast<__m512>(v[k]));
}

template <int N>
[[gnu::always_inline]] __attribute__((target("avx512f"))) inline void rht_back_streamed(ConstMatrixView src,
                                                                                       MatrixView dst,
                                                                                       const float* signs) {
  v16f s[N / 16], v[N / 16];
  rht_sign_vectors<N, true>(signs, s);
  for (int64_t r = 0; r < src.rows; ++r) {
    rht_values<N, true>(src.row(r), s, v);
    stream_values<N>(dst.row(r), v);
  }
}

template <int N>
[[gnu::always_inline]] __attribute__((target("avx512f"))) inline void hadamard_back_streamed(ConstMatrixView src,
                                                                                            MatrixView dst) {
  v16f v[N / 16];
  for (int64_t r = 0; r < src.rows; ++r) {
    for (int64_t c = 0; c < src.cols; c += N) {
      hadamard_values<N>(src.row(r) + c, v);
      stream_values<N>(dst.row(r) + c, v);
    }
  }
}

#endif

// Every row times the Haar matrix Q of (head_dim, seed), or its transpose to rotate back.
// y[i] = float(Σ_j m[j·n + i] · x[j]) for every row: rotate_vector's arithmetic (each sum in float64
// from 0, in the order j = 0, 1, ..., a product then an add, without FMA contraction), with
// the n sums of a row advancing together so that they vectorize. For n a multiple of 32, four rows
// go together, 32 sums at a time held in sixteen vectors while j runs: each slice of m is loaded
// once for four rows, and no sum goes through memory (row by row, the n sums were loaded and stored
// again for every j). Every sum sees the same operations in the same order, so the same bits.
KVTUNE_ROTATION_CLONES void rotate_rows_by(MatrixView x, const double* __restrict m) {
  const int64_t n = x.cols;
  constexpr int kRows = 4, kVectors = 4;  // 4 rows x 32 sums
  int64_t r0 = 0;
  if (n % (8 * kVectors) == 0) {
    std::vector<double> xd(static_cast<size_t>(kRows * n));  // the rows' inputs, widened once
    for (; r0 + kRows <= x.rows; r0 += kRows) {
      for (int k = 0; k < kRows; ++k) {
        for (int64_t j = 0; j < n; ++j) xd[size_t(k * n + j)] = x.row(r0 + k)[j];
      }
      for (int64_t c0 = 0; c0 < n; c0 += 8 * kVectors) {
        v8d acc[kRows][kVectors] = {};
        for (int64_t j = 0; j < n; ++j) {
          v8d column[kVectors];
          std::memcpy(column, m + j * n + c0, sizeof column);
#pragma GCC unroll 4
          for (int k = 0; k < kRows; ++k) {
            const double xj = xd[size_t(k * n + j)];
#pragma GCC unroll 4
            for (int q = 0; q < kVectors; ++q) acc[k][q] += column[q] * xj;
          }
        }
        for (int k = 0; k < kRows; ++k) {
          for (int q = 0; q < kVectors; ++q) {
            const v8f narrow = __builtin_convertvector(acc[k][q], v8f);  // each lane as static_cast<float>
            std::memcpy(x.row(r0 + k) + c0 + 8 * q, &narrow, sizeof narrow);
          }
        }
      }
    }
  }
  std::vector<double> acc_buffer(static_cast<size_t>(n));
  double* __restrict acc = acc_buffer.data();
  for (int64_t r = r0; r < x.rows; ++r) {
    float* row = x.row(r);
    std::fill(acc, acc + n, 0.0);
    for (int64_t j = 0; j < n; ++j) {
      const double xj = row[j];
      const double* __restrict column = m + j * n;
      for (int64_t i = 0; i < n; ++i) acc[i] += column[i] * xj;
    }
    for (int64_t i = 0; i < n; ++i) row[i] = static_cast<float>(acc[i]);
  }
}

}  // namespace

// vLLM's RHT (forward, or its inverse when back) of every row of src into dst (the same shape; it
// may be src itself), signs = rht_signs(cols): heads of 16 ... 256 channels in vectors, any other
// power of two by rht.h's scalar functions.
KVTUNE_ROTATION_CLONES KVTUNE_BUTTERFLY_FMA void rht_rows(ConstMatrixView src, MatrixView dst,
                                                         const std::vector<float>& signs, bool back) {
  const float* s = signs.data();
  switch (src.cols) {
    case 16: return back ? rht_heads<16, true>(src, dst, s) : rht_heads<16, false>(src, dst, s);
    case 32: return back ? rht_heads<32, true>(src, dst, s) : rht_heads<32, false>(src, dst, s);
    case 64: return back ? rht_heads<64, true>(src, dst, s) : rht_heads<64, false>(src, dst, s);
    case 128: return back ? rht_heads<128, true>(src, dst, s) : rht_heads<128, false>(src, dst, s);
    case 256: return back ? rht_heads<256, true>(src, dst, s) : rht_heads<256, false>(src, dst, s);
    default:
      for (int64_t r = 0; r < src.rows; ++r) {
        if (src.row(r) != dst.row(r)) std::copy(src.row(r), src.row(r) + src.cols, dst.row(r));
        back ? rht_inverse(dst.row(r), signs) : rht_forward(dst.row(r), signs);
      }
  }
}

// Rotates each contiguous group of channels of every row of src into dst (the same shape; it may
// be src itself). The transform is an involution, so the same call undoes it.
void rotate_rows(ConstMatrixView src, MatrixView dst, int64_t group) {
  if (rotate_rows_in_vectors(src, dst, group)) return;
  for (int64_t r = 0; r < src.rows; ++r) {  // hadamard_transform's inexact scale products meet adds: no FMA
    if (src.row(r) != dst.row(r)) std::copy(src.row(r), src.row(r) + src.cols, dst.row(r));
    for (int64_t c = 0; c < src.cols; c += group) hadamard_transform(dst.row(r) + c, static_cast<int>(group));
  }
}

#if KVTUNE_STREAMED_ROTATION
// The rotation back of rows into the output with streaming stores (the caller ends with
// end_streamed_stores()): a normal store first reads the line it writes, and those reads, in a burst at
// the end of each tile, stalled the tiled round trip (at 32 768 x 128, best of eight alternate
// runs: vLLM's int4_per_token_head 1.94 -> 1.53 ms, q4_0:rotation=hadamard 1.62 -> 1.43 ms).
// rotation=rht (signs given) or the Hadamard groups of `group` channels, 16 to 256; false, nothing
// written, for any other group. dst's rows must be 64-byte aligned and the machine must have
// AVX-512 (streams_back).
__attribute__((target("avx512f"))) KVTUNE_BUTTERFLY_FMA bool rotate_back_streamed(ConstMatrixView src, MatrixView dst,
                                                                                 int64_t group, const float* signs) {
  switch (group) {
    case 16: return signs ? rht_back_streamed<16>(src, dst, signs) : hadamard_back_streamed<16>(src, dst), true;
    case 32: return signs ? rht_back_streamed<32>(src, dst, signs) : hadamard_back_streamed<32>(src, dst), true;
    case 64: return signs ? rht_back_streamed<64>(src, dst, signs) : hadamard_back_streamed<64>(src, dst), true;
    case 128: return signs ? rht_back_streamed<128>(src, dst, signs) : hadamard_back_streamed<128>(src, dst), true;
    case 256: return signs ? rht_back_streamed<256>(src, dst, signs) : hadamard_back_streamed<256>(src, dst), true;
    default: return false;
  }
}
#else
bool rotate_back_streamed(ConstMatrixView, MatrixView, int64_t, const float*) { return false; }
#endif

// Whether a round trip into `out` streams its rotation back: AVX-512, whole lines, and an output of
// 8 MiB or more (a smaller one may still be in cache when the caller reads it; the codecs' rule,
// plugins/streaming_stores.h).
bool streams_back(MatrixView out) {
#if KVTUNE_STREAMED_ROTATION
  return cpu_has_avx512() && reinterpret_cast<uintptr_t>(out.data) % 64 == 0 && out.cols % 16 == 0 &&
         outgrows_cache(out.rows * out.cols * int64_t(sizeof(float)));
#else
  (void)out;
  return false;
#endif
}

void end_streamed_stores() {
#if KVTUNE_STREAMED_ROTATION
  _mm_sfence();
#endif
}

void rotate_rows_random(MatrixView x, uint64_t seed, bool back) {
  const auto q = haar_rotation(x.cols, seed);
  if (back) return rotate_rows_by(x, q->data());  // Qᵀ x: column j of Qᵀ is row j of Q
  // Q x: column j of Q, laid out contiguously.
  const size_t n = static_cast<size_t>(x.cols);
  std::vector<double> columns(n * n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) columns[j * n + i] = (*q)[i * n + j];
  }
  rotate_rows_by(x, columns.data());
}

}  // namespace kvtune::rotation_kernels
