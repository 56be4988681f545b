#include "tokenint_kernels.h"

#include <algorithm>
#include <cfloat>

#include "kvtune/numeric/cpu_features.h"
#include "kvtune/numeric/multiversion.h"
#include "lane_reductions.h"
#include "round_lanes.h"
#include "stored_scale_lanes.h"
#include "x86_intrinsics.h"

namespace kvtune::builtin::tokenint {

#if KVTUNE_X86_INTRINSICS
namespace {

// round_code on sixteen lanes, by the same operations (the zero=int offset, v in [0, N]).
KVTUNE_AVX512 inline __m512 round_code16(__m512 v, Round r) {
  switch (r) {
    case Round::even:
      return rne16(v);
    case Round::away: {
      const __m512 sign = _mm512_set1_ps(-0.0f);
      const __m512 a = _mm512_andnot_ps(sign, v), e = rne16(a);
      const __mmask16 tie = _mm512_cmp_ps_mask(_mm512_sub_ps(a, e), _mm512_set1_ps(0.5f), _CMP_EQ_OQ);
      const __m512 up = _mm512_mask_add_ps(e, tie, e, _mm512_set1_ps(1.0f));
      return _mm512_or_ps(up, _mm512_and_ps(v, sign));  // copysign
    }
    case Round::trunc:
      return _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);  // std::trunc
    case Round::up:
      return _mm512_roundscale_ps(_mm512_add_ps(v, _mm512_set1_ps(0.5f)), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  }
  return v;
}

// fit_row for sixteen consecutive rows of d (a multiple of 16) floats, lane k holding row k's
// parameters, by fit_row's operations in its order. Rows with a NaN, a zero or an infinite extreme
// (whose sign or fate depends on the scan order), or that fit_row treats as constant (s = 0), get
// fit_row itself: min and max are exact, so on every other row any reduction order gives the
// sequential scan's extremes.
KVTUNE_AVX512_F16C void fit_rows16(const float* x, int64_t d, const Config& c, RowParams* p) {
  __m512i lo_m[16], hi_m[16];
  __mmask16 special = 0;
  for (int k = 0; k < 16; ++k) {
    const float* row = x + k * d;
    __m512 l = _mm512_loadu_ps(row), h = l;
    __mmask16 nan = _mm512_cmp_ps_mask(l, l, _CMP_UNORD_Q);
    for (int64_t i = 16; i < d; i += 16) {
      const __m512 v = _mm512_loadu_ps(row + i);
      l = _mm512_min_ps(l, v), h = _mm512_max_ps(h, v);
      nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    }
    if (nan != 0) special |= __mmask16(1u << k);
    lo_m[k] = _mm512_castps_si512(l), hi_m[k] = _mm512_castps_si512(h);
  }
  const __m512 lo = lanes_min16_ps(lo_m), hi = lanes_max16_ps(hi_m);
  const __m512 zero = _mm512_setzero_ps(), inf = _mm512_set1_ps(INFINITY), sign = _mm512_set1_ps(-0.0f);
  special |= _mm512_cmp_ps_mask(lo, zero, _CMP_EQ_OQ) | _mm512_cmp_ps_mask(hi, zero, _CMP_EQ_OQ);
  special |= _mm512_cmp_ps_mask(_mm512_andnot_ps(sign, lo), inf, _CMP_EQ_OQ);
  special |= _mm512_cmp_ps_mask(_mm512_andnot_ps(sign, hi), inf, _CMP_EQ_OQ);
  const float n = static_cast<float>((1 << c.bits) - 1), qm1 = static_cast<float>((1 << (c.bits - 1)) - 1);
  const __m512 neg_lo = _mm512_xor_ps(lo, sign);
  __m512 s;
  if (c.zero == Zero::none) {  // std::max(-lo, hi) / (Q - 1)
    const __m512 amax = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(neg_lo, hi, _CMP_LT_OQ), neg_lo, hi);
    s = _mm512_div_ps(amax, _mm512_set1_ps(qm1));
  } else {  // span_of(lo, hi) / N
    const __m512 span = _mm512_sub_ps(hi, lo), cap = _mm512_set1_ps(FLT_MAX);
    s = _mm512_div_ps(_mm512_mask_blend_ps(_mm512_cmp_ps_mask(span, cap, _CMP_LE_OQ), cap, span), _mm512_set1_ps(n));
  }
  const __m512 min_scale = _mm512_set1_ps(c.min_scale);
  s = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(s, min_scale, _CMP_LT_OQ), s, min_scale);  // std::max(s, min_scale)
  special |= _mm512_cmp_ps_mask(s, zero, _CMP_NGT_UQ);  // s = 0: fit_row's constant rows
  __m512 offset = zero;
  switch (c.zero) {
    case Zero::none:
      break;
    case Zero::min:
      offset = lo;
      break;
    case Zero::mid: {
      const __m512 half = _mm512_set1_ps(0.5f);
      offset = _mm512_add_ps(_mm512_mul_ps(half, lo), _mm512_mul_ps(half, hi));
      break;
    }
    case Zero::real:
      offset = _mm512_div_ps(neg_lo, s);
      break;
    case Zero::integer: {  // round_code(clamp_code(-lo / s, 0, N)); rows holding a NaN take fit_row
      __m512 v = _mm512_div_ps(neg_lo, s);
      v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), v, zero);
      const __m512 top = _mm512_set1_ps(n);
      offset = round_code16(_mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, top, _CMP_GT_OQ), v, top), c.round);
      break;
    }
  }
  __m512 r = zero;
  if (c.reciprocal) {  // fl(1 / s), or 0 (divide) where it is not finite
    r = _mm512_div_ps(_mm512_set1_ps(1.0f), s);
    r = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(_mm512_andnot_ps(sign, r), inf, _CMP_LT_OQ), r);
  }
  __m512i word = _mm512_setzero_si512();
  __m512 s_dec;
  if (c.zero_in_scale) {  // (bits(s) & ~0xF) | z, decoded with the low bits cleared
    const __m512i high = _mm512_andnot_si512(_mm512_set1_epi32(0xF), _mm512_castps_si512(s));
    word = _mm512_or_si512(high, _mm512_cvttps_epi32(offset));
    s_dec = _mm512_castsi512_ps(high);
  } else {
    s_dec = stored16(s, c.scale);
  }
  const __m512 offset_dec = c.zero == Zero::integer ? offset : stored16(offset, c.scale);
  alignas(64) float ss[16], rs[16], os[16], sd[16], od[16];
  alignas(64) uint32_t ws[16];
  _mm512_store_ps(ss, s), _mm512_store_ps(rs, r), _mm512_store_ps(os, offset);
  _mm512_store_ps(sd, s_dec), _mm512_store_ps(od, offset_dec), _mm512_store_si512(ws, word);
  for (int k = 0; k < 16; ++k) {
    if (special & (1u << k)) {
      p[k] = fit_row(x + k * d, d, c);
    } else {
      p[k] = RowParams{ss[k], rs[k], os[k], sd[k], od[k], ws[k], -1.0f};
    }
  }
}

}  // namespace
#endif

