#include "kvtune/numeric/row_dots.h"

#include <cstddef>
#include <vector>

#include "kvtune/numeric/multiversion.h"

namespace kvtune {

// A dot product's sum is a chain of dependent additions, so one pair at a time waits on the adder
// at every step; eight keys in eight lanes, four rows at a time, keep it busy. Each lane is still
// one key's chain in channel order (the build's -ffp-contract=off keeps the products and sums
// apart), so every target gives the same bits. The eight keys are transposed into a block once
// for all rows.
KVTUNE_MULTIVERSION
void row_key_dots(const double* rows, int64_t n, const float* keys, int64_t t, int64_t d, double* out) {
  constexpr int64_t kLanes = 8, kRows = 4;
  std::vector<double> block(static_cast<size_t>(d * kLanes));
  int64_t j0 = 0;
  for (; j0 + kLanes <= t; j0 += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) {
      for (int64_t e = 0; e < d; ++e) block[e * kLanes + l] = keys[(j0 + l) * d + e];
    }
    int64_t i = 0;
    for (; i + kRows <= n; i += kRows) {  // four rows' chains at once, so they overlap
      const double* r = rows + i * d;
      double acc[kRows][kLanes] = {};
      for (int64_t e = 0; e < d; ++e) {
        for (int64_t k = 0; k < kRows; ++k) {
          for (int64_t l = 0; l < kLanes; ++l) acc[k][l] += r[k * d + e] * block[e * kLanes + l];
        }
      }
      for (int64_t k = 0; k < kRows; ++k) {
        for (int64_t l = 0; l < kLanes; ++l) out[(i + k) * t + j0 + l] = acc[k][l];
      }
    }
    for (; i < n; ++i) {
      const double* r = rows + i * d;
      double acc[kLanes] = {};
      for (int64_t e = 0; e < d; ++e) {
        for (int64_t l = 0; l < kLanes; ++l) acc[l] += r[e] * block[e * kLanes + l];
      }
      for (int64_t l = 0; l < kLanes; ++l) out[i * t + j0 + l] = acc[l];
    }
  }
  for (; j0 < t; ++j0) {
    for (int64_t i = 0; i < n; ++i) {
      double s = 0.0;
      for (int64_t e = 0; e < d; ++e) s += rows[i * d + e] * double(keys[j0 * d + e]);
      out[i * t + j0] = s;
    }
  }
}

}  // namespace kvtune
