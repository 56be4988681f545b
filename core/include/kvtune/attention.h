// Reference attention in float64 and the per-query comparison of a quantized key cache against it.
//
// Inputs are float32 (the caches as stored); every product and sum is float64. The product of two
// float32 numbers is exact in float64 (24 + 24 significand bits < 53), so a logit or an output
// element differs from the exact real-number result only by its float64 sum: at most
// n · 2^-53 · Σ|terms| for a sum of n terms. Each element is one in-order fused multiply-add chain
// whatever the CPU's vector width, so results are bit-identical on every x86-64 machine and for
// every thread count.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kvtune/matrix.h"

namespace kvtune {

// Logits and probabilities of one set of queries against one key cache, [Nq, T] row-major float64;
// log_norm holds log Σ_j exp(logit_ij) per query, so log p_ij = logit_ij - log_norm_i.
struct AttentionScores {
  int64_t queries = 0, tokens = 0;
  std::vector<double> logits, probs, log_norm;
  const double* logit_row(int64_t i) const { return logits.data() + i * tokens; }
  const double* prob_row(int64_t i) const { return probs.data() + i * tokens; }
};

// logits = (q · k_j) / sqrt(D), softmax over j. The second form reuses `out`'s storage (an
// evaluator keeps one AttentionScores per key configuration across cases).
AttentionScores attention_scores(ConstMatrixView queries, ConstMatrixView keys);
void attention_scores(ConstMatrixView queries, ConstMatrixView keys, AttentionScores& out);

// Scores from logits given without the 1/sqrt(D) factor (a scheme's logits estimator).
AttentionScores scores_from_raw_logits(ConstMatrixView raw_logits, int64_t head_dim);

// out[r, :] = Σ_j prob_rows[r][j] · values[j, :] for every row r, [rows.size(), D] row-major. One
// pass over `values` serves every row, so the rows of several key configurations share it.
void attention_outputs(std::span<const double* const> prob_rows, ConstMatrixView values, double* out);

// out [Nq, D] = probs · values.
std::vector<double> attention_output(const AttentionScores& scores, ConstMatrixView values);

}  // namespace kvtune
