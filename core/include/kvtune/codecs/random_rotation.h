// Seeded Haar-distributed random orthogonal matrices (host only), shared by the cache policy
// `rotation=random` (core/src/policy.cpp) and the research families under plugins/ (turboquant,
// qjl), which see only public headers.
//
// Construction (Mezzadri 2007, "How to generate random matrices from the classical compact
// groups", Notices AMS 54(5)): G is d x d with i.i.d. N(0, 1) entries, G = QR. Q is Haar-distributed
// when R's diagonal is positive; LAPACK's Householder QR does not promise that, hence Mezzadri's
// column sign fix. Gram-Schmidt yields R_jj = ||residual|| > 0 by construction, so its Q is Haar
// without the fix. We orthogonalize twice ("twice is enough", Giraud et al. 2005), which keeps
// Q^T Q = I to ~1e-15 in double.
//
// Normals come from std::mt19937_64 (its output is fixed by the standard) through our own
// Box-Muller, because std::normal_distribution differs between standard libraries: the same seed
// gives the same matrix everywhere.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <numbers>
#include <random>
#include <utility>
#include <vector>

namespace kvtune {

// Standard normals from a mt19937_64 stream (Box-Muller, both outputs used).
class SeededNormals {
 public:
  explicit SeededNormals(uint64_t seed) : engine_(seed) {}

  double next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    // u1 in (0, 1] so the log is finite; 53 random bits each.
    const double u1 = (static_cast<double>(engine_() >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(engine_() >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double a = 2.0 * std::numbers::pi * u2;
    spare_ = r * std::sin(a);
    has_spare_ = true;
    return r * std::cos(a);
  }

 private:
  std::mt19937_64 engine_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

// A d x d Haar-random orthogonal matrix Q, row-major (Q[i * d + j]), from `seed`.
inline std::vector<double> make_haar_rotation(int64_t d, uint64_t seed) {
  const size_t n = static_cast<size_t>(d);
  SeededNormals normals(seed);
  std::vector<double> g(n * n);  // G row-major; G's columns are orthonormalized in place
  for (double& x : g) x = normals.next();
  std::vector<double> col(n);
  for (size_t j = 0; j < n; ++j) {
    for (size_t i = 0; i < n; ++i) col[i] = g[i * n + j];
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t k = 0; k < j; ++k) {
        double dot = 0.0;
        for (size_t i = 0; i < n; ++i) dot += g[i * n + k] * col[i];
        for (size_t i = 0; i < n; ++i) col[i] -= dot * g[i * n + k];
      }
    }
    double norm = 0.0;
    for (double x : col) norm += x * x;
    norm = std::sqrt(norm);  // > 0 with probability 1: G has full rank
    for (size_t i = 0; i < n; ++i) g[i * n + j] = col[i] / norm;
  }
  return g;
}

// The matrix for (d, seed), built once per process and shared (thread-safe). A runtime uses one
// rotation for the whole model, so callers pass a configured seed, never a per-case one.
inline std::shared_ptr<const std::vector<double>> haar_rotation(int64_t d, uint64_t seed) {
  static std::mutex mutex;
  static std::map<std::pair<int64_t, uint64_t>, std::shared_ptr<const std::vector<double>>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto& slot = cache[{d, seed}];
  if (!slot) slot = std::make_shared<const std::vector<double>>(make_haar_rotation(d, seed));
  return slot;
}

// y = Q x (rotate) or y = Q^T x (rotate back) for one d-vector; accumulates in double. x and y
// must not overlap.
inline void rotate_vector(const std::vector<double>& q, int64_t d, const float* x, float* y, bool transpose) {
  const size_t n = static_cast<size_t>(d);
  if (!transpose) {
    for (size_t i = 0; i < n; ++i) {
      double s = 0.0;
      for (size_t j = 0; j < n; ++j) s += q[i * n + j] * double(x[j]);
      y[i] = static_cast<float>(s);
    }
    return;
  }
  std::vector<double> acc(n, 0.0);
  for (size_t j = 0; j < n; ++j) {
    const double xj = x[j];
    for (size_t i = 0; i < n; ++i) acc[i] += q[j * n + i] * xj;
  }
  for (size_t i = 0; i < n; ++i) y[i] = static_cast<float>(acc[i]);
}

}  // namespace kvtune