void fit_rows(const float* x, int64_t rows, int64_t d, const Config& c, RowParams* p) {
  int64_t r = 0;
#if KVTUNE_X86_INTRINSICS
  if (d % 16 == 0 && cpu_has_avx512()) {
    for (; r + 16 <= rows; r += 16) fit_rows16(x + r * d, d, c, p + r);
  }
#endif
  for (; r < rows; ++r) p[r] = fit_row(x + r * d, d, c);
}

KVTUNE_MULTIVERSION void roundtrip_rows(const float* x, int64_t rows, int64_t d, const Config& c, float* y) {
  constexpr int64_t kBatch = 16;  // rows fitted at once (fit_rows), before their elements
  RowParams p[kBatch];
  // No software read-ahead: asking for the next batch's 8 KiB here (last session's version) made
  // the four runtime conventions 15-20 % slower once their element loops had become faster
  // (bench_schemes, alternate runs); the hardware prefetcher follows the rows alone.
  for (int64_t r = 0; r < rows; r += kBatch) {
    const int64_t n = std::min(kBatch, rows - r);
    fit_rows(x + r * d, n, d, c, p);
    for (int64_t k = 0; k < n; ++k) roundtrip_fitted_row(x + (r + k) * d, d, c, p[k], y + (r + k) * d);
  }
}

}  // namespace kvtune::builtin::tokenint
