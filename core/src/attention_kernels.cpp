#include "attention_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kvtune/numeric/cpu_features.h"
#include "kvtune/numeric/multiversion.h"
#include "kvtune/numeric/vector_types.h"

// The code is written once on GCC vector types and compiled per target (target_clones); this file
// alone is built with -ffp-contract=fast (core/CMakeLists.txt) so that `a += p * v` becomes one FMA
// where the target has it.
#pragma GCC diagnostic ignored "-Wpsabi"  // the helpers are inlined; no vector crosses an ABI boundary

#define KVTUNE_ATTENTION_CLONES KVTUNE_CLONES("arch=x86-64-v4", "arch=x86-64-v3")

namespace kvtune::kernels {
namespace {

// Eight doubles per vector: one zmm register on AVX-512, two ymm on AVX2, four xmm on baseline
// x86-64. Lane l of a dot product's accumulator sums the elements e ≡ l (mod 8), on every target.
using simd::v8d;
using simd::v8f;

[[gnu::always_inline]] inline v8d load(const double* p) {
  v8d v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
[[gnu::always_inline]] inline void store(double* p, v8d v) { std::memcpy(p, &v, sizeof v); }
[[gnu::always_inline]] inline v8d widen(const float* p) {
  v8f f;
  std::memcpy(&f, p, sizeof f);
  return __builtin_convertvector(f, v8d);
}

// The logits of `Queries` queries (rows of q, stride d) against one key row k: eight lanes per
// logit over the multiples of eight, the tail added to lanes 0.., then a fixed pairwise sum.
[[gnu::always_inline]] inline double lane_sum(v8d x) {
  return ((x[0] + x[1]) + (x[2] + x[3])) + ((x[4] + x[5]) + (x[6] + x[7]));
}

// The logits of `Queries` queries (rows of q, stride d) against `Keys` consecutive key rows: eight
// lanes per logit, element e in lane e mod 8 (the tail zero-padded), then a fixed pairwise sum.
// Keys > 1 only adds independent chains (each logit's own sum is unchanged).
template <int Queries, int Keys, bool Tail>
[[gnu::always_inline]] inline void dots(const double* q, const float* k, int64_t d, double scale, double* out,
                                        int64_t stride) {
  v8d acc[Keys][Queries];
  for (int b = 0; b < Keys; ++b) {
    for (int a = 0; a < Queries; ++a) acc[b][a] = v8d{};
  }
  const int64_t body = d - d % 8;
  for (int64_t e = 0; e < body; e += 8) {
    v8d kv[Keys];
    for (int b = 0; b < Keys; ++b) kv[b] = widen(k + b * d + e);
    for (int a = 0; a < Queries; ++a) {
      const v8d qv = load(q + a * d + e);
      for (int b = 0; b < Keys; ++b) acc[b][a] += qv * kv[b];
    }
  }
  if (Tail) {  // a separate instantiation: the tail's arrays would slow the common d % 8 == 0 loop
    for (int b = 0; b < Keys; ++b) {
      double kt[8] = {};
      for (int64_t e = body; e < d; ++e) kt[e - body] = double(k[b * d + e]);
      for (int a = 0; a < Queries; ++a) {
        double qt[8] = {};
        for (int64_t e = body; e < d; ++e) qt[e - body] = q[a * d + e];
        acc[b][a] += load(qt) * load(kt);
      }
    }
  }
  for (int b = 0; b < Keys; ++b) {
    for (int a = 0; a < Queries; ++a) out[a * stride + b] = lane_sum(acc[b][a]) * scale;
  }
}

// Four queries share each widened key vector. Keys key rows at a time: 2 with the 32 vector
// registers of AVX-512 (eight chains), 1 elsewhere (AVX2's four v8d accumulators already take
// eight of its 16 registers).
template <int Keys, bool Tail>
[[gnu::always_inline]] inline void logits_rows(const double* q, int64_t nq, const float* k, int64_t t, int64_t d,
                                               double scale, double* out, int64_t stride) {
  constexpr int64_t kQueries = 4;
  int64_t j = 0;
  for (; j + Keys <= t; j += Keys) {
    int64_t i = 0;
    for (; i + kQueries <= nq; i += kQueries) {
      dots<kQueries, Keys, Tail>(q + i * d, k + j * d, d, scale, out + i * stride + j, stride);
    }
    for (; i < nq; ++i) dots<1, Keys, Tail>(q + i * d, k + j * d, d, scale, out + i * stride + j, stride);
  }
  for (; j < t; ++j) {
    int64_t i = 0;
    for (; i + kQueries <= nq; i += kQueries) dots<kQueries, 1, Tail>(q + i * d, k + j * d, d, scale, out + i * stride + j, stride);
    for (; i < nq; ++i) dots<1, 1, Tail>(q + i * d, k + j * d, d, scale, out + i * stride + j, stride);
  }
}

// Whether this machine has AVX-512 (the wider blockings above are chosen at run time; every
// blocking gives the same bits).
bool wide_vectors() { return cpu_has_avx512(); }

}  // namespace

KVTUNE_ATTENTION_CLONES
void logits(const double* q, int64_t nq, const float* k, int64_t t, int64_t d, double scale, double* out,
            int64_t stride) {
  const bool wide = wide_vectors();
  if (d % 8 == 0) {
    wide ? logits_rows<2, false>(q, nq, k, t, d, scale, out, stride) : logits_rows<1, false>(q, nq, k, t, d, scale, out, stride);
  } else {
    wide ? logits_rows<2, true>(q, nq, k, t, d, scale, out, stride) : logits_rows<1, true>(q, nq, k, t, d, scale, out, stride);
  }
}

namespace {

// Adds Σ_j p[r][j] · v[j, e..e+8·Cols) over n tokens to out[r] for `Rows` rows; each element's
// chain runs over the tokens in order, so Rows and Cols change no bit. Rows · Cols independent
// chains hide the multiply-add latency; each token's values are read once for all rows.
template <int Rows, int Cols>
[[gnu::always_inline]] inline void accumulate_columns(const double* const* p, const float* v, int64_t n, int64_t d,
                                                      int64_t e, double* const* out) {
  v8d acc[Rows][Cols];
  for (int r = 0; r < Rows; ++r) {
    for (int c = 0; c < Cols; ++c) acc[r][c] = load(out[r] + e + 8 * c);
  }
  for (int64_t j = 0; j < n; ++j) {
    v8d x[Cols];
    for (int c = 0; c < Cols; ++c) x[c] = widen(v + j * d + e + 8 * c);
    for (int r = 0; r < Rows; ++r) {
      const double w = p[r][j];
      for (int c = 0; c < Cols; ++c) acc[r][c] += w * x[c];
    }
  }
  for (int r = 0; r < Rows; ++r) {
    for (int c = 0; c < Cols; ++c) store(out[r] + e + 8 * c, acc[r][c]);
  }
}

// The same over every column of `Rows` rows: blocks of 8 · Cols columns, then of 8, then single
// columns.
template <int Rows, int Cols>
[[gnu::always_inline]] inline void accumulate(const double* const* p, const float* v, int64_t n, int64_t d,
                                              double* const* out) {
  const int64_t body = d - d % 8;
  int64_t e = 0;
  for (; e + 8 * Cols <= body; e += 8 * Cols) accumulate_columns<Rows, Cols>(p, v, n, d, e, out);
  for (; e < body; e += 8) accumulate_columns<Rows, 1>(p, v, n, d, e, out);
  for (; e < d; ++e) {
    for (int r = 0; r < Rows; ++r) {
      double acc = out[r][e];
      for (int64_t j = 0; j < n; ++j) acc += p[r][j] * double(v[j * d + e]);
      out[r][e] = acc;
    }
  }
}

// Four rows of one block of tokens; with 32 vector registers (AVX-512) two column blocks at once,
// which doubles the independent chains (with 16, AVX2's eight accumulators already fill them).
template <int Cols>
[[gnu::always_inline]] inline void accumulate_rows(const double* const* rows, int64_t nrows, const float* v,
                                                   int64_t j0, int64_t n, int64_t d, double* out) {
  constexpr int kRows = 4;
  int64_t r = 0;
  for (; r + kRows <= nrows; r += kRows) {
    const double* p[kRows];
    double* o[kRows];
    for (int x = 0; x < kRows; ++x) {
      p[x] = rows[r + x] + j0;
      o[x] = out + (r + x) * d;
    }
    accumulate<kRows, Cols>(p, v + j0 * d, n, d, o);
  }
  for (; r < nrows; ++r) {
    const double* p[1] = {rows[r] + j0};
    double* o[1] = {out + r * d};
    accumulate<1, Cols>(p, v + j0 * d, n, d, o);
  }
}

}  // namespace

void probs_times_values(const double* const* rows, int64_t nrows, const float* v, int64_t t, int64_t d, double* out) {
  std::fill(out, out + nrows * d, 0.0);
  add_probs_times_values(rows, nrows, v, t, d, out);
}

KVTUNE_ATTENTION_CLONES
void add_probs_times_values(const double* const* rows, int64_t nrows, const float* v, int64_t t, int64_t d,
                            double* out) {
  // 256 tokens of values (128 KiB at d = 128) stay in L2 while every row passes over them.
  constexpr int64_t kBlock = 256;
  const bool wide = wide_vectors();
  for (int64_t j0 = 0; j0 < t; j0 += kBlock) {
    const int64_t n = std::min(kBlock, t - j0);
    if (wide) {
      accumulate_rows<2>(rows, nrows, v, j0, n, d, out);
    } else {
      accumulate_rows<1>(rows, nrows, v, j0, n, d, out);
    }
  }
}

}  // namespace kvtune::kernels

namespace kvtune::kernels {
namespace {

[[gnu::always_inline]] inline v8d abs8(v8d x) { return x < 0 ? -x : x; }
[[gnu::always_inline]] inline v8d max8(v8d a, v8d b) { return a > b ? a : b; }

}  // namespace

KVTUNE_ATTENTION_CLONES
LogitErrors logit_errors(const double* lr, const double* lq, const double* pr, double norm_r, double norm_q,
                         int64_t t) {
  const int64_t body = t - t % 8;
  // Pass 1: the largest |lq - lr| and the mean of lq - lr, in eight lanes (tail in lanes 0..).
  v8d max_err{}, sum{};
  for (int64_t j = 0; j < body; j += 8) {
    const v8d e = load(lq + j) - load(lr + j);
    max_err = max8(max_err, abs8(e));
    sum += e;
  }
  double m[8], s[8];
  store(m, max_err);
  store(s, sum);
  for (int64_t j = body; j < t; ++j) {
    const double e = lq[j] - lr[j];
    m[j - body] = std::max(m[j - body], std::abs(e));
    s[j - body] += e;
  }
  const double mean = (((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))) / double(t);
  // Pass 2: the largest |lq - lr - mean| and KL(pr || pq) = Σ pr · (log pr - log pq).
  const v8d mean8 = v8d{} + mean;
  v8d shift{}, kl{};
  for (int64_t j = 0; j < body; j += 8) {
    const v8d a = load(lr + j), b = load(lq + j);
    shift = max8(shift, abs8(b - a - mean8));
    kl += load(pr + j) * ((a - norm_r) - (b - norm_q));
  }
  double sh[8], k[8];
  store(sh, shift);
  store(k, kl);
  for (int64_t j = body; j < t; ++j) {
    sh[j - body] = std::max(sh[j - body], std::abs(lq[j] - lr[j] - mean));
    k[j - body] += pr[j] * ((lr[j] - norm_r) - (lq[j] - norm_q));
  }
  LogitErrors out;
  out.max_err = std::max({m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7]});
  out.shift_err = std::max({sh[0], sh[1], sh[2], sh[3], sh[4], sh[5], sh[6], sh[7]});
  out.kl = ((k[0] + k[1]) + (k[2] + k[3])) + ((k[4] + k[5]) + (k[6] + k[7]));
  return out;
}

KVTUNE_ATTENTION_CLONES
bool all_finite(const double* x, int64_t n) {
  // x - x is 0 for a finite x and NaN otherwise; a NaN lane makes the sum NaN.
  v8d acc{};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const v8d v = load(x + i);
    acc += v - v;
  }
  double tail = 0.0;
  for (; i < n; ++i) tail += x[i] - x[i];
  const double total = acc[0] + acc[1] + acc[2] + acc[3] + acc[4] + acc[5] + acc[6] + acc[7] + tail;
  return total == 0.0;
}

