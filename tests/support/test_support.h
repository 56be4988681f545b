// Helpers shared by the test suites.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

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

// N(0, scale) entries drawn from `rng`, which the caller keeps drawing from.
inline Matrix random_matrix(int64_t rows, int64_t cols, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> n(0.0f, scale);
  Matrix m(rows, cols);
  for (int64_t i = 0; i < m.size(); ++i) m.data()[i] = n(rng);
  return m;
}

inline SchemePtr make_scheme(const std::string& spec) { return builtin_registry().make(spec); }

// A spec as the registry writes it back (the canonical form).
inline std::string canonical(const std::string& spec) { return make_scheme(spec)->spec(); }

// x quantized and dequantized by the scheme `spec` describes.
inline Matrix roundtrip(const std::string& spec, const Matrix& x) {
  Matrix y(x.rows(), x.cols());
  make_scheme(spec)->roundtrip(x, {}, y);
  return y;
}

// The float32 stored at byte `offset` of a packed buffer.
inline float read_f32(const std::vector<std::byte>& p, size_t offset) {
  float f;
  std::memcpy(&f, p.data() + offset, 4);
  return f;
}

// The configs/ folder of the source tree (model presets, runtime tables).
inline std::filesystem::path config_dir() { return std::filesystem::path(KVTUNE_SOURCE_DIR) / "configs"; }

// `path` made absolute and normalized, as the plugin loader reports it.
inline std::string absolute(const std::string& path) {
  return std::filesystem::absolute(path).lexically_normal().string();
}

constexpr uint64_t KiB = 1024, GiB = uint64_t(1) << 30;

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
