#include "kvtune/rope.h"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "kvtune/error.h"

namespace kvtune {

void apply_rope(MatrixView x, std::span<const int64_t> positions, const RopeConfig& rope, bool inverse) {
  if (!rope.enabled) return;
  const int64_t d = x.cols;
  if (d % 2 != 0) throw InputError("RoPE needs an even head_dim, got " + std::to_string(d));
  if (static_cast<int64_t>(positions.size()) < x.rows) {
    throw std::invalid_argument("apply_rope: " + std::to_string(x.rows) + " rows but " +
                                std::to_string(positions.size()) + " positions");
  }
  const int64_t half = d / 2;
  std::vector<double> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) inv_freq[i] = std::pow(rope.theta, -2.0 * double(i) / double(d));
  const double sign = inverse ? -1.0 : 1.0;
  for (int64_t r = 0; r < x.rows; ++r) {
    float* row = x.row(r);
    for (int64_t i = 0; i < half; ++i) {
      const double angle = sign * double(positions[r]) * inv_freq[i];
      const double c = std::cos(angle), s = std::sin(angle);
      const int64_t a = rope.convention == RopeConvention::rotate_half ? i : 2 * i;
      const int64_t b = rope.convention == RopeConvention::rotate_half ? i + half : 2 * i + 1;
      const double xa = row[a], xb = row[b];
      row[a] = static_cast<float>(xa * c - xb * s);
      row[b] = static_cast<float>(xb * c + xa * s);
    }
  }
}

}  // namespace kvtune
