// The evaluator's two products over float32 caches with float64 arithmetic, vectorized for the CPU
// found at run time (AVX-512, AVX2 + FMA, or baseline x86-64; GCC target_clones). Raw pointers,
// row-major, no allocation visible to the caller. Each output element is one in-order chain of
// multiply-adds, so it does not depend on how rows or tokens are blocked or on the thread count;
// machines with FMA (x86-64-v3 and later) fuse each step and give identical bits, a baseline
// machine rounds the product first and may differ in the last bits.
#pragma once

#include <cstdint>

namespace kvtune::kernels {

// out[i * t + j] = scale · Σ_e q[i * d + e] · k[j * d + e]   (q already in float64, [nq, d])
void logits(const double* q, int64_t nq, const float* k, int64_t t, int64_t d, double scale, double* out);

// out[r * d + e] = Σ_j rows[r][j] · v[j * d + e]   for r < nrows   (v is [t, d])
void probs_times_values(const double* const* rows, int64_t nrows, const float* v, int64_t t, int64_t d, double* out);

// One query's logit errors of a quantized key cache against the reference: max |lq - lr|, the same
// after removing the mean shift (softmax ignores it), and KL(p_ref || p_q) with log p = logit - norm.
struct LogitErrors {
  double max_err = 0.0, shift_err = 0.0, kl = 0.0;
};
LogitErrors logit_errors(const double* lr, const double* lq, const double* pr, double norm_r, double norm_q, int64_t t);

// p[j] = exp(l[j] - m) for j < t (each l[j] ≤ m; within 2 ulp of std::exp, 0 below e^-708.39), and
// returns Σ p[j] (eight lanes, summed in a fixed order).
double exp_shifted(const double* l, int64_t t, double m, double* p);

// True when every x[i] is finite.
bool all_finite(const double* x, int64_t n);

}  // namespace kvtune::kernels
