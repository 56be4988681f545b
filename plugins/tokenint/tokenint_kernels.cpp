#include "tokenint_kernels.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "kvtune/numeric/cpu_features.h"
#include "kvtune/numeric/multiversion.h"
#include "lane_reductions.h"
#include "round_lanes.h"
#include "stored_scale_lanes.h"
#include "x86_intrinsics.h"

namespace kvtune::builtin::tokenint {

#if KVTUNE_X86_INTRINSICS
namespace {

// trunc_small: toward zero through int32.
KVTUNE_AVX512 inline __m512 trunc_small16(__m512 w) { return _mm512_cvtepi32_ps(_mm512_cvttps_epi32(w)); }

// level_of's code for a clamped v (tokenint_codec.h: round_code_of, and for unsigned codes
// round_nonnegative_code_of). Never -0 (the magic-number rounding and the int32 conversion give +0),
// so level_of's + 0 for signed codes is not needed.
template <Zero Z, Round R>
KVTUNE_AVX512 inline __m512 code16(__m512 v) {
  if constexpr (R == Round::even) {
    return rne16(v);
  } else if constexpr (R == Round::away) {  // trunc(v + copysign(kBelowHalf, v)); v >= 0 for unsigned codes
    const __m512 below_half = _mm512_set1_ps(kBelowHalf);
    return trunc_small16(_mm512_add_ps(
        v, signed_codes(Z) ? _mm512_or_ps(below_half, _mm512_and_ps(v, _mm512_set1_ps(-0.0f))) : below_half));
  } else if constexpr (R == Round::up) {
    return trunc_small16(_mm512_add_ps(v, _mm512_set1_ps(0.5f)));
  } else {
    return trunc_small16(v);
  }
}

// code16 for a rounding known at run time, v >= 0 (fit_rows16's zero=int offset, in [0, N]).
KVTUNE_AVX512 inline __m512 nonnegative_code16(__m512 v, Round r) {
  switch (r) {
    case Round::even:
      return code16<Zero::integer, Round::even>(v);
    case Round::away:
      return code16<Zero::integer, Round::away>(v);
    case Round::trunc:
      return code16<Zero::integer, Round::trunc>(v);
    case Round::up:
      return code16<Zero::integer, Round::up>(v);
  }
  return v;
}

// fit_row for sixteen consecutive rows of d (a multiple of 16) floats, lane k holding row k's
// parameters, by fit_row's operations in its order. Rows with a NaN, a zero or an infinite extreme
// (whose sign or fate depends on the scan order), or that fit_row treats as constant (s = 0), get
// fit_row itself: min and max are exact, so on every other row any reduction order gives the
// sequential scan's extremes.
// `minima` (or null): each row's minimum as the lanes found it (roundtrip_rows16, zero=mid).
KVTUNE_AVX512_F16C void fit_rows16(const float* x, int64_t d, const Config& c, RowParams* p, float* minima) {
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
  if (minima != nullptr) _mm512_storeu_ps(minima, lo);
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
      offset = nonnegative_code16(_mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, top, _CMP_GT_OQ), v, top), c.round);
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

// ---- the element loops on AVX-512 -------------------------------------------------------------
// One kernel per convention (roundtrip_rows16). The conventions that divide take a multiplication
// where it gives the same codes. SGLang's and LMDeploy's PyTorch engine's conventions take q from fl(t / s), and a float division
// of sixteen lanes costs about as much as the rest of an element's round trip. The int family's
// argument (plugins/int/int_kernels.cpp, "Why the fast path is exact") carries over: with s and
// r = fl(1/s) normal, fl(t r) lies within 3 |t / s| 2^-24 of fl(t / s), under 2^-13 where the
// quotient is below 2^9 in magnitude; zero=float's added z moves the two v apart by at most one ulp
// more (2^-16 below 256). Where the quotient is larger and v is the quotient (zero=none, min, mid)
// or the quotient plus z in [0, N] (zero=int), both v clamp to the same end of the code range;
// zero=float rows whose quotients may be that large (|z| + N + 1 >= 2^9) divide throughout.
// Clamping is monotone, so a clamped v farther than kTieGuard = 2^-12 from every half-integer rounds
// to the same code either way: ties to even and away step at the half-integers, trunc(v + 0.5)
// (round=up) within 2^-17 of them. A vector with a lane in that band (|v - code| > 1/2 - kTieGuard)
// is computed by division: about 0.05 % of elements. zero=mid puts the row's minimum itself at
// -(2^(b-1) - 1/2), a step, so the lanes equal to it take its code, divided once per row.
// round=trunc (steps at the integers) keeps the division throughout.
constexpr float kTieGuard = 0x1p-12f;

// clamp_code(v, lo, hi) on sixteen lanes for the codes that follow: max returns its second operand
// for a NaN lane (lo, as clamp_code gives) and +0 where clamp_code keeps v = -0 at lo = 0, which
// every rounding below takes to the code +0 all the same.
KVTUNE_AVX512 inline __m512 clamp_code16(__m512 v, __m512 lo, __m512 hi) {
  return _mm512_min_ps(_mm512_max_ps(v, lo), hi);
}

// The clamped v of a quotient q (of t = x, or x - offset for zero=min and zero=mid): zero=float and
// zero=int add their offset after the division.
template <Zero Z>
KVTUNE_AVX512 inline __m512 clamped_v16(__m512 q, __m512 off, __m512 lo, __m512 hi) {
  return clamp_code16(Z == Zero::real || Z == Zero::integer ? _mm512_add_ps(q, off) : q, lo, hi);
}

// roundtrip_fitted_row for rows of d (a multiple of 16) fitted in p. Divides: the convention divides
// by s (p.r == 0, R not trunc), so the rows multiply by fl(1/s) and divide where the guard asks for
// it (above); else it multiplies by p.r itself, and rows without one (p.r == 0: they divide) take
// roundtrip_fitted_row. The clamp, roundings and decoding are level_of's and value_of's.
template <Zero Z, Round R, bool Divides>
KVTUNE_AVX512 void roundtrip_rows16(const float* x, int64_t rows, int64_t d, const Config& c, const RowParams* p,
                                    const float* minima, float* y) {
  static_assert(!Divides || R != Round::trunc);
  const float qmin = code_min(c), qmax = code_max(c);
  const __m512 lo = _mm512_set1_ps(signed_codes(Z) ? qmin : 0.0f), hi = _mm512_set1_ps(qmax);
  const __m512 band = _mm512_set1_ps(0.5f - kTieGuard), sign = _mm512_set1_ps(-0.0f);
  for (int64_t row = 0; row < rows; ++row) {
    const float* xr = x + row * d;
    float* yr = y + row * d;
    const RowParams& pr = p[row];
    const float r = Divides ? 1.0f / pr.s : pr.r;
    // zero=float: every quotient below 2^9 when |z| + N + 1 is. x lies in [lo, hi] and z = fl(-lo / s),
    // so |x / s| <= |lo| / s + (hi - lo) / s <= |z| + N, up to factors of 1 + 2^-22; where the span
    // saturates, s = fl(FLT_MAX / N) and |x / s| <= N for every finite x.
    const bool small_quotients = Z != Zero::real || std::fabs(pr.offset) + qmax + 1.0f < 0x1p9f;
    const bool fits = Divides ? std::isnormal(pr.s) && std::isnormal(r) && small_quotients : r != 0.0f;
    if (pr.fixed_code >= 0.0f || !fits) {
      roundtrip_fitted_row(xr, d, c, pr, yr);
      continue;
    }
    const __m512 vr = _mm512_set1_ps(r), vs = _mm512_set1_ps(pr.s), off = _mm512_set1_ps(pr.offset);
    const __m512 s_dec = _mm512_set1_ps(pr.s_dec), off_dec = _mm512_set1_ps(pr.offset_dec);
    // zero=mid: the lanes equal to the row's minimum (NaN: none) take its code by division.
    __m512 row_min = _mm512_setzero_ps(), row_min_code = row_min;
    if constexpr (Divides && Z == Zero::mid) {
      row_min = _mm512_set1_ps(minima[row]);
      row_min_code = code16<Z, R>(clamp_code16(_mm512_div_ps(_mm512_sub_ps(row_min, off), vs), lo, hi));
    }
    for (int64_t i = 0; i < d; i += 16) {
      const __m512 xv = _mm512_loadu_ps(xr + i);
      const __m512 t = Z == Zero::min || Z == Zero::mid ? _mm512_sub_ps(xv, off) : xv;
      const __m512 v = clamped_v16<Z>(_mm512_mul_ps(t, vr), off, lo, hi);
      __m512 code = code16<Z, R>(v);
      if constexpr (Divides) {
        __mmask16 near = _mm512_cmp_ps_mask(_mm512_andnot_ps(sign, _mm512_sub_ps(v, code)), band, _CMP_GT_OQ);
        if constexpr (Z == Zero::mid) {
          const __mmask16 at_min = _mm512_cmp_ps_mask(xv, row_min, _CMP_EQ_OQ);
          code = _mm512_mask_blend_ps(at_min, code, row_min_code);
          near &= __mmask16(~at_min);
        }
        if (near != 0) code = code16<Z, R>(clamped_v16<Z>(_mm512_div_ps(t, vs), off, lo, hi));
      }
      __m512 out;
      if constexpr (Z == Zero::none) {
        out = _mm512_mul_ps(code, s_dec);
      } else if constexpr (Z == Zero::min || Z == Zero::mid) {
        out = _mm512_add_ps(_mm512_mul_ps(code, s_dec), off_dec);
      } else {
        out = _mm512_mul_ps(_mm512_sub_ps(code, off_dec), s_dec);
      }
      _mm512_storeu_ps(yr + i, out);
    }
  }
}

template <Zero Z, bool Divides>
KVTUNE_AVX512 void roundtrip_rows16(const float* x, int64_t rows, int64_t d, const Config& c, const RowParams* p,
                                    const float* minima, float* y) {
  switch (c.round) {
    case Round::even:
      return roundtrip_rows16<Z, Round::even, Divides>(x, rows, d, c, p, minima, y);
    case Round::away:
      return roundtrip_rows16<Z, Round::away, Divides>(x, rows, d, c, p, minima, y);
    case Round::up:
      return roundtrip_rows16<Z, Round::up, Divides>(x, rows, d, c, p, minima, y);
    case Round::trunc:
      if constexpr (!Divides) return roundtrip_rows16<Z, Round::trunc, false>(x, rows, d, c, p, minima, y);
      break;  // roundtrip_rows sends these to roundtrip_fitted_row
  }
}

template <bool Divides>
KVTUNE_AVX512 void roundtrip_rows16(const float* x, int64_t rows, int64_t d, const Config& c, const RowParams* p,
                                    const float* minima, float* y) {
  switch (c.zero) {
    case Zero::none:
      return roundtrip_rows16<Zero::none, Divides>(x, rows, d, c, p, minima, y);
    case Zero::min:
      return roundtrip_rows16<Zero::min, Divides>(x, rows, d, c, p, minima, y);
    case Zero::real:
      return roundtrip_rows16<Zero::real, Divides>(x, rows, d, c, p, minima, y);
    case Zero::integer:
      return roundtrip_rows16<Zero::integer, Divides>(x, rows, d, c, p, minima, y);
    case Zero::mid:
      return roundtrip_rows16<Zero::mid, Divides>(x, rows, d, c, p, minima, y);
  }
}

}  // namespace
#endif

