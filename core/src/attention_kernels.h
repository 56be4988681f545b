// The evaluator's two products over float32 caches with float64 arithmetic, vectorized for the CPU
// found at run time (AVX-512, AVX2 + FMA, or baseline x86-64; GCC target_clones). Raw pointers,
// row-major, no allocation visible to the caller. Each output element is one in-order chain of
// multiply-adds, so it does not depend on how rows or tokens are blocked or on the thread count;
// machines with FMA (x86-64-v3 and later) fuse each step and give identical bits, a baseline
// machine, or a build without clones (kMultiversioned false: AddressSanitizer, clang), rounds the
// product first and may differ in the last bits (the float32 output's columns past the last 16
// fuse everywhere: std::fma).
#pragma once

#include <cstdint>

namespace kvtune::kernels {

// out[i * stride + j] = scale · Σ_e q[i * d + e] · k[j * d + e]   for j < t   (q already in float64,
// [nq, d]); each logit is its own chain, so slices of the keys (stride the whole row) give the bits
// of the whole.
void logits(const double* q, int64_t nq, const float* k, int64_t t, int64_t d, double scale, double* out,
            int64_t stride);

// out[r * d + e] = Σ_j rows[r][j] · v[j * d + e]   for r < nrows   (v is [t, d])
void probs_times_values(const double* const* rows, int64_t nrows, const float* v, int64_t t, int64_t d, double* out);
// The same added to out: the products of consecutive slices of tokens (rows and v advanced to each
// slice's first token) summed into one out give probs_times_values' bits.
void add_probs_times_values(const double* const* rows, int64_t nrows, const float* v, int64_t t, int64_t d,
                            double* out);

// The same two products in float32 arithmetic (Precision::float32), two to three times faster; the
// probabilities come already rounded to float32 (AttentionScores::probs32, once per score set
// rather than once per value configuration that reads them). Bounds against the exact real-number
// result of the float64 probabilities, with u = 2^-24:
//   logits_f32:  |out - exact| ≤ (⌈d/16⌉ + 5) · u · scale · Σ_e |q_e · k_e|
//                (sixteen lanes of ⌈d/16⌉ float32 multiply-adds, four float32 folds, one scaling);
//   probs_times_values_f32:  |out - exact| ≤ (kChain + 2) · u · Σ_j p_j · |v_je|
//                (p rounded to float32, float32 chains of kChain tokens, added in float64).
// The float64 kernels above are within (⌈d/8⌉ + 4) · 2^-53 of the same sums.
inline constexpr int64_t kChain = 64;
void logits_f32(const float* q, int64_t nq, const float* k, int64_t t, int64_t d, double scale, double* out,
                int64_t stride);
void probs_times_values_f32(const float* const* rows, int64_t nrows, const float* v, int64_t t, int64_t d,
                            double* out);
// The same added to out; slices that start on a multiple of kChain tokens (each chain then falls
// inside one slice) summed in order give probs_times_values_f32's bits.
void add_probs_times_values_f32(const float* const* rows, int64_t nrows, const float* v, int64_t t, int64_t d,
                                double* out);

// One query's logit errors of a quantized key cache against the reference: max |lq - lr|, the same
// after removing the mean shift (softmax ignores it), and KL(p_ref || p_q) with log p = logit - norm.
struct LogitErrors {
  double max_err = 0.0, shift_err = 0.0, kl = 0.0;
};
LogitErrors logit_errors(const double* lr, const double* lq, const double* pr, double norm_r, double norm_q, int64_t t);

// p[j] = exp(l[j] - m) for j < t (each l[j] ≤ m; within 2 ulp of std::exp, 0 below e^-708.39), and
// returns Σ p[j] (eight lanes, summed in a fixed order).
double exp_shifted(const double* l, int64_t t, double m, double* p);

// The largest x[i] for n >= 1, as std::max_element finds it: a NaN never wins unless it is x[0]
// (then the result is NaN). Equal values may come from either, so a zero's sign may differ.
double max_of(const double* x, int64_t n);

// p[j] = p[j] / sum for j < n (IEEE division, the scalar loop's bits), and narrow[j] = float(p[j])
// when narrow is not null.
void divide_by(double* p, int64_t n, double sum, float* narrow);

// The first j in [from, n) with x[j] > threshold (a NaN x[j] is not), or n.
int64_t first_above(const double* x, int64_t from, int64_t n, double threshold);

// True when every x[i] is finite.
bool all_finite(const double* x, int64_t n);

}  // namespace kvtune::kernels
