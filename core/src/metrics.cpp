#include "kvtune/metrics.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kvtune {

double quantile(std::span<const double> samples, double q) {
  if (samples.empty()) return 0.0;
  std::vector<double> s(samples.begin(), samples.end());
  std::sort(s.begin(), s.end());
  const double pos = q * double(s.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, s.size() - 1);
  return s[lo] + (pos - double(lo)) * (s[hi] - s[lo]);
}

Summary summarize(std::span<const double> samples) {
  Summary out;
  out.count = samples.size();
  if (samples.empty()) return out;
  double sum = 0.0;
  out.max = samples[0];
  for (double v : samples) {
    sum += v;
    out.max = std::max(out.max, v);
  }
  out.mean = sum / double(samples.size());
  out.p95 = quantile(samples, 0.95);
  return out;
}

}  // namespace kvtune
