#include "int_kernels.h"

#include "kvtune/numeric/multiversion.h"

#include <cmath>

#include "kvtune/codecs/int_codec.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KVTUNE_HAVE_AVX2_PATH 1
#endif

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

#if KVTUNE_HAVE_AVX2_PATH
// Why the fast path is exact. Let q = x / d exactly, r = fl(1/d) and v = fl(x * r). Then
// |v - q| <= |q| * (2^-24 + 2^-24 + 2^-48) and |fl(q) - q| <= |q| * 2^-24, so v and fl(q) differ by
// less than |q| * 2^-22. Levels only change at the half-integers inside the clamp range [-255, 255];
// wherever |q| is large both values clamp to the same bound. Within the range the difference is
// below 512 * 2^-22 = 2^-13, so when the clamped v lies farther than kTieGuard = 2^-10 from every
// half-integer, rne(clamp(v)) == rne(clamp(fl(q))). Vectors with any lane inside the guard band
// (about 0.2 % of random data) are recomputed with division. r must be finite: fast_reciprocal
// returns 0 otherwise and the callers then divide.
constexpr float kTieGuard = 1.0f / 1024.0f;

__attribute__((target("avx2"))) inline __m256 rne(__m256 v) {
  const __m256 magic = _mm256_set1_ps(12582912.0f);  // 1.5 * 2^23, see numeric/rounding.h
  return _mm256_sub_ps(_mm256_add_ps(v, magic), magic);
}

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
#if KVTUNE_HAVE_AVX2_PATH
  if (reciprocal != nullptr && have_avx2()) return sym_columns_avx2(x, divisor, reciprocal, out_scale, qmax, y, n);
#endif
  sym_columns_exact(x, divisor, out_scale, qmax, y, n);
}

void asym_columns(const float* x, const float* minimum, const float* divisor, const float* reciprocal,
                  const float* out_scale, const float* out_min, float top, float* y, int64_t n) {
#if KVTUNE_HAVE_AVX2_PATH
  if (reciprocal != nullptr && have_avx2()) {
    return asym_columns_avx2(x, minimum, divisor, reciprocal, out_scale, out_min, top, y, n);
  }
#endif
  asym_columns_exact(x, minimum, divisor, out_scale, out_min, top, y, n);
}

void sym_segment(const float* x, float divisor, float reciprocal, float out_scale, float qmax, float* y, int64_t n) {
#if KVTUNE_HAVE_AVX2_PATH
  if (reciprocal != 0.0f && have_avx2()) return sym_segment_avx2(x, divisor, reciprocal, out_scale, qmax, y, n);
#endif
  sym_segment_exact(x, divisor, out_scale, qmax, y, n);
}

void asym_segment(const float* x, float minimum, float divisor, float reciprocal, float out_scale, float out_min,
                  float top, float* y, int64_t n) {
#if KVTUNE_HAVE_AVX2_PATH
  if (reciprocal != 0.0f && have_avx2()) {
    return asym_segment_avx2(x, minimum, divisor, reciprocal, out_scale, out_min, top, y, n);
  }
#endif
  asym_segment_exact(x, minimum, divisor, out_scale, out_min, top, y, n);
}

// Min/max loops are element-wise or per lane, so the compiler vectorizes them exactly; the AVX2
// clone only widens the vectors.

KVTUNE_MULTIVERSION void column_min_max(const float* x, int64_t rows, int64_t n, float* lo, float* hi) {
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

namespace {

void min_max_portable(const float* x, int64_t n, float& lo, float& hi) {
  lo = hi = x[0];
  for (int64_t i = 1; i < n; ++i) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
  }
}

#if KVTUNE_HAVE_AVX2_PATH
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
#if KVTUNE_HAVE_AVX2_PATH
  if (have_avx2()) return min_max_avx2(x, n, lo, hi);
#endif
  min_max_portable(x, n, lo, hi);
}

#if KVTUNE_HAVE_AVX2_PATH
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

// The per-token path in one sweep per group: min/max, the group's parameters stored as
// `scale_type` (the same codec functions the generic path calls) and the levels, without
// parameter arrays or calls.
__attribute__((target("avx2"))) void token_groups_avx2(const float* x, int64_t rows, int64_t d, int64_t group,
                                                       int bits, bool asym, ScaleType scale_type, float* y) {
  const float qmax = codec::int_sym_qmax(bits), top = codec::int_asym_top(bits);
  const __m256 lo_bound = _mm256_set1_ps(asym ? 0.0f : -qmax), hi_bound = _mm256_set1_ps(asym ? top : qmax);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c0 = 0; c0 < d; c0 += group) {
      const float* xs = x + r * d + c0;
      float* ys = y + r * d + c0;
      float lo, hi;
      segment_min_max8(xs, group, lo, hi);
      const float m = asym ? codec::stored_minimum(lo, scale_type) : 0.0f;
      const float s = asym ? codec::int_asym_scale(m, hi, bits, scale_type)
                           : codec::int_sym_scale(hi > -lo ? hi : -lo, bits, scale_type);
      const float divisor = codec::int_divisor(s);
      const float recip = fast_reciprocal(divisor);
      if (recip == 0.0f) {  // subnormal scale: divide, as the generic path does
        if (asym) {
          asym_segment_exact(xs, m, divisor, s, m, top, ys, group);
        } else {
          sym_segment_exact(xs, divisor, s, qmax, ys, group);
        }
        continue;
      }
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
  }
}

}  // namespace
#endif

bool token_groups(const float* x, int64_t rows, int64_t d, int64_t group, int bits, bool asym, ScaleType scale_type,
                  float* y) {
#if KVTUNE_HAVE_AVX2_PATH
  if (have_avx2() && group % 8 == 0 && d % group == 0) {
    token_groups_avx2(x, rows, d, group, bits, asym, scale_type, y);
    return true;
  }
#endif
  (void)x, (void)rows, (void)d, (void)group, (void)bits, (void)asym, (void)scale_type, (void)y;
  return false;
}

}  // namespace kvtune::builtin::int_kernels
