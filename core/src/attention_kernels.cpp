#include "attention_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kvtune/numeric/multiversion.h"

// The code is written once on GCC vector types and compiled per target (target_clones); this file
// alone is built with -ffp-contract=fast (core/CMakeLists.txt) so that `a += p * v` becomes one FMA
// where the target has it.
#pragma GCC diagnostic ignored "-Wpsabi"  // the helpers are inlined; no vector crosses an ABI boundary

#define KVTUNE_ATTENTION_CLONES KVTUNE_CLONES("arch=x86-64-v4", "arch=x86-64-v3")

namespace kvtune::kernels {
namespace {

// Eight doubles per vector: one zmm register on AVX-512, two ymm on AVX2, four xmm on baseline
// x86-64. Lane l of a dot product's accumulator sums the elements e ≡ l (mod 8), on every target.
using v8d = double __attribute__((vector_size(64), aligned(8)));
using v8f = float __attribute__((vector_size(32), aligned(4)));

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
                                               double scale, double* out) {
  constexpr int64_t kQueries = 4;
  int64_t j = 0;
  for (; j + Keys <= t; j += Keys) {
    int64_t i = 0;
    for (; i + kQueries <= nq; i += kQueries) {
      dots<kQueries, Keys, Tail>(q + i * d, k + j * d, d, scale, out + i * t + j, t);
    }
    for (; i < nq; ++i) dots<1, Keys, Tail>(q + i * d, k + j * d, d, scale, out + i * t + j, t);
  }
  for (; j < t; ++j) {
    int64_t i = 0;
    for (; i + kQueries <= nq; i += kQueries) dots<kQueries, 1, Tail>(q + i * d, k + j * d, d, scale, out + i * t + j, t);
    for (; i < nq; ++i) dots<1, 1, Tail>(q + i * d, k + j * d, d, scale, out + i * t + j, t);
  }
}

// Whether this machine has AVX-512 (the wider blockings above are chosen at run time; every
// blocking gives the same bits).
bool wide_vectors() {
  static const bool wide = __builtin_cpu_supports("avx512f");
  return wide;
}

}  // namespace

KVTUNE_ATTENTION_CLONES
void logits(const double* q, int64_t nq, const float* k, int64_t t, int64_t d, double scale, double* out) {
  const bool wide = wide_vectors();
  if (d % 8 == 0) {
    wide ? logits_rows<2, false>(q, nq, k, t, d, scale, out) : logits_rows<1, false>(q, nq, k, t, d, scale, out);
  } else {
    wide ? logits_rows<2, true>(q, nq, k, t, d, scale, out) : logits_rows<1, true>(q, nq, k, t, d, scale, out);
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

KVTUNE_ATTENTION_CLONES
void probs_times_values(const double* const* rows, int64_t nrows, const float* v, int64_t t, int64_t d, double* out) {
  std::fill(out, out + nrows * d, 0.0);
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

}  // namespace kvtune::kernels

namespace kvtune::kernels {
namespace {

using v8l = int64_t __attribute__((vector_size(64), aligned(8)));
using v8u = uint64_t __attribute__((vector_size(64), aligned(8)));

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
