// Lloyd's iteration on a density tabulated on a fine grid: boundaries at midpoints of the levels,
// levels at the conditional means of their cells, until nothing moves. Deterministic: a fixed grid,
// a fixed start (the conditional means of equal-probability cells) and a fixed stopping rule.
#include "lloyd_max.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <numbers>

namespace kvtune::builtin::turboquant {
namespace {

// A density on [-span, span] as prefix sums of the midpoint rule: mass(x) = P(X < x) and
// moment(x) = E[X; X < x], linear between grid points (exact for a piecewise-constant density).
class Tabulated {
 public:
  Tabulated(const std::function<double(double)>& density, double span, int cells = 1 << 17)
      : span_(span), step_(2 * span / cells), mass_(size_t(cells) + 1), moment_(size_t(cells) + 1),
        second_(size_t(cells) + 1) {
    for (int i = 0; i < cells; ++i) {
      const double t = -span + (i + 0.5) * step_, w = density(t) * step_;
      mass_[size_t(i) + 1] = mass_[size_t(i)] + w;
      moment_[size_t(i) + 1] = moment_[size_t(i)] + t * w;
      second_[size_t(i) + 1] = second_[size_t(i)] + t * t * w;
    }
    const double total = mass_.back();
    for (size_t i = 0; i < mass_.size(); ++i) mass_[i] /= total, moment_[i] /= total, second_[i] /= total;
  }

  double mass(double x) const { return at(mass_, x); }
  double moment(double x) const { return at(moment_, x); }
  double second(double x) const { return at(second_, x); }
  double span() const { return span_; }

  // The x with mass(x) = p (bisection on the monotone prefix sums).
  double quantile(double p) const {
    double lo = -span_, hi = span_;
    for (int i = 0; i < 200; ++i) {
      const double mid = 0.5 * (lo + hi);
      (mass(mid) < p ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
  }

 private:
  double at(const std::vector<double>& prefix, double x) const {
    const double u = std::clamp((x + span_) / step_, 0.0, double(prefix.size() - 1));
    const size_t i = std::min(size_t(u), prefix.size() - 2);
    const double f = u - double(i);
    return prefix[i] + f * (prefix[i + 1] - prefix[i]);
  }

  double span_, step_;
  std::vector<double> mass_, moment_, second_;
};

double cell_mean(const Tabulated& p, double a, double b, double fallback) {
  const double m = p.mass(b) - p.mass(a);
  return m > 1e-300 ? (p.moment(b) - p.moment(a)) / m : fallback;
}

Codebook lloyd_max(const Tabulated& p, int bits) {
  const int n = 1 << bits;
  Codebook cb;
  cb.levels.resize(size_t(n));
  for (int k = 0; k < n; ++k) {
    const double a = k == 0 ? -p.span() : p.quantile(double(k) / n);
    const double b = k == n - 1 ? p.span() : p.quantile(double(k + 1) / n);
    cb.levels[size_t(k)] = cell_mean(p, a, b, 0.5 * (a + b));
  }
  cb.boundaries.resize(size_t(n - 1));
  for (int iter = 0; iter < 20000; ++iter) {
    for (int k = 0; k + 1 < n; ++k) cb.boundaries[size_t(k)] = 0.5 * (cb.levels[size_t(k)] + cb.levels[size_t(k) + 1]);
    double moved = 0.0;
    for (int k = 0; k < n; ++k) {
      const double a = k == 0 ? -p.span() : cb.boundaries[size_t(k) - 1];
      const double b = k == n - 1 ? p.span() : cb.boundaries[size_t(k)];
      const double level = cell_mean(p, a, b, cb.levels[size_t(k)]);
      moved = std::max(moved, std::abs(level - cb.levels[size_t(k)]));
      cb.levels[size_t(k)] = level;
    }
    if (moved < 1e-13 * p.span()) break;
  }
  for (int k = 0; k + 1 < n; ++k) cb.boundaries[size_t(k)] = 0.5 * (cb.levels[size_t(k)] + cb.levels[size_t(k) + 1]);
  // E[(X - c_k)^2] summed over cells = E[X^2; cell] - 2 c_k E[X; cell] + c_k^2 P(cell).
  for (int k = 0; k < n; ++k) {
    const double a = k == 0 ? -p.span() : cb.boundaries[size_t(k) - 1];
    const double b = k == n - 1 ? p.span() : cb.boundaries[size_t(k)];
    const double c = cb.levels[size_t(k)];
    cb.distortion += (p.second(b) - p.second(a)) - 2 * c * (p.moment(b) - p.moment(a)) + c * c * (p.mass(b) - p.mass(a));
  }
  return cb;
}

}  // namespace

uint32_t Codebook::code(double x) const {
  return static_cast<uint32_t>(std::upper_bound(boundaries.begin(), boundaries.end(), x) - boundaries.begin());
}

Codebook gaussian_codebook(int bits) {
  const Tabulated p([](double t) { return std::exp(-0.5 * t * t); }, 12.0);
  return lloyd_max(p, bits);
}

std::shared_ptr<const Codebook> sphere_codebook(int64_t d, int bits) {
  static std::mutex mutex;
  static std::map<std::pair<int64_t, int>, std::shared_ptr<const Codebook>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto& slot = cache[{d, bits}];
  if (slot) return slot;
  const double sigma = 1.0 / std::sqrt(double(d));
  if (d < 3) {
    Codebook cb = gaussian_codebook(bits);
    for (double& x : cb.levels) x *= sigma;
    for (double& x : cb.boundaries) x *= sigma;
    cb.distortion *= sigma * sigma;
    slot = std::make_shared<const Codebook>(std::move(cb));
    return slot;
  }
  // Beyond 12 sigma the density is below e^-72 of its peak (it is ~ exp(-d t^2 / 2)).
  const double half_power = 0.5 * double(d - 3);
  const Tabulated p([&](double t) { return std::pow(std::max(0.0, 1.0 - t * t), half_power); },
                    std::min(1.0, 12.0 * sigma));
  slot = std::make_shared<const Codebook>(lloyd_max(p, bits));
  return slot;
}

}  // namespace kvtune::builtin::turboquant
