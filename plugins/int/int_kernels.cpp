#include "int_kernels.h"

#include "kvtune/numeric/multiversion.h"

#include <algorithm>
#include <cmath>

#include "kvtune/codecs/int_codec.h"
#include "kvtune/numeric/cpu_features.h"
#include "prefetch.h"

#include "lane_reductions.h"
#include "round_lanes.h"
#include "stored_scale_lanes.h"
#include "streaming_stores.h"
#include "x86_intrinsics.h"

namespace kvtune::builtin::int_kernels {

using codec::int_asym_level;
using codec::int_sym_level;

// ---- portable references --------------------------------------------------------------------

void sym_segment_exact(const float* x, float divisor, float out_scale, float qmax, float* y, int64_t n) {
  for (int64_t c = 0; c < n; ++c) y[c] = int_sym_level(x[c], divisor, qmax) * out_scale;
}

void asym_segment_exact(const float* x, float minimum, float divisor, float out_scale, float out_min, float top,
                        float* y, int64_t n) {
  for (int64_t c = 0; c < n; ++c) y[c] = int_asym_level(x[c], minimum, divisor, top) * out_scale + out_min;
}

namespace {

void sym_columns_exact(const float* x, const float* divisor, const float* out_scale, float qmax, float* y,
                       int64_t n) {
  for (int64_t c = 0; c < n; ++c) y[c] = int_sym_level(x[c], divisor[c], qmax) * out_scale[c];
}

void asym_columns_exact(const float* x, const float* minimum, const float* divisor, const float* out_scale,
                        const float* out_min, float top, float* y, int64_t n) {
  for (int64_t c = 0; c < n; ++c) y[c] = int_asym_level(x[c], minimum[c], divisor[c], top) * out_scale[c] + out_min[c];
}

#if KVTUNE_X86_INTRINSICS
// Why the fast path is exact. Let q = x / d exactly, r = fl(1/d) and v = fl(x * r). Then
// |v - q| <= |q| * (2^-24 + 2^-24 + 2^-48) and |fl(q) - q| <= |q| * 2^-24, so v and fl(q) differ by
// less than |q| * 2^-22. Their clamped values (clamp is monotone) can only give different levels
// when a half-integer h inside the clamp range, |h| < 255, lies between them; then |q| < 256, the
// two differ by less than 256 * 2^-22 = 2^-14, and the clamped v lies within 2^-14 of h. So when
// the clamped v lies farther than kTieGuard = 2^-12 (four times that) from every half-integer,
// rne(clamp(v)) == rne(clamp(fl(q))). Vectors with any lane inside the guard band (about 0.05 % of
// random values, under 1 % of 16-lane vectors) are recomputed with division. r must be finite:
// fast_reciprocal returns 0 otherwise and the callers then divide.
constexpr float kTieGuard = 1.0f / 4096.0f;

// Levels of 8 values given (x - m) in `num`, per-lane reciprocal and divisor, and clamp bounds.
__attribute__((target("avx2"))) inline __m256 levels8(__m256 num, __m256 recip, __m256 divisor, __m256 lo,
                                                      __m256 hi) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 tie_band = _mm256_set1_ps(0.5f - kTieGuard);
  const __m256 v = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(num, recip), lo), hi);
  __m256 level = rne(v);
  const __m256 dist = _mm256_and_ps(_mm256_sub_ps(v, level), abs_mask);
  if (_mm256_movemask_ps(_mm256_cmp_ps(dist, tie_band, _CMP_GT_OQ)) != 0) {
    level = rne(_mm256_min_ps(_mm256_max_ps(_mm256_div_ps(num, divisor), lo), hi));
  }
  return level;
}

__attribute__((target("avx2"))) void sym_segment_avx2(const float* x, float divisor, float reciprocal,
                                                      float out_scale, float qmax, float* y, int64_t n) {
  const __m256 r = _mm256_set1_ps(reciprocal), d = _mm256_set1_ps(divisor), s = _mm256_set1_ps(out_scale);
  const __m256 lo = _mm256_set1_ps(-qmax), hi = _mm256_set1_ps(qmax);
  int64_t c = 0;
  for (; c + 8 <= n; c += 8) {
    _mm256_storeu_ps(y + c, _mm256_mul_ps(levels8(_mm256_loadu_ps(x + c), r, d, lo, hi), s));
  }
  sym_segment_exact(x + c, divisor, out_scale, qmax, y + c, n - c);
}

__attribute__((target("avx2"))) void asym_segment_avx2(const float* x, float minimum, float divisor,
                                                       float reciprocal, float out_scale, float out_min, float top,
                                                       float* y, int64_t n) {
  const __m256 r = _mm256_set1_ps(reciprocal), d = _mm256_set1_ps(divisor), s = _mm256_set1_ps(out_scale);
  const __m256 m = _mm256_set1_ps(minimum), om = _mm256_set1_ps(out_min);
  const __m256 lo = _mm256_setzero_ps(), hi = _mm256_set1_ps(top);
  int64_t c = 0;
  for (; c + 8 <= n; c += 8) {
    const __m256 level = levels8(_mm256_sub_ps(_mm256_loadu_ps(x + c), m), r, d, lo, hi);
    _mm256_storeu_ps(y + c, _mm256_add_ps(_mm256_mul_ps(level, s), om));
  }
  asym_segment_exact(x + c, minimum, divisor, out_scale, out_min, top, y + c, n - c);
}

__attribute__((target("avx2"))) void sym_columns_avx2(const float* x, const float* divisor, const float* reciprocal,
                                                      const float* out_scale, float qmax, float* y, int64_t n) {
  const __m256 lo = _mm256_set1_ps(-qmax), hi = _mm256_set1_ps(qmax);
  int64_t c = 0;
  for (; c + 8 <= n; c += 8) {
    const __m256 d = _mm256_loadu_ps(divisor + c);
    const __m256 r = _mm256_loadu_ps(reciprocal + c);
    const __m256 level = levels8(_mm256_loadu_ps(x + c), r, d, lo, hi);
    _mm256_storeu_ps(y + c, _mm256_mul_ps(level, _mm256_loadu_ps(out_scale + c)));
  }
  sym_columns_exact(x + c, divisor + c, out_scale + c, qmax, y + c, n - c);
}

