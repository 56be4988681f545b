// Attention of float32 caches (as stored) with its two products, q · k and p · v, in float64 (the
// reference) or float32 (two to three times faster), and softmax always in float64.
//
// float64: the product of two float32 numbers is exact in float64 (24 + 24 significand bits < 53),
// so a logit or an output element differs from the exact real-number result only by its float64
// sum: at most n · 2^-53 · Σ|terms| for a sum of n terms.
// float32: with u = 2^-24, each logit is within (⌈D/16⌉ + 5) · u · Σ_e |q_e k_e| / sqrt(D) of the
// exact value and each output element within 66 · u · Σ_j p_j |v_je| (kernels::logits_f32,
// probs_times_values_f32); docs/sweep-file.md turns these into bounds on every metric. A softcap
// (AttentionScores::softcap) is applied to the finished logits in float64; it is 1-Lipschitz, so
// the bounds hold for the capped logits, plus tanh's own rounding (a few ulp of the cap).
// Each element is one fixed chain whatever the CPU's vector width, so results are bit-identical
// for every thread count, and on every x86-64 machine with FMA.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "kvtune/matrix.h"

namespace kvtune {

// The arithmetic of the two products.
enum class Precision { float64, float32 };
constexpr std::string_view precision_name(Precision p) { return p == Precision::float32 ? "float32" : "float64"; }
// The precision a name from precision_name() stands for; nullopt for any other text.
constexpr std::optional<Precision> precision_from_name(std::string_view name) {
  if (name == precision_name(Precision::float64)) return Precision::float64;
  if (name == precision_name(Precision::float32)) return Precision::float32;
  return std::nullopt;
}

// Logits and probabilities of one set of queries against one key cache, [Nq, T] row-major float64;
// log_norm holds log Σ_j exp(logit_ij) per query, so log p_ij = logit_ij - log_norm_i. probs32 is
// probs rounded to float32 when the scores were made for float32 products (empty otherwise): the
// float32 product's first step, taken once here instead of once per value configuration.
struct AttentionScores {
  int64_t queries = 0, tokens = 0;
  // Gemma 2's attn_logit_softcapping: finish_scores turns each logit l into softcap · tanh(l / softcap)
  // before the softmax, and `logits` keeps the capped values; 0: none.
  double softcap = 0.0;
  std::vector<double> logits, probs, log_norm;
  std::vector<float> probs32;
  const double* logit_row(int64_t i) const { return logits.data() + i * tokens; }
  const double* prob_row(int64_t i) const { return probs.data() + i * tokens; }
  const float* prob32_row(int64_t i) const { return probs32.data() + i * tokens; }
};

// logits = (q · k_j) / sqrt(D), capped by `softcap` when it is above 0 (AttentionScores::softcap),
// softmax over j. The second form reuses `out`'s storage (an evaluator keeps one AttentionScores per
// key configuration across cases); with float32 it also fills probs32.
AttentionScores attention_scores(ConstMatrixView queries, ConstMatrixView keys, double softcap = 0.0);
void attention_scores(ConstMatrixView queries, ConstMatrixView keys, AttentionScores& out,
                      Precision precision = Precision::float64, double softcap = 0.0);

// The same scores built a slice of keys at a time: begin_scores sizes out for [queries, tokens],
// add_logits writes the logits of `keys` holding rows first .. first + keys.rows of the cache, and
// finish_scores takes the softmax once every slice is in. Each logit is its own chain, so any slices
// give attention_scores' bits, and a caller may round-trip keys a few rows at a time.
void begin_scores(int64_t queries, int64_t tokens, AttentionScores& out, double softcap = 0.0);
void add_logits(ConstMatrixView queries, int64_t first, ConstMatrixView keys, AttentionScores& out,
                Precision precision);
void finish_scores(AttentionScores& out, Precision precision);

// Scores from logits given without the 1/sqrt(D) factor (a scheme's logits estimator); probs32 as
// attention_scores fills it for `precision`.
AttentionScores scores_from_raw_logits(ConstMatrixView raw_logits, int64_t head_dim,
                                       Precision precision = Precision::float64, double softcap = 0.0);

// softcap · tanh(logit / softcap), the logit itself when softcap is 0: 1-Lipschitz, so a logit's
// error bound holds for the capped logit.
double capped_logit(double logit, double softcap);

// out[r, :] = Σ_j prob_rows[r][j] · values[j, :] for every row r, [rows.size(), D] row-major. One
// pass over `values` serves every row, so the rows of several key configurations share it.
void attention_outputs(std::span<const double* const> prob_rows, ConstMatrixView values, double* out,
                       Precision precision = Precision::float64);
// The same in float32 from rows already rounded to float32 (prob32_row): the same bits as the
// float64 rows they were rounded from with Precision::float32.
void attention_outputs(std::span<const float* const> prob_rows32, ConstMatrixView values, double* out);

// Adds Σ_j prob_rows[r][first + j] · values[j, :] to out[r, :]: the product over a slice of the
// tokens, values holding rows first .. first + values.rows of the cache. Slices of one cache added
// in order, each starting on a multiple of kSliceAlignment tokens, give attention_outputs' bits, so
// a caller may round-trip a cache a few rows at a time and use each slice while it is in cache.
inline constexpr int64_t kSliceAlignment = 64;
void add_attention_outputs(std::span<const double* const> prob_rows, int64_t first, ConstMatrixView values,
                           double* out);
void add_attention_outputs(std::span<const float* const> prob_rows32, int64_t first, ConstMatrixView values,
                           double* out);

// out [Nq, D] = probs · values (from probs32 with float32 when the scores have it).
std::vector<double> attention_output(const AttentionScores& scores, ConstMatrixView values,
                                     Precision precision = Precision::float64);

}  // namespace kvtune
