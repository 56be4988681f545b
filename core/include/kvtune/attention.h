// Reference attention in float64 and the per-query comparison of a quantized key cache against it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kvtune/matrix.h"

namespace kvtune {

// Logits, log-probabilities and probabilities of one set of queries against one key cache,
// [Nq, T] row-major float64.
struct AttentionScores {
  int64_t queries = 0, tokens = 0;
  std::vector<double> logits, log_probs, probs;
  const double* logit_row(int64_t i) const { return logits.data() + i * tokens; }
  const double* log_prob_row(int64_t i) const { return log_probs.data() + i * tokens; }
  const double* prob_row(int64_t i) const { return probs.data() + i * tokens; }
};

// logits = (q · k_j) / sqrt(D), softmax over j, all in float64.
AttentionScores attention_scores(ConstMatrixView queries, ConstMatrixView keys);

// Scores from logits given without the 1/sqrt(D) factor (a scheme's logits estimator).
AttentionScores scores_from_raw_logits(ConstMatrixView raw_logits, int64_t head_dim);

// Values widened to float64 once, so a value cache can be reused against many score sets.
std::vector<double> widen(ConstMatrixView values);

// out [Nq, D] = probs · values; values_f64 is [T, cols] row-major.
std::vector<double> attention_output(const AttentionScores& scores, std::span<const double> values_f64,
                                     int64_t cols);

}  // namespace kvtune