__attribute__((target("avx2"))) void asym_columns_avx2(const float* x, const float* minimum, const float* divisor,
                                                       const float* reciprocal, const float* out_scale,
                                                       const float* out_min, float top, float* y, int64_t n) {
  const __m256 lo = _mm256_setzero_ps(), hi = _mm256_set1_ps(top);
  int64_t c = 0;
  for (; c + 8 <= n; c += 8) {
    const __m256 d = _mm256_loadu_ps(divisor + c);
    const __m256 r = _mm256_loadu_ps(reciprocal + c);
    const __m256 num = _mm256_sub_ps(_mm256_loadu_ps(x + c), _mm256_loadu_ps(minimum + c));
    const __m256 level = levels8(num, r, d, lo, hi);
    _mm256_storeu_ps(y + c, _mm256_add_ps(_mm256_mul_ps(level, _mm256_loadu_ps(out_scale + c)),
                                          _mm256_loadu_ps(out_min + c)));
  }
  asym_columns_exact(x + c, minimum + c, divisor + c, out_scale + c, out_min + c, top, y + c, n - c);
}

// The same kernels sixteen lanes wide (AVX-512 F + DQ), the remainder through the AVX2 ones: the
// same operations per lane, so the same bits. The clamp's max/min return their second operand for
// a NaN lane in both widths, and the magic-number rounding (not vrndscaleps, which would keep -0)
// is the AVX2 path's.

KVTUNE_AVX512 inline __m512 levels16(__m512 num, __m512 recip, __m512 divisor, __m512 lo, __m512 hi) {
  const __m512 v = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(num, recip), lo), hi);
  __m512 level = rne16(v);
  const __m512 dist = _mm512_abs_ps(_mm512_sub_ps(v, level));
  if (_mm512_cmp_ps_mask(dist, _mm512_set1_ps(0.5f - kTieGuard), _CMP_GT_OQ) != 0) {
    level = rne16(_mm512_min_ps(_mm512_max_ps(_mm512_div_ps(num, divisor), lo), hi));
  }
  return level;
}

KVTUNE_AVX512 void sym_segment_avx512(const float* x, float divisor, float reciprocal, float out_scale, float qmax,
                                      float* y, int64_t n) {
  const __m512 r = _mm512_set1_ps(reciprocal), d = _mm512_set1_ps(divisor), s = _mm512_set1_ps(out_scale);
  const __m512 lo = _mm512_set1_ps(-qmax), hi = _mm512_set1_ps(qmax);
  int64_t c = 0;
  for (; c + 16 <= n; c += 16) {
    _mm512_storeu_ps(y + c, _mm512_mul_ps(levels16(_mm512_loadu_ps(x + c), r, d, lo, hi), s));
  }
  sym_segment_avx2(x + c, divisor, reciprocal, out_scale, qmax, y + c, n - c);
}

KVTUNE_AVX512 void asym_segment_avx512(const float* x, float minimum, float divisor, float reciprocal,
                                       float out_scale, float out_min, float top, float* y, int64_t n) {
  const __m512 r = _mm512_set1_ps(reciprocal), d = _mm512_set1_ps(divisor), s = _mm512_set1_ps(out_scale);
  const __m512 m = _mm512_set1_ps(minimum), om = _mm512_set1_ps(out_min);
  const __m512 lo = _mm512_setzero_ps(), hi = _mm512_set1_ps(top);
  int64_t c = 0;
  for (; c + 16 <= n; c += 16) {
    const __m512 level = levels16(_mm512_sub_ps(_mm512_loadu_ps(x + c), m), r, d, lo, hi);
    _mm512_storeu_ps(y + c, _mm512_add_ps(_mm512_mul_ps(level, s), om));
  }
  asym_segment_avx2(x + c, minimum, divisor, reciprocal, out_scale, out_min, top, y + c, n - c);
}

KVTUNE_AVX512 void sym_columns_avx512(const float* x, const float* divisor, const float* reciprocal,
                                      const float* out_scale, float qmax, float* y, int64_t n) {
  const __m512 lo = _mm512_set1_ps(-qmax), hi = _mm512_set1_ps(qmax);
  int64_t c = 0;
  for (; c + 16 <= n; c += 16) {
    const __m512 level =
        levels16(_mm512_loadu_ps(x + c), _mm512_loadu_ps(reciprocal + c), _mm512_loadu_ps(divisor + c), lo, hi);
    _mm512_storeu_ps(y + c, _mm512_mul_ps(level, _mm512_loadu_ps(out_scale + c)));
  }
  sym_columns_avx2(x + c, divisor + c, reciprocal + c, out_scale + c, qmax, y + c, n - c);
}

KVTUNE_AVX512 void asym_columns_avx512(const float* x, const float* minimum, const float* divisor,
                                       const float* reciprocal, const float* out_scale, const float* out_min,
                                       float top, float* y, int64_t n) {
  const __m512 lo = _mm512_setzero_ps(), hi = _mm512_set1_ps(top);
  int64_t c = 0;
  for (; c + 16 <= n; c += 16) {
    const __m512 num = _mm512_sub_ps(_mm512_loadu_ps(x + c), _mm512_loadu_ps(minimum + c));
    const __m512 level = levels16(num, _mm512_loadu_ps(reciprocal + c), _mm512_loadu_ps(divisor + c), lo, hi);
    _mm512_storeu_ps(y + c, _mm512_add_ps(_mm512_mul_ps(level, _mm512_loadu_ps(out_scale + c)),
                                          _mm512_loadu_ps(out_min + c)));
  }
  asym_columns_avx2(x + c, minimum + c, divisor + c, reciprocal + c, out_scale + c, out_min + c, top, y + c, n - c);
}

// A [rows, n] tile (row stride n), one group per column, sixteen columns at a time down the rows:
// each column's parameters are loaded once per tile instead of once per row. Per lane the operations
// are asym_columns_avx512's, so the bits are too; the n % 16 last columns go row by row. `stream`:
// non-temporal stores (y and every row 64-byte aligned; plugins/streaming_stores.h says when).
// `next` (or null): the next tile's rows, one line asked for per vector computed.
KVTUNE_AVX512 void sym_column_tile_avx512(const float* x, int64_t rows, int64_t n, const float* divisor,
                                          const float* reciprocal, const float* out_scale, float qmax, float* y,
                                          bool stream, const float* next) {
  const __m512 lo = _mm512_set1_ps(-qmax), hi = _mm512_set1_ps(qmax);
  const int64_t body = n - n % 16;
  for (int64_t c = 0; c < body; c += 16) {
    const __m512 r = _mm512_loadu_ps(reciprocal + c), d = _mm512_loadu_ps(divisor + c);
    const __m512 s = _mm512_loadu_ps(out_scale + c);
    for (int64_t i = 0; i < rows; ++i) {
      if (next != nullptr) _mm_prefetch(reinterpret_cast<const char*>(next + i * n + c), _MM_HINT_T0);
      const __m512 level = levels16(_mm512_loadu_ps(x + i * n + c), r, d, lo, hi);
      store16(y + i * n + c, _mm512_mul_ps(level, s), stream);
    }
  }
  if (stream) _mm_sfence();  // streaming stores are weakly ordered: visible before the caller reads
  if (body == n) return;
  for (int64_t i = 0; i < rows; ++i) {
    sym_columns_avx2(x + i * n + body, divisor + body, reciprocal + body, out_scale + body, qmax, y + i * n + body,
                     n - body);
  }
}

