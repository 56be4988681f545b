// Spearman's rank correlation, for the suites that compare a ranking with a reference one.
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace kvtune::testing {

// Average ranks, 1-based (ties share their mean rank).
inline std::vector<double> ranks(const std::vector<double>& x) {
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> r(x.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    for (size_t t = i; t <= j; ++t) r[order[t]] = 0.5 * double(i + j) + 1.0;
    i = j + 1;
  }
  return r;
}

// Pearson's correlation of the ranks.
inline double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / double(ra.size());
  const double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / double(rb.size());
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  return sab / std::sqrt(saa * sbb);
}

}  // namespace kvtune::testing