KVTUNE_ATTENTION_CLONES
double max_of(const double* x, int64_t n) {
  v8d best = v8d{} + x[0];  // every lane starts at x[0]: a NaN there stays, later ones never win
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const v8d v = load(x + i);
    best = v > best ? v : best;
  }
  double m = best[0];
  for (int l = 1; l < 8; ++l) m = best[l] > m ? best[l] : m;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

KVTUNE_ATTENTION_CLONES
void divide_by(double* p, int64_t n, double sum, float* narrow) {
  if (narrow == nullptr) {
    for (int64_t j = 0; j < n; ++j) p[j] /= sum;
    return;
  }
  for (int64_t j = 0; j < n; ++j) {
    const double v = p[j] / sum;
    p[j] = v;
    narrow[j] = static_cast<float>(v);
  }
}

KVTUNE_ATTENTION_CLONES
int64_t first_above(const double* x, int64_t from, int64_t n, double threshold) {
  using simd::v8l;
  const v8d limit = v8d{} + threshold;
  int64_t j = from;
  for (; j + 32 <= n; j += 32) {  // the lanes' masks of 32 entries combined before one reduction
    const v8l above = ((load(x + j) > limit) | (load(x + j + 8) > limit)) |
                      ((load(x + j + 16) > limit) | (load(x + j + 24) > limit));
    if (((above[0] | above[1]) | (above[2] | above[3])) | ((above[4] | above[5]) | (above[6] | above[7]))) break;
  }
  for (; j < n; ++j) {
    if (x[j] > threshold) return j;
  }
  return n;
}

}  // namespace kvtune::kernels