KVTUNE_AVX512 void asym_column_tile_avx512(const float* x, int64_t rows, int64_t n, const float* minimum,
                                           const float* divisor, const float* reciprocal, const float* out_scale,
                                           const float* out_min, float top, float* y, bool stream,
                                           const float* next) {
  const __m512 lo = _mm512_setzero_ps(), hi = _mm512_set1_ps(top);
  const int64_t body = n - n % 16;
  for (int64_t c = 0; c < body; c += 16) {
    const __m512 m = _mm512_loadu_ps(minimum + c), r = _mm512_loadu_ps(reciprocal + c);
    const __m512 d = _mm512_loadu_ps(divisor + c), s = _mm512_loadu_ps(out_scale + c);
    const __m512 om = _mm512_loadu_ps(out_min + c);
    for (int64_t i = 0; i < rows; ++i) {
      if (next != nullptr) _mm_prefetch(reinterpret_cast<const char*>(next + i * n + c), _MM_HINT_T0);
      const __m512 level = levels16(_mm512_sub_ps(_mm512_loadu_ps(x + i * n + c), m), r, d, lo, hi);
      store16(y + i * n + c, _mm512_add_ps(_mm512_mul_ps(level, s), om), stream);
    }
  }
  if (stream) _mm_sfence();
  if (body == n) return;
  for (int64_t i = 0; i < rows; ++i) {
    asym_columns_avx2(x + i * n + body, minimum + body, divisor + body, reciprocal + body, out_scale + body,
                      out_min + body, top, y + i * n + body, n - body);
  }
}

bool have_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

#endif

}  // namespace

// ---- dispatch ---------------------------------------------------------------------------------

float fast_reciprocal(float divisor) {
  const float r = 1.0f / divisor;
  return std::isfinite(r) ? r : 0.0f;
}

void sym_columns(const float* x, const float* divisor, const float* reciprocal, const float* out_scale, float qmax,
                 float* y, int64_t n) {
#if KVTUNE_X86_INTRINSICS
  if (reciprocal != nullptr && cpu_has_avx512()) return sym_columns_avx512(x, divisor, reciprocal, out_scale, qmax, y, n);
  if (reciprocal != nullptr && have_avx2()) return sym_columns_avx2(x, divisor, reciprocal, out_scale, qmax, y, n);
#endif
  sym_columns_exact(x, divisor, out_scale, qmax, y, n);
}

void asym_columns(const float* x, const float* minimum, const float* divisor, const float* reciprocal,
                  const float* out_scale, const float* out_min, float top, float* y, int64_t n) {
#if KVTUNE_X86_INTRINSICS
  if (reciprocal != nullptr && cpu_has_avx512()) {
    return asym_columns_avx512(x, minimum, divisor, reciprocal, out_scale, out_min, top, y, n);
  }
  if (reciprocal != nullptr && have_avx2()) {
    return asym_columns_avx2(x, minimum, divisor, reciprocal, out_scale, out_min, top, y, n);
  }
#endif
  asym_columns_exact(x, minimum, divisor, out_scale, out_min, top, y, n);
}

void sym_column_tile(const float* x, int64_t rows, int64_t n, const float* divisor, const float* reciprocal,
                     const float* out_scale, float qmax, float* y, bool stream, const float* next) {
#if KVTUNE_X86_INTRINSICS
  if (reciprocal != nullptr && cpu_has_avx512()) {
    return sym_column_tile_avx512(x, rows, n, divisor, reciprocal, out_scale, qmax, y, stream, next);
  }
#endif
  for (int64_t i = 0; i < rows; ++i) sym_columns(x + i * n, divisor, reciprocal, out_scale, qmax, y + i * n, n);
}

void asym_column_tile(const float* x, int64_t rows, int64_t n, const float* minimum, const float* divisor,
                      const float* reciprocal, const float* out_scale, const float* out_min, float top, float* y,
                      bool stream, const float* next) {
#if KVTUNE_X86_INTRINSICS
  if (reciprocal != nullptr && cpu_has_avx512()) {
    return asym_column_tile_avx512(x, rows, n, minimum, divisor, reciprocal, out_scale, out_min, top, y, stream,
                                   next);
  }
#endif
  for (int64_t i = 0; i < rows; ++i) {
    asym_columns(x + i * n, minimum, divisor, reciprocal, out_scale, out_min, top, y + i * n, n);
  }
}

void sym_segment(const float* x, float divisor, float reciprocal, float out_scale, float qmax, float* y, int64_t n) {
#if KVTUNE_X86_INTRINSICS
  if (reciprocal != 0.0f && cpu_has_avx512()) return sym_segment_avx512(x, divisor, reciprocal, out_scale, qmax, y, n);
  if (reciprocal != 0.0f && have_avx2()) return sym_segment_avx2(x, divisor, reciprocal, out_scale, qmax, y, n);
#endif
  sym_segment_exact(x, divisor, out_scale, qmax, y, n);
}

void asym_segment(const float* x, float minimum, float divisor, float reciprocal, float out_scale, float out_min,
                  float top, float* y, int64_t n) {
#if KVTUNE_X86_INTRINSICS
  if (reciprocal != 0.0f && cpu_has_avx512()) {
    return asym_segment_avx512(x, minimum, divisor, reciprocal, out_scale, out_min, top, y, n);
  }
  if (reciprocal != 0.0f && have_avx2()) {
    return asym_segment_avx2(x, minimum, divisor, reciprocal, out_scale, out_min, top, y, n);
  }
#endif
  asym_segment_exact(x, minimum, divisor, out_scale, out_min, top, y, n);
}

// Min/max loops are element-wise or per lane, so the compiler vectorizes them exactly; the AVX2
// clone only widens the vectors.

