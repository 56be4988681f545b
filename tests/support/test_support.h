// Helpers shared by the test suites.
#pragma once

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <random>
#include <string>

#include "builtin.h"
#include "kvtune/error.h"
#include "kvtune/matrix.h"

namespace kvtune::testing {

// The message of the InputError `f` throws; "no error" when it throws none.
template <typename F>
std::string input_error(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

inline std::string data_path(const std::string& relative) { return std::string(KVTUNE_TEST_DATA) + "/" + relative; }

// N(0, sigma) entries from a fixed seed.
inline Matrix normal_matrix(int64_t rows, int64_t cols, uint64_t seed, float sigma = 1.0f) {
  std::mt19937_64 engine(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  Matrix m(rows, cols);
  for (int64_t i = 0; i < m.size(); ++i) m.data()[i] = normal(engine);
  return m;
}

inline SchemePtr make_scheme(const std::string& spec) { return builtin_registry().make(spec); }

// A [rows, cols] block with the given values, row-major (a hand-computed test block).
inline Matrix block(int64_t rows, int64_t cols, std::initializer_list<float> values) {
  Matrix m(rows, cols);
  std::copy(values.begin(), values.end(), m.data());
  return m;
}

// ||roundtrip(x) - x|| / ||x|| for a scheme spec, in float64.
inline double roundtrip_rel_err(const std::string& spec, ConstMatrixView x, const QuantContext& ctx = {}) {
  Matrix y(x.rows, x.cols);
  make_scheme(spec)->roundtrip(x, ctx, y);
  double num = 0, den = 0;
  for (int64_t i = 0; i < x.size(); ++i) {
    num += double(y.data()[i] - x.data[i]) * (y.data()[i] - x.data[i]);
    den += double(x.data[i]) * x.data[i];
  }
  return std::sqrt(num / den);
}

}  // namespace kvtune::testing
