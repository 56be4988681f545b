#include "qjl_sketch.h"

#include <cmath>
#include <numbers>

#include "kvtune/codecs/random_rotation.h"

namespace kvtune::builtin::qjl {

std::vector<double> projection(int64_t m, int64_t d, uint64_t seed, bool orthogonal) {
  if (orthogonal) {
    const auto q = haar_rotation(d, seed);
    std::vector<double> s(q->begin(), q->begin() + m * d);
    for (double& x : s) x *= std::sqrt(double(d));
    return s;
  }
  SeededNormals normals(seed);
  std::vector<double> s(size_t(m * d));
  for (double& x : s) x = normals.next();
  return s;
}

double estimator_constant(int64_t m, int64_t d, bool orthogonal) {
  if (!orthogonal) return std::sqrt(std::numbers::pi / 2) / double(m);
  const double mean_abs = std::exp(std::lgamma(0.5 * double(d)) - std::lgamma(0.5 * double(d + 1))) / std::sqrt(std::numbers::pi);
  return 1.0 / (double(m) * std::sqrt(double(d)) * mean_abs);
}

}  // namespace kvtune::builtin::qjl