namespace {

KVTUNE_MULTIVERSION void column_min_max_portable(const float* x, int64_t rows, int64_t n, float* lo, float* hi) {
  for (int64_t c = 0; c < n; ++c) lo[c] = hi[c] = x[c];
  int64_t r = 1;
  // Four rows per sweep: one load and store of lo/hi per four rows of data.
  for (; r + 4 <= rows; r += 4) {
    const float *a = x + r * n, *b = a + n, *e = b + n, *f = e + n;
    for (int64_t c = 0; c < n; ++c) {
      float l = lo[c], h = hi[c];
      l = a[c] < l ? a[c] : l;
      h = a[c] > h ? a[c] : h;
      l = b[c] < l ? b[c] : l;
      h = b[c] > h ? b[c] : h;
      l = e[c] < l ? e[c] : l;
      h = e[c] > h ? e[c] : h;
      l = f[c] < l ? f[c] : l;
      h = f[c] > h ? f[c] : h;
      lo[c] = l;
      hi[c] = h;
    }
  }
  for (; r < rows; ++r) {
    const float* a = x + r * n;
    for (int64_t c = 0; c < n; ++c) {
      lo[c] = a[c] < lo[c] ? a[c] : lo[c];
      hi[c] = a[c] > hi[c] ? a[c] : hi[c];
    }
  }
}

#if KVTUNE_X86_INTRINSICS
// Up to eight column vectors (128 columns) held in registers down all the rows: the portable loop
// stores its extremes back every four rows, and those stores were half its time. Per lane the
// comparisons are the portable loop's, in its row order and with its operand order (min(a, l) is
// a < l ? a : l), so NaN and signed zeros come out the same.
template <int Vectors>
KVTUNE_AVX512 inline void column_min_max_vectors(const float* x, int64_t rows, int64_t n, float* lo, float* hi) {
  __m512 l[Vectors], h[Vectors];
  for (int v = 0; v < Vectors; ++v) l[v] = h[v] = _mm512_loadu_ps(x + 16 * v);
  for (int64_t r = 1; r < rows; ++r) {
    const float* a = x + r * n;
    for (int v = 0; v < Vectors; ++v) {
      const __m512 e = _mm512_loadu_ps(a + 16 * v);
      l[v] = _mm512_min_ps(e, l[v]);
      h[v] = _mm512_max_ps(e, h[v]);
    }
  }
  for (int v = 0; v < Vectors; ++v) _mm512_storeu_ps(lo + 16 * v, l[v]), _mm512_storeu_ps(hi + 16 * v, h[v]);
}

KVTUNE_AVX512 void column_min_max_avx512(const float* x, int64_t rows, int64_t n, float* lo, float* hi) {
  int64_t c = 0;
  for (; c + 128 <= n; c += 128) column_min_max_vectors<8>(x + c, rows, n, lo + c, hi + c);
  for (; c + 16 <= n; c += 16) column_min_max_vectors<1>(x + c, rows, n, lo + c, hi + c);
  if (c < n) {  // the last n % 16 columns, as a [rows, n - c] block with row stride n
    for (int64_t k = c; k < n; ++k) {
      float lk = x[k], hk = x[k];
      for (int64_t r = 1; r < rows; ++r) {
        const float a = x[r * n + k];
        lk = a < lk ? a : lk;
        hk = a > hk ? a : hk;
      }
      lo[k] = lk, hi[k] = hk;
    }
  }
}
#endif

}  // namespace

void column_min_max(const float* x, int64_t rows, int64_t n, float* lo, float* hi) {
#if KVTUNE_X86_INTRINSICS
  if (cpu_has_avx512()) return column_min_max_avx512(x, rows, n, lo, hi);
#endif
  column_min_max_portable(x, rows, n, lo, hi);
}

namespace {

void min_max_portable(const float* x, int64_t n, float& lo, float& hi) {
  lo = hi = x[0];
  for (int64_t i = 1; i < n; ++i) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
  }
}

#if KVTUNE_X86_INTRINSICS
// Four independent vector chains each for min and max hide the instructions' latency.
__attribute__((target("avx2"))) void min_max_avx2(const float* x, int64_t n, float& lo, float& hi) {
  if (n < 32) return min_max_portable(x, n, lo, hi);
  __m256 l0 = _mm256_loadu_ps(x), l1 = _mm256_loadu_ps(x + 8), l2 = _mm256_loadu_ps(x + 16),
         l3 = _mm256_loadu_ps(x + 24);
  __m256 h0 = l0, h1 = l1, h2 = l2, h3 = l3;
  int64_t i = 32;
  for (; i + 32 <= n; i += 32) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8), c = _mm256_loadu_ps(x + i + 16),
                 d = _mm256_loadu_ps(x + i + 24);
    l0 = _mm256_min_ps(l0, a), l1 = _mm256_min_ps(l1, b), l2 = _mm256_min_ps(l2, c), l3 = _mm256_min_ps(l3, d);
    h0 = _mm256_max_ps(h0, a), h1 = _mm256_max_ps(h1, b), h2 = _mm256_max_ps(h2, c), h3 = _mm256_max_ps(h3, d);
  }
  alignas(32) float lanes_lo[8], lanes_hi[8];
  _mm256_store_ps(lanes_lo, _mm256_min_ps(_mm256_min_ps(l0, l1), _mm256_min_ps(l2, l3)));
  _mm256_store_ps(lanes_hi, _mm256_max_ps(_mm256_max_ps(h0, h1), _mm256_max_ps(h2, h3)));
  lo = lanes_lo[0];
  hi = lanes_hi[0];
  for (int k = 1; k < 8; ++k) {
    lo = lanes_lo[k] < lo ? lanes_lo[k] : lo;
    hi = lanes_hi[k] > hi ? lanes_hi[k] : hi;
  }
  for (; i < n; ++i) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
  }
}
#endif

}  // namespace

void min_max(const float* x, int64_t n, float& lo, float& hi) {
#if KVTUNE_X86_INTRINSICS
  if (have_avx2()) return min_max_avx2(x, n, lo, hi);
#endif
  min_max_portable(x, n, lo, hi);
}

namespace {

// Returns whether every reciprocal is nonzero, as group_params does.
bool group_params_portable(const float* lo, const float* hi, int64_t n, int bits, bool asym, ScaleType t,
                           float* minimum, float* scale, float* divisor, float* reciprocal) {
  bool all_reciprocals = true;
  for (int64_t g = 0; g < n; ++g) {
    if (asym) {
      minimum[g] = codec::stored_minimum(lo[g], t);
      scale[g] = codec::int_asym_scale(minimum[g], hi[g], bits, t);
    } else {
      minimum[g] = 0.0f;
      scale[g] = codec::int_sym_scale(std::max(-lo[g], hi[g]), bits, t);
    }
    divisor[g] = codec::int_divisor(scale[g]);
    reciprocal[g] = fast_reciprocal(divisor[g]);
    all_reciprocals = all_reciprocals && reciprocal[g] != 0.0f;
  }
  return all_reciprocals;
}

}  // namespace

