#include "kvtune/attention.h"

#include <Eigen/Dense>
#include <cmath>

namespace kvtune {
namespace {

using RowMajorD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowMajorF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

Eigen::Map<const RowMajorF> map(ConstMatrixView m) { return {m.data, m.rows, m.cols}; }

void finish_softmax(AttentionScores& s) {
  s.log_probs.resize(s.logits.size());
  s.probs.resize(s.logits.size());
  for (int64_t i = 0; i < s.queries; ++i) {
    const double* l = s.logit_row(i);
    double m = l[0];
    for (int64_t j = 1; j < s.tokens; ++j) m = std::max(m, l[j]);
    double sum = 0.0;
    for (int64_t j = 0; j < s.tokens; ++j) sum += std::exp(l[j] - m);
    const double lse = m + std::log(sum);
    double* lp = s.log_probs.data() + i * s.tokens;
    double* p = s.probs.data() + i * s.tokens;
    for (int64_t j = 0; j < s.tokens; ++j) {
      lp[j] = l[j] - lse;
      p[j] = std::exp(lp[j]);
    }
  }
}

}  // namespace

AttentionScores attention_scores(ConstMatrixView queries, ConstMatrixView keys) {
  AttentionScores s;
  s.queries = queries.rows;
  s.tokens = keys.rows;
  s.logits.resize(static_cast<size_t>(s.queries * s.tokens));
  Eigen::Map<RowMajorD> logits(s.logits.data(), s.queries, s.tokens);
  const RowMajorD q = map(queries).cast<double>();
  const RowMajorD k = map(keys).cast<double>();
  logits.noalias() = q * k.transpose();
  logits *= 1.0 / std::sqrt(double(queries.cols));
  finish_softmax(s);
  return s;
}

AttentionScores scores_from_raw_logits(ConstMatrixView raw, int64_t head_dim) {
  AttentionScores s;
  s.queries = raw.rows;
  s.tokens = raw.cols;
  s.logits.resize(static_cast<size_t>(raw.size()));
  const double scale = 1.0 / std::sqrt(double(head_dim));
  for (int64_t i = 0; i < raw.size(); ++i) s.logits[i] = double(raw.data[i]) * scale;
  finish_softmax(s);
  return s;
}

std::vector<double> widen(ConstMatrixView values) { return {values.data, values.data + values.size()}; }

std::vector<double> attention_output(const AttentionScores& scores, std::span<const double> values_f64,
                                     int64_t cols) {
  std::vector<double> out(static_cast<size_t>(scores.queries * cols));
  Eigen::Map<RowMajorD> o(out.data(), scores.queries, cols);
  Eigen::Map<const RowMajorD> p(scores.probs.data(), scores.queries, scores.tokens);
  Eigen::Map<const RowMajorD> v(values_f64.data(), scores.tokens, cols);
  o.noalias() = p * v;
  return out;
}

}  // namespace kvtune