namespace kvtune::kernels {
namespace {

using simd::v8l;
using simd::v8u;

// exp(x) for x ≤ 0, eight at a time: x = n·ln2 + r with |r| ≤ ln2/2 (Cody and Waite's two-part
// ln2, fdlibm's constants, so n·ln2_hi is exact), exp(r) by its Taylor series to r^13 (truncation
// below 2^-57 relative), then 2^n through the exponent bits. Within 2 ulp of the exact value (tested
// against std::exp); below -708.39, where the result would be subnormal, it returns 0.
[[gnu::always_inline]] inline v8d exp_nonpositive(v8d x) {
  constexpr double kLog2e = 1.4426950408889634, kLn2Hi = 6.93147180369123816490e-01,
                   kLn2Lo = 1.90821492927058770002e-10, kShifter = 0x1.8p52;
  x = x < -745.0 ? v8d{} - 745.0 : x;
  const v8d t = x * kLog2e + kShifter;  // n in the low mantissa bits of t
  const v8d n = t - kShifter;
  const v8d r = (x - n * kLn2Hi) - n * kLn2Lo;
  v8d p = v8d{} + 1.0 / 6227020800.0;  // 1/13!
  constexpr double kInverseFactorials[] = {1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0,
                                           1.0 / 40320.0,     1.0 / 5040.0,     1.0 / 720.0,     1.0 / 120.0,
                                           1.0 / 24.0,        1.0 / 6.0,        0.5,             1.0,
                                           1.0};
  for (const double c : kInverseFactorials) p = p * r + c;
  v8l bits;
  std::memcpy(&bits, &t, sizeof bits);
  v8l shifter_bits;
  const v8d shifter = v8d{} + kShifter;
  std::memcpy(&shifter_bits, &shifter, sizeof shifter_bits);
  // Unsigned: below e^-708 the biased exponent is negative (the lane is replaced by 0 below), and
  // shifting a negative signed value is best avoided.
  const v8u scale_bits = v8u((bits - shifter_bits) + 1023) << 52;
  v8d scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  const v8d y = p * scale;
  return x < -708.39 ? v8d{} : y;
}

}  // namespace

KVTUNE_ATTENTION_CLONES
double exp_shifted(const double* l, int64_t t, double m, double* p) {
  v8d sum{};
  int64_t j = 0;
  for (; j + 8 <= t; j += 8) {
    const v8d e = exp_nonpositive(load(l + j) - m);
    store(p + j, e);
    sum += e;
  }
  if (j < t) {  // the tail through the same function: identical values whatever t is
    double in[8], out[8];
    for (int e = 0; e < 8; ++e) in[e] = j + e < t ? l[j + e] - m : -1000.0;
    const v8d e = exp_nonpositive(load(in));
    store(out, e);
    for (int64_t i = j; i < t; ++i) p[i] = out[i - j];
    sum += e;  // the padding contributes exp(-1000) = 0
  }
  double s[8];
  store(s, sum);
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

}  // namespace kvtune::kernels

// The float32 products (Precision::float32): sixteen floats per vector, no widening. Their
// error against the exact result is bounded in attention_kernels.h; each element is still one
// fixed chain, so the bits do not depend on blocking or threads.
namespace kvtune::kernels {
namespace {

using simd::v16f;

[[gnu::always_inline]] inline v16f load16(const float* p) {
  v16f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The two halves of sixteen floats, each widened (exactly) to eight doubles.
[[gnu::always_inline]] inline v8d low_half(v16f x) {
  return __builtin_convertvector(__builtin_shufflevector(x, x, 0, 1, 2, 3, 4, 5, 6, 7), v8d);
}
[[gnu::always_inline]] inline v8d high_half(v16f x) {
  return __builtin_convertvector(__builtin_shufflevector(x, x, 8, 9, 10, 11, 12, 13, 14, 15), v8d);
}

// One step of the reduction below: two vectors whose groups of W lanes each hold one logit's
// partial sums become one vector whose groups of W/2 lanes do (A's group g, then B's group g).
template <int W>
[[gnu::always_inline]] inline v16f fold(v16f a, v16f b) {
  if constexpr (W == 16) {
    return __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
           __builtin_shufflevector(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  } else if constexpr (W == 8) {
    return __builtin_shufflevector(a, b, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27) +
           __builtin_shufflevector(a, b, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
  } else if constexpr (W == 4) {
    return __builtin_shufflevector(a, b, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29) +
           __builtin_shufflevector(a, b, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
  } else {
    return __builtin_shufflevector(a, b, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30) +
           __builtin_shufflevector(a, b, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
  }
}

// Sixteen accumulators folded into one vector in four rounds; lane l ends up holding accumulator
// bit_reverse(l), so the caller feeds key row bit_reverse(s) to slot s and reads lanes in order.
[[gnu::always_inline]] inline v16f fold16(const v16f* acc) {
  v16f a[8], b[4], c[2];
  for (int i = 0; i < 8; ++i) a[i] = fold<16>(acc[2 * i], acc[2 * i + 1]);
  for (int i = 0; i < 4; ++i) b[i] = fold<8>(a[2 * i], a[2 * i + 1]);
  for (int i = 0; i < 2; ++i) c[i] = fold<4>(b[2 * i], b[2 * i + 1]);
  return fold<2>(c[0], c[1]);
}

constexpr int kBitReverse16[16] = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};

// The logits of every query against 16 consecutive key rows from `k` (a tile of 16 · d floats,
// L1-resident across the queries): sixteen chains per query, element e in lane e mod 16 (the tail
// zero-padded), folded in float32 and scaled in float64. D > 0 fixes d at compile time (the common
// head sizes), so the sixteen rows are one base register plus constant offsets.
template <int D, bool Tail>
[[gnu::always_inline]] inline void logits32_tile(const float* q, int64_t nq, const float* k, int64_t d, double scale,
                                                 double* out, int64_t stride) {
  const int64_t dd = D > 0 ? D : d;
  const int64_t body = dd - dd % 16;
  for (int64_t i = 0; i < nq; ++i) {
    const float* qi = q + i * dd;
    v16f acc[16];
#pragma GCC unroll 16
    for (int s = 0; s < 16; ++s) acc[s] = v16f{};
    for (int64_t e = 0; e < body; e += 16) {
      const v16f qv = load16(qi + e);
#pragma GCC unroll 16
      for (int s = 0; s < 16; ++s) acc[s] += qv * load16(k + kBitReverse16[s] * dd + e);
    }
    if (Tail) {
      float qt[16] = {};
      for (int64_t e = body; e < dd; ++e) qt[e - body] = qi[e];
      for (int s = 0; s < 16; ++s) {
        float kt[16] = {};
        for (int64_t e = body; e < dd; ++e) kt[e - body] = k[kBitReverse16[s] * dd + e];
        acc[s] += load16(qt) * load16(kt);
      }
    }
    const v16f sums = fold16(acc);
    store(out + i * stride, low_half(sums) * scale);
    store(out + i * stride + 8, high_half(sums) * scale);
  }
}

// The same logits for four queries against the same 16 key rows, four keys at a time: sixteen
// accumulators (query a, key b) share four query and four key vectors, half the loads of one query
// against sixteen keys. Each logit's chain and fold are logits32_tile's, so are its bits: slot s
// holds lane l = kBitReverse16[s], i.e. query l / 4 and key l % 4, and fold16 leaves it in lane l.
template <int D, bool Tail>
[[gnu::always_inline]] inline void logits32_tile4(const float* q, const float* k, int64_t d, double scale,
                                                  double* out, int64_t stride) {
  const int64_t dd = D > 0 ? D : d;
  const int64_t body = dd - dd % 16;
  for (int kg = 0; kg < 4; ++kg) {
    const float* kb = k + 4 * kg * dd;
    v16f acc[16];
#pragma GCC unroll 16
    for (int s = 0; s < 16; ++s) acc[s] = v16f{};
    for (int64_t e = 0; e < body; e += 16) {
      v16f qv[4], kv[4];
#pragma GCC unroll 4
      for (int a = 0; a < 4; ++a) qv[a] = load16(q + a * dd + e);
#pragma GCC unroll 4
      for (int b = 0; b < 4; ++b) kv[b] = load16(kb + b * dd + e);
#pragma GCC unroll 16
      for (int s = 0; s < 16; ++s) acc[s] += qv[kBitReverse16[s] / 4] * kv[kBitReverse16[s] % 4];
    }
    if (Tail) {
      float qt[4][16] = {}, kt[4][16] = {};
      for (int a = 0; a < 4; ++a) {
        for (int64_t e = body; e < dd; ++e) qt[a][e - body] = q[a * dd + e], kt[a][e - body] = kb[a * dd + e];
      }
      for (int s = 0; s < 16; ++s) acc[s] += load16(qt[kBitReverse16[s] / 4]) * load16(kt[kBitReverse16[s] % 4]);
    }
    const v16f sums = fold16(acc);
    const v8d lo = low_half(sums) * scale, hi = high_half(sums) * scale;
    for (int b = 0; b < 4; ++b) {
      out[0 * stride + 4 * kg + b] = lo[b];
      out[1 * stride + 4 * kg + b] = lo[4 + b];
      out[2 * stride + 4 * kg + b] = hi[b];
      out[3 * stride + 4 * kg + b] = hi[4 + b];
    }
  }
}

template <int D, bool Tail>
[[gnu::always_inline]] inline void logits32_all(const float* q, int64_t nq, const float* k, int64_t t, int64_t d,
                                                double scale, double* out, int64_t stride) {
  const int64_t dd = D > 0 ? D : d;
  // Four queries at a time with AVX-512's 32 registers (24 live vectors); one at a time elsewhere.
  const int64_t grouped = wide_vectors() ? nq - nq % 4 : 0;
  int64_t j = 0;
  for (; j + 16 <= t; j += 16) {
    for (int64_t i = 0; i < grouped; i += 4) {
      logits32_tile4<D, Tail>(q + i * dd, k + j * d, d, scale, out + i * stride + j, stride);
    }
    logits32_tile<D, Tail>(q + grouped * dd, nq - grouped, k + j * d, d, scale, out + grouped * stride + j, stride);
  }
  if (j == t) return;
  // The last keys through the same tile, padded with zero rows, so every logit has the same chain.
  const int64_t left = t - j;
  std::vector<float> pad(size_t(16 * d), 0.0f);
  std::copy(k + j * d, k + t * d, pad.begin());
  std::vector<double> tile(size_t(nq * 16));
  logits32_tile<D, Tail>(q, nq, pad.data(), d, scale, tile.data(), 16);
  for (int64_t i = 0; i < nq; ++i) std::copy(tile.data() + i * 16, tile.data() + i * 16 + left, out + i * stride + j);
}

}  // namespace

KVTUNE_ATTENTION_CLONES
void logits_f32(const float* q, int64_t nq, const float* k, int64_t t, int64_t d, double scale, double* out,
                int64_t stride) {
  switch (d) {
    case 64: return logits32_all<64, false>(q, nq, k, t, d, scale, out, stride);
    case 128: return logits32_all<128, false>(q, nq, k, t, d, scale, out, stride);
    case 256: return logits32_all<256, false>(q, nq, k, t, d, scale, out, stride);
    default:
      d % 16 == 0 ? logits32_all<0, false>(q, nq, k, t, d, scale, out, stride) : logits32_all<0, true>(q, nq, k, t, d, scale, out, stride);
  }
}

namespace {

// Adds Σ_j p[r][j] · v[j, e..e+16·Cols) over n ≤ kChain tokens to out[r] for `Rows` rows: a float32
// chain over the n tokens, then one float64 addition per element. D > 0 fixes the row stride at
// compile time.
template <int Rows, int Cols, int D>
[[gnu::always_inline]] inline void chain_columns(const float* const* p, const float* v, int64_t n, int64_t d,
                                                 int64_t e, double* const* out) {
  const int64_t dd = D > 0 ? D : d;
  v16f acc[Rows][Cols];
#pragma GCC unroll 4
  for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < Cols; ++c) acc[r][c] = v16f{};
  }
  for (int64_t j = 0; j < n; ++j) {
#pragma GCC unroll 4
    for (int r = 0; r < Rows; ++r) {
      const float w = p[r][j];
#pragma GCC unroll 16
      for (int c = 0; c < Cols; ++c) acc[r][c] += w * load16(v + j * dd + e + 16 * c);
    }
  }
  for (int r = 0; r < Rows; ++r) {
    for (int c = 0; c < Cols; ++c) {
      double* o = out[r] + e + 16 * c;
      store(o, load(o) + low_half(acc[r][c]));
      store(o + 8, load(o + 8) + high_half(acc[r][c]));
    }
  }
}

// One chain of n ≤ kChain tokens from c for every row: each 16 · Cols columns of it (16 KiB of
// values at d = 128, L1-resident) serve every row group before the next, so the values come from
// L2 once per chain instead of once per row group. Then the columns past the last such block,
// sixteen at a time, then one at a time (the same chains, scalar).
template <int Rows, int Cols, int D>
[[gnu::always_inline]] inline void chain_every_row(const float* const* rows, int64_t nrows, const float* v, int64_t c,
                                                   int64_t n, int64_t d, double* out) {
  const int64_t body = d - d % (16 * Cols);
  const float* vc = v + c * d;
  for (int64_t e = 0; e < body; e += 16 * Cols) {
    int64_t r = 0;
    for (; r + Rows <= nrows; r += Rows) {
      const float* pc[Rows];
      double* o[Rows];
      for (int x = 0; x < Rows; ++x) pc[x] = rows[r + x] + c, o[x] = out + (r + x) * d;
      chain_columns<Rows, Cols, D>(pc, vc, n, d, e, o);
    }
    for (; r < nrows; ++r) {
      const float* pc[1] = {rows[r] + c};
      double* o[1] = {out + r * d};
      chain_columns<1, Cols, D>(pc, vc, n, d, e, o);
    }
  }
  if (body == d) return;
  for (int64_t r = 0; r < nrows; ++r) {
    const float* pc[1] = {rows[r] + c};
    double* o[1] = {out + r * d};
    int64_t e = body;
    for (; e + 16 <= d; e += 16) chain_columns<1, 1, D>(pc, vc, n, d, e, o);
    for (; e < d; ++e) {
      // std::fma, not `acc += p * v`: GCC vectorizes that loop's products and keeps only the
      // additions in order, so nothing fuses and these columns would round differently.
      float acc = 0.0f;
      for (int64_t j = 0; j < n; ++j) acc = std::fma(pc[0][j], vc[j * d + e], acc);
      o[0][e] += double(acc);
    }
  }
}

// One chain of kChain tokens at a time over every row (chain_every_row). On AVX-512 4 rows × 4
// column vectors at a time: 16 accumulators, and 8 loads per 16 multiply-adds where 2 × 8 with
// memory operands needed 18. 1 × 4 elsewhere (AVX2's 16 registers).
template <int D>
[[gnu::always_inline]] inline void probs_times_values32(const float* const* rows, int64_t nrows, const float* v,
                                                        int64_t t, int64_t d, double* out) {
  const bool wide = wide_vectors();
  for (int64_t c = 0; c < t; c += kChain) {
    const int64_t n = std::min(kChain, t - c);
    if (wide) {
      chain_every_row<4, 4, D>(rows, nrows, v, c, n, d, out);
    } else {
      chain_every_row<1, 4, D>(rows, nrows, v, c, n, d, out);
    }
  }
}

}  // namespace

void probs_times_values_f32(const float* const* rows, int64_t nrows, const float* v, int64_t t, int64_t d,
                            double* out) {
  std::fill(out, out + nrows * d, 0.0);
  add_probs_times_values_f32(rows, nrows, v, t, d, out);
}

KVTUNE_ATTENTION_CLONES
void add_probs_times_values_f32(const float* const* rows, int64_t nrows, const float* v, int64_t t, int64_t d,
                                double* out) {
  switch (d) {
    case 64: return probs_times_values32<64>(rows, nrows, v, t, d, out);
    case 128: return probs_times_values32<128>(rows, nrows, v, t, d, out);
    case 256: return probs_times_values32<256>(rows, nrows, v, t, d, out);
    default: return probs_times_values32<0>(rows, nrows, v, t, d, out);
  }
}

}  // namespace kvtune::kernels