#if KVTUNE_X86_INTRINSICS
namespace {

__attribute__((target("avx2"))) inline void segment_min_max8(const float* x, int64_t n, float& lo, float& hi) {
  __m256 l0 = _mm256_loadu_ps(x), h0 = l0;
  __m256 l1 = l0, h1 = l0;
  int64_t i = 8;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    l0 = _mm256_min_ps(l0, a), h0 = _mm256_max_ps(h0, a);
    l1 = _mm256_min_ps(l1, b), h1 = _mm256_max_ps(h1, b);
  }
  for (; i < n; i += 8) {
    const __m256 a = _mm256_loadu_ps(x + i);
    l0 = _mm256_min_ps(l0, a), h0 = _mm256_max_ps(h0, a);
  }
  alignas(32) float ls[8], hs[8];
  _mm256_store_ps(ls, _mm256_min_ps(l0, l1));
  _mm256_store_ps(hs, _mm256_max_ps(h0, h1));
  lo = ls[0], hi = hs[0];
  for (int k = 1; k < 8; ++k) lo = ls[k] < lo ? ls[k] : lo, hi = hs[k] > hi ? hs[k] : hi;
}

// y = level(x) * s (+ m when asymmetric) over one group, with its parameters.
__attribute__((target("avx2"))) inline void group_levels(const float* xs, int64_t group, bool asym, float qmax,
                                                         float top, float m, float s, float divisor, float recip,
                                                         float* ys) {
  const __m256 lo_bound = _mm256_set1_ps(asym ? 0.0f : -qmax), hi_bound = _mm256_set1_ps(asym ? top : qmax);
  const __m256 rv = _mm256_set1_ps(recip), dv = _mm256_set1_ps(divisor), sv = _mm256_set1_ps(s);
  const __m256 mv = _mm256_set1_ps(m);
  for (int64_t c = 0; c < group; c += 8) {
    const __m256 v = _mm256_loadu_ps(xs + c);
    if (asym) {
      const __m256 level = levels8(_mm256_sub_ps(v, mv), rv, dv, lo_bound, hi_bound);
      _mm256_storeu_ps(ys + c, _mm256_add_ps(_mm256_mul_ps(level, sv), mv));
    } else {
      _mm256_storeu_ps(ys + c, _mm256_mul_ps(levels8(v, rv, dv, lo_bound, hi_bound), sv));
    }
  }
}

// group_levels of eight consecutive groups at once, sixteen lanes wide, for groups of a multiple of
// 16 (the same bits): one call for the batch, the bounds and constants set up once. G > 0 fixes the
// group length at compile time (the common 32: its two vectors unrolled), 0 takes `group`.
// `stream`: non-temporal stores (y 64-byte aligned; the caller fences).
template <int G>
KVTUNE_AVX512 void eight_group_levels16(const float* x, int64_t group_arg, bool asym, float qmax, float top,
                                        const float* m, const float* s, const float* divisor, const float* recip,
                                        float* y, bool stream) {
  const int64_t group = G > 0 ? G : group_arg;
  const __m512 lo = _mm512_set1_ps(asym ? 0.0f : -qmax), hi = _mm512_set1_ps(asym ? top : qmax);
  for (int g = 0; g < 8; ++g) {
    const __m512 rv = _mm512_set1_ps(recip[g]), dv = _mm512_set1_ps(divisor[g]), sv = _mm512_set1_ps(s[g]);
    const __m512 mv = _mm512_set1_ps(m[g]);
    const float* xs = x + g * group;
    float* ys = y + g * group;
    for (int64_t c = 0; c < group; c += 16) {
      const __m512 v = _mm512_loadu_ps(xs + c);
      if (asym) {
        store16(ys + c, _mm512_add_ps(_mm512_mul_ps(levels16(_mm512_sub_ps(v, mv), rv, dv, lo, hi), sv), mv), stream);
      } else {
        store16(ys + c, _mm512_mul_ps(levels16(v, rv, dv, lo, hi), sv), stream);
      }
    }
  }
}

// One group of the per-token path: min/max, the group's parameters (group_params' scalar codec
// calls) and the levels.
__attribute__((target("avx2"))) void one_token_group(const float* xs, int64_t group, int bits, bool asym,
                                                     ScaleType scale_type, float* ys) {
  const float qmax = codec::int_sym_qmax(bits), top = codec::int_asym_top(bits);
  float lo, hi, m, s, divisor, recip;
  segment_min_max8(xs, group, lo, hi);
  group_params_portable(&lo, &hi, 1, bits, asym, scale_type, &m, &s, &divisor, &recip);
  if (recip == 0.0f) {  // subnormal scale: divide, as the generic path does
    if (asym) {
      asym_segment_exact(xs, m, divisor, s, m, top, ys, group);
    } else {
      sym_segment_exact(xs, divisor, s, qmax, ys, group);
    }
    return;
  }
  group_levels(xs, group, asym, qmax, top, m, s, divisor, recip, ys);
}

// ---- eight groups' parameters at once (lane g: group g) ----------------------------------------
// The scalar codec's operations in its order, on vectors: division, the scale dtype's rounding
// (F16C's round-to-nearest-even for f16, the same integer formula for bf16), the one-step
// adjustments on the dtype's bits. Batches with a zero, infinite or NaN extreme, or a subnormal
// divisor, take the one-group path instead, so signed zeros and special values never reach it.
// The dtype value one step from a stored value s (bits of s moved by `delta` dtype steps).
KVTUNE_AVX2_F16C inline __m256 dtype_step(__m256 s, int delta, ScaleType t) {
  if (t == ScaleType::f16) {
    const __m128i h = _mm256_cvtps_ph(s, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm256_cvtph_ps(_mm_add_epi16(h, _mm_set1_epi16(short(delta))));
  }
  const int unit = t == ScaleType::bf16 ? 0x10000 : 1;
  return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(s), _mm256_set1_epi32(delta * unit)));
}