void fit_rows(const float* x, int64_t rows, int64_t d, const Config& c, RowParams* p) {
  int64_t r = 0;
#if KVTUNE_X86_INTRINSICS
  if (d % 16 == 0 && cpu_has_avx512()) {
    for (; r + 16 <= rows; r += 16) fit_rows16(x + r * d, d, c, p + r, nullptr);
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
  bool in_vectors = false;  // roundtrip_rows16
#if KVTUNE_X86_INTRINSICS
  in_vectors = (c.reciprocal || c.round != Round::trunc) && d % 16 == 0 && cpu_has_avx512();
#endif
  for (int64_t r = 0; r < rows; r += kBatch) {
    const int64_t n = std::min(kBatch, rows - r);
#if KVTUNE_X86_INTRINSICS
    if (in_vectors) {
      float minima[kBatch];
      if (n == kBatch) {
        fit_rows16(x + r * d, d, c, p, minima);
      } else {
        fit_rows(x + r * d, n, d, c, p);
        std::fill_n(minima, n, NAN);  // no lanes taken for a row's minimum
      }
      c.reciprocal ? roundtrip_rows16<false>(x + r * d, n, d, c, p, minima, y + r * d)
                   : roundtrip_rows16<true>(x + r * d, n, d, c, p, minima, y + r * d);
      continue;
    }
#endif
    fit_rows(x + r * d, n, d, c, p);
    for (int64_t k = 0; k < n; ++k) roundtrip_fitted_row(x + (r + k) * d, d, c, p[k], y + (r + k) * d);
  }
}

}  // namespace kvtune::builtin::tokenint
