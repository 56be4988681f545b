#include "kvquant_math.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace kvtune::builtin::kvquant {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Weighted sorted distinct values with prefix sums of weight, value and value squared, so the cost
// of a run is O(1). Sums are in double: a run of identical values has a mean equal to the value.
struct Runs {
  std::vector<double> value, p0, p1, p2;

  explicit Runs(std::span<const float> values) {
    std::vector<float> sorted(values.begin(), values.end());
    std::sort(sorted.begin(), sorted.end());
    p0 = p1 = p2 = {0.0};
    for (size_t i = 0; i < sorted.size(); ++i) {
      const double v = sorted[i];
      if (value.empty() || v != value.back()) {
        value.push_back(v);
        p0.push_back(p0.back()), p1.push_back(p1.back()), p2.push_back(p2.back());
      }
      p0.back() += 1.0, p1.back() += v, p2.back() += v * v;
    }
  }

  int64_t size() const { return static_cast<int64_t>(value.size()); }
  double mean(int64_t a, int64_t b) const { return (p1[b] - p1[a]) / (p0[b] - p0[a]); }
  // Squared error of runs [a, b) around their mean (a < b).
  double free_cost(int64_t a, int64_t b) const {
    const double s0 = p0[b] - p0[a], s1 = p1[b] - p1[a], s2 = p2[b] - p2[a];
    return std::max(0.0, s2 - s1 * s1 / s0);
  }
  // Squared error of runs [a, b) around a fixed centre c (0 for an empty range).
  double fixed_cost(int64_t a, int64_t b, double c) const {
    const double s0 = p0[b] - p0[a], s1 = p1[b] - p1[a], s2 = p2[b] - p2[a];
    return std::max(0.0, s2 - 2.0 * c * s1 + c * c * s0);
  }
};

// cur[i] = min over t < i of prev[t] + free_cost(t, i), for i in [ilo, ihi], with the best t in
// arg[i]. The optimal t is monotone in i (Grønlund et al. 2017), so divide and conquer suffices.
void fill_layer(const Runs& runs, const std::vector<double>& prev, std::vector<double>& cur, std::vector<int32_t>& arg,
                int64_t ilo, int64_t ihi, int64_t tlo, int64_t thi) {
  if (ilo > ihi) return;
  const int64_t mid = (ilo + ihi) / 2;
  double best = kInf;
  int64_t best_t = tlo;
  for (int64_t t = tlo; t <= std::min(mid - 1, thi); ++t) {
    if (prev[static_cast<size_t>(t)] == kInf) continue;
    const double v = prev[static_cast<size_t>(t)] + runs.free_cost(t, mid);
    if (v < best) best = v, best_t = t;
  }
  cur[static_cast<size_t>(mid)] = best;
  arg[static_cast<size_t>(mid)] = static_cast<int32_t>(best_t);
  fill_layer(runs, prev, cur, arg, ilo, mid - 1, tlo, best_t);
  fill_layer(runs, prev, cur, arg, mid + 1, ihi, best_t, thi);
}

}  // namespace

std::vector<double> kmeans_1d(std::span<const float> values, int k, bool pin_unit_ends) {
  const Runs runs(values);
  const int64_t m = runs.size();
  const int free = pin_unit_ends ? k - 2 : k;
  std::vector<double> free_centroids;
  if (m <= free) {
    free_centroids = runs.value;
    free_centroids.resize(static_cast<size_t>(free), free_centroids.empty() ? 0.0 : free_centroids.back());
  } else if (free > 0) {
    // base[t]: cost of the first t runs before any free centroid: none allowed without pinning,
    // all assigned to the pinned 0 with it (an empty prefix costs nothing).
    std::vector<double> prev(static_cast<size_t>(m + 1), kInf), cur(prev.size(), kInf);
    for (int64_t t = 0; t <= m; ++t) {
      if (pin_unit_ends) prev[static_cast<size_t>(t)] = runs.fixed_cost(0, t, 0.0);
    }
    if (!pin_unit_ends) prev[0] = 0.0;
    std::vector<std::vector<int32_t>> arg(static_cast<size_t>(free + 1), std::vector<int32_t>(prev.size(), 0));
    for (int j = 1; j <= free; ++j) {
      std::fill(cur.begin(), cur.end(), kInf);
      fill_layer(runs, prev, cur, arg[static_cast<size_t>(j)], j, m, 0, m - 1);
      std::swap(prev, cur);
    }
    // Where the free runs end: at m, or (pinned) before a suffix assigned to the pinned 1.
    int64_t end = m;
    if (pin_unit_ends) {
      double best = kInf;
      for (int64_t i = free; i <= m; ++i) {
        const double v = prev[static_cast<size_t>(i)] + runs.fixed_cost(i, m, 1.0);
        if (v < best) best = v, end = i;
      }
    }
    free_centroids.assign(static_cast<size_t>(free), 0.0);
    for (int j = free; j >= 1; --j) {
      const int64_t start = arg[static_cast<size_t>(j)][static_cast<size_t>(end)];
      free_centroids[static_cast<size_t>(j - 1)] = runs.mean(start, end);
      end = start;
    }
  }
  std::vector<double> out;
  if (pin_unit_ends) out.push_back(0.0);
  out.insert(out.end(), free_centroids.begin(), free_centroids.end());
  if (pin_unit_ends) out.push_back(1.0);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int64_t> largest_magnitudes(const float* x, int64_t len, int64_t stride, int64_t n) {
  n = std::clamp<int64_t>(n, 0, len);
  std::vector<int64_t> idx(static_cast<size_t>(len));
  for (int64_t i = 0; i < len; ++i) idx[static_cast<size_t>(i)] = i;
  auto larger = [&](int64_t a, int64_t b) {
    const float ma = std::abs(x[a * stride]), mb = std::abs(x[b * stride]);
    return ma != mb ? ma > mb : a < b;
  };
  std::partial_sort(idx.begin(), idx.begin() + n, idx.end(), larger);
  idx.resize(static_cast<size_t>(n));
  std::sort(idx.begin(), idx.end());
  return idx;
}

}  // namespace kvtune::builtin::kvquant