// reach_top_code: one dtype step down where the span would miss the top code.
KVTUNE_AVX2_F16C inline __m256 reach_top8(__m256 s, __m256 span, float top, ScaleType t) {
  if (t == ScaleType::f32) return s;
  // An f16 scale at or above f16's smallest normal value lies within a factor 1 +- 2^-11 of
  // span / top (the float32 steps add 2^-23 each), so span / s lies within top * 2^-10 < 0.25 of top
  // (top <= 255) and rounds to the top code: no step, and no division. Subnormal f16 scales and
  // bf16's coarser rounding take the check.
  if (t == ScaleType::f16 &&
      _mm256_movemask_ps(_mm256_cmp_ps(s, _mm256_set1_ps(0x1p-14f), _CMP_GE_OQ)) == 0xff) {
    return s;
  }
  const __m256 positive = _mm256_cmp_ps(s, _mm256_setzero_ps(), _CMP_GT_OQ);
  const __m256 short_of_top = _mm256_cmp_ps(rne(_mm256_div_ps(span, s)), _mm256_set1_ps(top), _CMP_LT_OQ);
  return _mm256_blendv_ps(s, dtype_step(s, -1, t), _mm256_and_ps(positive, short_of_top));
}

// stored_minimum for finite, nonzero lo: the nearest dtype value at or above it.
KVTUNE_AVX2_F16C inline __m256 stored_minimum8(__m256 lo, ScaleType t) {
  const __m256 r = stored8(lo, t);
  if (t == ScaleType::f32) return r;
  // One step up: toward zero for a negative value, away from it for a positive one (r = -0 never
  // steps: it rounds a lo <= 0 and so lies at or above it).
  const __m256 negative = _mm256_cmp_ps(r, _mm256_setzero_ps(), _CMP_LT_OQ);
  const __m256 up = _mm256_blendv_ps(dtype_step(r, 1, t), dtype_step(r, -1, t), negative);
  const __m256 cap = _mm256_set1_ps(kF16MaxFinite);
  __m256 keep = _mm256_cmp_ps(r, lo, _CMP_GE_OQ);
  if (t == ScaleType::f16) {
    keep = _mm256_or_ps(keep, _mm256_cmp_ps(r, cap, _CMP_EQ_OQ));
    keep = _mm256_or_ps(keep, _mm256_cmp_ps(r, _mm256_sub_ps(_mm256_setzero_ps(), cap), _CMP_EQ_OQ));
  }
  return _mm256_blendv_ps(up, r, keep);
}

// Lane g = the minimum (Max: maximum) of v[g]'s eight lanes. Both are exact, so the order does not
// matter: three rounds of halving, then one permutation back to group order.
template <bool Max>
KVTUNE_AVX2_F16C inline __m256 op(__m256 p, __m256 q) {
  return Max ? _mm256_max_ps(p, q) : _mm256_min_ps(p, q);
}

