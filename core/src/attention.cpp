#include "kvtune/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "attention_kernels.h"

namespace kvtune {

// Softmax per row: p = exp(l - max) / Σ, and log_norm = max + log Σ. One exp per element, eight at
// a time (kernels::exp_shifted). For float32 products also p rounded to float32, while p is in cache.
void finish_scores(AttentionScores& s, Precision precision) {
  if (s.softcap > 0.0) {
    for (double& l : s.logits) l = capped_logit(l, s.softcap);
  }
  s.probs.resize(s.logits.size());
  const bool narrow = precision == Precision::float32;
  s.probs32.resize(narrow ? s.logits.size() : 0);
  s.log_norm.resize(static_cast<size_t>(s.queries));
  for (int64_t i = 0; i < s.queries; ++i) {
    const double* l = s.logit_row(i);
    double* p = s.probs.data() + i * s.tokens;
    const double m = kernels::max_of(l, s.tokens);
    const double sum = kernels::exp_shifted(l, s.tokens, m, p);
    kernels::divide_by(p, s.tokens, sum, narrow ? s.probs32.data() + i * s.tokens : nullptr);
    s.log_norm[static_cast<size_t>(i)] = m + std::log(sum);
  }
}

double capped_logit(double logit, double softcap) {
  return softcap > 0.0 ? softcap * std::tanh(logit / softcap) : logit;
}

void attention_scores(ConstMatrixView queries, ConstMatrixView keys, AttentionScores& out, Precision precision,
                      double softcap) {
  begin_scores(queries.rows, keys.rows, out, softcap);
  add_logits(queries, 0, keys, out, precision);
  finish_scores(out, precision);
}

void begin_scores(int64_t queries, int64_t tokens, AttentionScores& out, double softcap) {
  out.queries = queries;
  out.tokens = tokens;
  out.softcap = softcap;
  out.logits.resize(static_cast<size_t>(queries * tokens));
}

void add_logits(ConstMatrixView queries, int64_t first, ConstMatrixView keys, AttentionScores& out,
                Precision precision) {
  const double scale = 1.0 / std::sqrt(double(queries.cols));
  double* at = out.logits.data() + first;
  if (precision == Precision::float32) {
    kernels::logits_f32(queries.data, queries.rows, keys.data, keys.rows, keys.cols, scale, at, out.tokens);
  } else {
    const std::vector<double> q(queries.data, queries.data + queries.size());
    kernels::logits(q.data(), queries.rows, keys.data, keys.rows, keys.cols, scale, at, out.tokens);
  }
}

AttentionScores attention_scores(ConstMatrixView queries, ConstMatrixView keys, double softcap) {
  AttentionScores s;
  attention_scores(queries, keys, s, Precision::float64, softcap);
  return s;
}

AttentionScores scores_from_raw_logits(ConstMatrixView raw, int64_t head_dim, Precision precision, double softcap) {
  AttentionScores s;
  s.queries = raw.rows;
  s.tokens = raw.cols;
  s.softcap = softcap;
  s.logits.resize(static_cast<size_t>(raw.size()));
  const double scale = 1.0 / std::sqrt(double(head_dim));
  for (int64_t i = 0; i < raw.size(); ++i) s.logits[i] = double(raw.data[i]) * scale;
  finish_scores(s, precision);
  return s;
}

void attention_outputs(std::span<const double* const> prob_rows, ConstMatrixView values, double* out,
                       Precision precision) {
  const int64_t nrows = int64_t(prob_rows.size());
  if (precision == Precision::float64) {
    kernels::probs_times_values(prob_rows.data(), nrows, values.data, values.rows, values.cols, out);
    return;
  }
  std::vector<float> narrow(static_cast<size_t>(nrows * values.rows));
  std::vector<const float*> rows32;
  for (int64_t r = 0; r < nrows; ++r) {
    float* row = narrow.data() + r * values.rows;
    std::copy(prob_rows[size_t(r)], prob_rows[size_t(r)] + values.rows, row);
    rows32.push_back(row);
  }
  attention_outputs(rows32, values, out);
}

void attention_outputs(std::span<const float* const> prob_rows32, ConstMatrixView values, double* out) {
  kernels::probs_times_values_f32(prob_rows32.data(), int64_t(prob_rows32.size()), values.data, values.rows,
                                  values.cols, out);
}

namespace {

template <typename P>
std::vector<const P*> advanced(std::span<const P* const> rows, int64_t first) {
  std::vector<const P*> out;
  for (const P* row : rows) out.push_back(row + first);
  return out;
}

}  // namespace

void add_attention_outputs(std::span<const double* const> prob_rows, int64_t first, ConstMatrixView values,
                           double* out) {
  kernels::add_probs_times_values(advanced(prob_rows, first).data(), int64_t(prob_rows.size()), values.data,
                                  values.rows, values.cols, out);
}

void add_attention_outputs(std::span<const float* const> prob_rows32, int64_t first, ConstMatrixView values,
                           double* out) {
  static_assert(kSliceAlignment % kernels::kChain == 0, "a float32 chain must not straddle two slices");
  kernels::add_probs_times_values_f32(advanced(prob_rows32, first).data(), int64_t(prob_rows32.size()),
                                      values.data, values.rows, values.cols, out);
}

std::vector<double> attention_output(const AttentionScores& scores, ConstMatrixView values, Precision precision) {
  std::vector<double> out(static_cast<size_t>(scores.queries * values.cols));
  if (precision == Precision::float32 && scores.probs32.size() == scores.probs.size()) {
    std::vector<const float*> rows;
    for (int64_t i = 0; i < scores.queries; ++i) rows.push_back(scores.prob32_row(i));
    attention_outputs(rows, values, out.data());
    return out;
  }
  std::vector<const double*> rows;
  for (int64_t i = 0; i < scores.queries; ++i) rows.push_back(scores.prob_row(i));
  attention_outputs(rows, values, out.data(), precision);
  return out;
}

}  // namespace kvtune