template <bool Max>
KVTUNE_AVX2_F16C inline __m256 lanes_reduce(const __m256* v) {
  __m256 a[4], b[2];
  for (int i = 0; i < 4; ++i) {
    a[i] = op<Max>(_mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x20), _mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x31));
  }
  for (int i = 0; i < 2; ++i) {
    b[i] = op<Max>(_mm256_shuffle_ps(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
              _mm256_shuffle_ps(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  const __m256 c = op<Max>(_mm256_shuffle_ps(b[0], b[1], _MM_SHUFFLE(2, 0, 2, 0)), _mm256_shuffle_ps(b[0], b[1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm256_permutevar8x32_ps(c, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));  // c holds groups 0 2 4 6 1 3 5 7
}

// The stored minimum, scale, divisor and reciprocal of eight groups from their extremes, by the
// scalar codec's operations in its order. False, computing nothing useful, when a lane needs the
// scalar path: a zero extreme (its sign depends on the order min and max met the zeros), an
// infinite or NaN one, an infinite span, or a subnormal divisor (its reciprocal overflows).
[[gnu::always_inline]] KVTUNE_AVX2_F16C inline bool params8(__m256 lo, __m256 hi, int bits, bool asym, ScaleType t,
                                                             __m256& m, __m256& s, __m256& divisor, __m256& recip) {
  const __m256 zero = _mm256_setzero_ps(), inf = _mm256_set1_ps(INFINITY);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 special = _mm256_or_ps(_mm256_cmp_ps(lo, zero, _CMP_EQ_UQ), _mm256_cmp_ps(hi, zero, _CMP_EQ_UQ));
  special = _mm256_or_ps(special, _mm256_cmp_ps(_mm256_and_ps(lo, abs_mask), inf, _CMP_EQ_OQ));
  special = _mm256_or_ps(special, _mm256_cmp_ps(_mm256_and_ps(hi, abs_mask), inf, _CMP_EQ_OQ));
  if (_mm256_movemask_ps(special) != 0) return false;
  const float qmax = codec::int_sym_qmax(bits), top = codec::int_asym_top(bits);
  if (asym) {
    m = stored_minimum8(lo, t);
    const __m256 span = _mm256_sub_ps(hi, m);
    if (_mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(span, abs_mask), inf, _CMP_EQ_OQ)) != 0) return false;
    const __m256 raw = _mm256_max_ps(_mm256_div_ps(span, _mm256_set1_ps(top)), zero);  // s > 0 ? s : 0
    s = reach_top8(stored8(raw, t), span, top, t);
  } else {
    m = zero;
    const __m256 neg_lo = _mm256_sub_ps(zero, lo);
    const __m256 amax = _mm256_blendv_ps(neg_lo, hi, _mm256_cmp_ps(hi, neg_lo, _CMP_GT_OQ));
    s = reach_top8(stored8(_mm256_div_ps(amax, _mm256_set1_ps(qmax)), t), amax, qmax, t);
  }
  divisor = _mm256_blendv_ps(_mm256_set1_ps(1.0f), s, _mm256_cmp_ps(s, zero, _CMP_GT_OQ));  // int_divisor
  recip = _mm256_div_ps(_mm256_set1_ps(1.0f), divisor);
  return _mm256_movemask_ps(_mm256_cmp_ps(recip, inf, _CMP_EQ_OQ)) == 0;
}

// Eight lanes of minima and maxima of each of eight consecutive groups (lane k: the elements
// k mod 8); true when any element is NaN (its fate in min/max depends on the order: one by one).
KVTUNE_AVX2_F16C bool extremes8(const float* x, int64_t group, __m256* lo_v, __m256* hi_v) {
  __m256 nan = _mm256_setzero_ps();
  for (int g = 0; g < 8; ++g) {
    const float* xs = x + g * group;
    __m256 l = _mm256_loadu_ps(xs), h = l;
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(l, l, _CMP_UNORD_Q));
    for (int64_t c = 8; c < group; c += 8) {
      const __m256 v = _mm256_loadu_ps(xs + c);
      l = _mm256_min_ps(l, v), h = _mm256_max_ps(h, v);
      nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    lo_v[g] = l, hi_v[g] = h;
  }
  return _mm256_movemask_ps(nan) != 0;
}

// Sixteen lanes of one group's minima and maxima (lane k: its elements k mod 16, n a multiple of
// 16); the lanes that met a NaN.
KVTUNE_AVX512 inline __mmask16 lane_extremes16(const float* xs, int64_t n, __m512& l, __m512& h) {
  l = h = _mm512_loadu_ps(xs);
  __mmask16 nan = _mm512_cmp_ps_mask(l, l, _CMP_UNORD_Q);
  for (int64_t c = 16; c < n; c += 16) {
    const __m512 v = _mm512_loadu_ps(xs + c);
    l = _mm512_min_ps(l, v), h = _mm512_max_ps(h, v);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  }
  return nan;
}

// extremes8 sixteen lanes wide, each group's two halves folded to eight lanes at the end (min and
// max are exact, so the grouping of lanes changes no value; NaN is flagged as there).
KVTUNE_AVX512 bool extremes16(const float* x, int64_t group, __m256* lo_v, __m256* hi_v) {
  __mmask16 nan = 0;
  for (int g = 0; g < 8; ++g) {
    __m512 l, h;
    nan |= lane_extremes16(x + g * group, group, l, h);
    lo_v[g] = _mm256_min_ps(_mm512_castps512_ps256(l), _mm512_extractf32x8_ps(l, 1));
    hi_v[g] = _mm256_max_ps(_mm512_castps512_ps256(h), _mm512_extractf32x8_ps(h, 1));
  }
  return nan != 0;
}

// Eight consecutive groups of `group` floats from x; false (nothing written) when the batch needs
// the one-group path.
KVTUNE_AVX2_F16C bool eight_token_groups(const float* x, int64_t group, int bits, bool asym, ScaleType t, float* y,
                                          bool stream) {
  const bool wide = group % 16 == 0 && cpu_has_avx512();
  __m256 lo_v[8], hi_v[8];
  if (wide ? extremes16(x, group, lo_v, hi_v) : extremes8(x, group, lo_v, hi_v)) return false;
  // Min and max are exact, so any order of reduction gives the scalar path's values, except for
  // the sign of a zero, which params8 refuses.
  const __m256 lo = lanes_reduce<false>(lo_v), hi = lanes_reduce<true>(hi_v);
  const float qmax = codec::int_sym_qmax(bits), top = codec::int_asym_top(bits);
  __m256 m, s, divisor, recip;
  if (!params8(lo, hi, bits, asym, t, m, s, divisor, recip)) return false;
  alignas(32) float ss[8], ms[8], ds[8], rs[8];
  _mm256_store_ps(ss, s), _mm256_store_ps(ms, m), _mm256_store_ps(ds, divisor), _mm256_store_ps(rs, recip);
  if (wide) {
    eight_group_levels16<0>(x, group, asym, qmax, top, ms, ss, ds, rs, y, stream);
  } else {
    for (int g = 0; g < 8; ++g) group_levels(x + g * group, group, asym, qmax, top, ms[g], ss[g], ds[g], rs[g], y + g * group);
  }
  return true;
}

// Sixteen consecutive symmetric groups of a multiple of 16 floats: each group's largest |x| as
// integer bits (lanes_max16), then params8's arithmetic on each half (with lo = -amax and hi = amax
// its symmetric branch takes max(-lo, hi) = amax, as the scalar codec's max(-lo, hi) is for any
// group that is not all zeros), then the levels. That needs one reduction where min and max need two,
// and no NaN compare. False (nothing written) when params8 refuses a half: a group all zeros (the
// sign of its scale's zero depends on the scan), or holding an infinity or a NaN (whose bits lie
// above infinity's, so amax is NaN); the caller then takes the batch eight groups at a time.
// AVX-512 with AVX2 and F16C (every AVX-512 CPU has both, see KVTUNE_AVX512_F16C), so that
// params8 inlines for both halves and their two chains of divisions and roundings overlap: groups
// of 32 with f16 scales 0.67 -> 0.61 ms.
template <int G>
KVTUNE_AVX512_F16C bool sixteen_sym_token_groups(const float* x, int64_t group_arg, int bits, ScaleType t, float* y,
                                                  bool stream) {
  const int64_t group = G > 0 ? G : group_arg;
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
  __m512i m[16];
  for (int g = 0; g < 16; ++g) {
    const float* xs = x + g * group;
    m[g] = _mm512_and_si512(_mm512_loadu_si512(xs), magnitude);
    for (int64_t c = 16; c < group; c += 16) m[g] = _mm512_max_epu32(m[g], _mm512_and_si512(_mm512_loadu_si512(xs + c), magnitude));
  }
  const __m512i amax = lanes_max16(m);
  const float qmax = codec::int_sym_qmax(bits);
  alignas(32) float ss[16], ds[16], rs[16];
  for (int half = 0; half < 2; ++half) {
    const __m256 hi = _mm256_castsi256_ps(half == 0 ? _mm512_castsi512_si256(amax) : _mm512_extracti64x4_epi64(amax, 1));
    __m256 m8, s, divisor, recip;
    if (!params8(_mm256_sub_ps(_mm256_setzero_ps(), hi), hi, bits, false, t, m8, s, divisor, recip)) return false;
    _mm256_store_ps(ss + 8 * half, s), _mm256_store_ps(ds + 8 * half, divisor), _mm256_store_ps(rs + 8 * half, recip);
  }
  const float zeros[8] = {};
  eight_group_levels16<G>(x, group, false, qmax, 0.0f, zeros, ss, ds, rs, y, stream);
  eight_group_levels16<G>(x + 8 * group, group, false, qmax, 0.0f, zeros, ss + 8, ds + 8, rs + 8, y + 8 * group,
                          stream);
  return true;
}

// Sixteen consecutive asymmetric groups of a multiple of 16 floats: each group's minimum and maximum
// folded to a lane (lanes_min16_ps, lanes_max16_ps: exact in any order, as extremes16's are), then
// params8 on each half and the levels, as sixteen_sym_token_groups does for the symmetric ones; false
// (nothing written) on a NaN or where params8 refuses a half, and the caller takes the batch eight
// groups at a time. Transformers' quantized cache (groups of 64, asymmetric) 0.76 -> 0.6 ms in cache.
template <int G>
KVTUNE_AVX512_F16C bool sixteen_asym_token_groups(const float* x, int64_t group_arg, int bits, ScaleType t, float* y,
                                                   bool stream) {
  const int64_t group = G > 0 ? G : group_arg;
  __m512i lo_m[16], hi_m[16];
  __mmask16 nan = 0;
  for (int g = 0; g < 16; ++g) {
    __m512 l, h;
    nan |= lane_extremes16(x + g * group, group, l, h);
    lo_m[g] = _mm512_castps_si512(l), hi_m[g] = _mm512_castps_si512(h);
  }
  if (nan != 0) return false;
  const __m512 lo = lanes_min16_ps(lo_m), hi = lanes_max16_ps(hi_m);
  alignas(32) float ms[16], ss[16], ds[16], rs[16];
  for (int half = 0; half < 2; ++half) {
    const __m256 l = half == 0 ? _mm512_castps512_ps256(lo) : _mm512_extractf32x8_ps(lo, 1);
    const __m256 h = half == 0 ? _mm512_castps512_ps256(hi) : _mm512_extractf32x8_ps(hi, 1);
    __m256 m, s, divisor, recip;
    if (!params8(l, h, bits, true, t, m, s, divisor, recip)) return false;
    _mm256_store_ps(ms + 8 * half, m), _mm256_store_ps(ss + 8 * half, s);
    _mm256_store_ps(ds + 8 * half, divisor), _mm256_store_ps(rs + 8 * half, recip);
  }
  const float qmax = codec::int_sym_qmax(bits), top = codec::int_asym_top(bits);
  eight_group_levels16<G>(x, group, true, qmax, top, ms, ss, ds, rs, y, stream);
  eight_group_levels16<G>(x + 8 * group, group, true, qmax, top, ms + 8, ss + 8, ds + 8, rs + 8, y + 8 * group,
                          stream);
  return true;
}

// The per-token path: the groups of a [rows, d] block with d a multiple of `group` lie end to end,
// so they are taken eight at a time across rows (sixteen on AVX-512 for a multiple of 16). `stream`:
// the sixteen-lane levels store non-temporally (the others store normally).
KVTUNE_AVX2_F16C void token_groups_avx2(const float* x, int64_t rows, int64_t d, int64_t group, int bits, bool asym,
                                        ScaleType scale_type, float* y, bool stream) {
  const int64_t groups = rows * (d / group);
  auto eight = [&](int64_t h) {  // groups h .. h + 8 at once, or one by one where the batch needs it
    if (eight_token_groups(x + h * group, group, bits, asym, scale_type, y + h * group, stream)) return;
    for (int64_t k = h; k < h + 8; ++k) one_token_group(x + k * group, group, bits, asym, scale_type, y + k * group);
  };
  int64_t g = 0;
  if (group % 16 == 0 && cpu_has_avx512()) {
    for (; g + 16 <= groups; g += 16) {
      // Symmetric groups of 32 unrolled, with the next batch read while this one runs: 0.73 -> 0.67 ms
      // (either alone gained nothing). The asymmetric batches run without it: with it they were
      // slower (bench_schemes medians 0.93 -> 1.44 ms for groups of 64).
      if (!asym) prefetch_floats(x + (g + 16) * group, 16 * group);
      const float* xg = x + g * group;
      float* yg = y + g * group;
      bool done;
      if (asym) {
        done = group == 64   ? sixteen_asym_token_groups<64>(xg, group, bits, scale_type, yg, stream)
               : group == 32 ? sixteen_asym_token_groups<32>(xg, group, bits, scale_type, yg, stream)
                             : sixteen_asym_token_groups<0>(xg, group, bits, scale_type, yg, stream);
      } else {
        done = group == 32 ? sixteen_sym_token_groups<32>(xg, group, bits, scale_type, yg, stream)
                           : sixteen_sym_token_groups<0>(xg, group, bits, scale_type, yg, stream);
      }
      if (!done) eight(g), eight(g + 8);
    }
  }
  for (; g + 8 <= groups; g += 8) eight(g);
  for (; g < groups; ++g) one_token_group(x + g * group, group, bits, asym, scale_type, y + g * group);
  if (stream) _mm_sfence();  // streaming stores are weakly ordered: visible before the caller reads
}


// group_params eight columns at a time, the rest (and any batch params8 refuses) one by one. Each
// batch's reciprocals are checked for zero in the vector (the caller's scan of them afterwards had
// cost a third as much as the parameters).
KVTUNE_AVX2_F16C bool group_params_avx2(const float* lo, const float* hi, int64_t n, int bits, bool asym, ScaleType t,
                                        float* minimum, float* scale, float* divisor, float* reciprocal) {
  bool all_reciprocals = true;
  int64_t g = 0;
  for (; g + 8 <= n; g += 8) {
    __m256 m, s, d, r;
    if (params8(_mm256_loadu_ps(lo + g), _mm256_loadu_ps(hi + g), bits, asym, t, m, s, d, r)) {
      _mm256_storeu_ps(minimum + g, m), _mm256_storeu_ps(scale + g, s);
      _mm256_storeu_ps(divisor + g, d), _mm256_storeu_ps(reciprocal + g, r);
      all_reciprocals &= _mm256_movemask_ps(_mm256_cmp_ps(r, _mm256_setzero_ps(), _CMP_EQ_OQ)) == 0;
    } else {
      all_reciprocals &= group_params_portable(lo + g, hi + g, 8, bits, asym, t, minimum + g, scale + g,
                                               divisor + g, reciprocal + g);
    }
  }
  all_reciprocals &= group_params_portable(lo + g, hi + g, n - g, bits, asym, t, minimum + g, scale + g,
                                           divisor + g, reciprocal + g);
  return all_reciprocals;
}

}  // namespace
#endif

bool token_groups(const float* x, int64_t rows, int64_t d, int64_t group, int bits, bool asym, ScaleType scale_type,
                  float* y, bool stream) {
#if KVTUNE_X86_INTRINSICS
  if (cpu_has_avx2_f16c() && group % 8 == 0 && d % group == 0) {
    token_groups_avx2(x, rows, d, group, bits, asym, scale_type, y, stream);
    return true;
  }
#endif
  (void)x, (void)rows, (void)d, (void)group, (void)bits, (void)asym, (void)scale_type, (void)y, (void)stream;
  return false;
}

bool group_params(const float* lo, const float* hi, int64_t n, int bits, bool asym, ScaleType scale_type,
                  float* minimum, float* scale, float* divisor, float* reciprocal) {
#if KVTUNE_X86_INTRINSICS
  if (cpu_has_avx2_f16c()) return group_params_avx2(lo, hi, n, bits, asym, scale_type, minimum, scale, divisor, reciprocal);
#endif
  return group_params_portable(lo, hi, n, bits, asym, scale_type, minimum, scale, divisor, reciprocal);
}

}  // namespace kvtune::builtin::int_kernels
