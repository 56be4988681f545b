// Lloyd-Max scalar quantizers (Lloyd 1957/1982, "Least squares quantization in PCM"; Max 1960,
// "Quantizing for minimum distortion", IRE Trans. Inf. Theory 6(1)) for the distributions a
// TurboQuant-style scheme meets: one coordinate of a Haar-rotated unit vector.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace kvtune::builtin::turboquant {

// 2^bits reconstruction levels, ascending, and the 2^bits - 1 decision boundaries between them
// (midpoints of neighbouring levels). A value's code is the number of boundaries below it.
struct Codebook {
  std::vector<double> levels;
  std::vector<double> boundaries;

  uint32_t code(double x) const;
  double distortion = 0.0;  // E[(x - level(x))^2] under the distribution it was fitted to
};

// The Lloyd-Max quantizer of N(0, 1) at `bits` (1..8): Max's table, e.g. 1 bit: +-0.7979,
// 2 bits: +-0.4528, +-1.510.
Codebook gaussian_codebook(int bits);

// The Lloyd-Max quantizer of one coordinate t of a uniformly random unit vector in R^d: density
// proportional to (1 - t^2)^((d - 3) / 2) on [-1, 1] (a Beta((d-1)/2, (d-1)/2) stretched to
// [-1, 1]; TurboQuant, Zandieh et al. 2025, Lemma 1). For d < 3 the density is not bounded, and we
// use the Gaussian N(0, 1/d) it tends to instead. Built once per (d, bits), shared, thread-safe.
std::shared_ptr<const Codebook> sphere_codebook(int64_t d, int bits);

}  // namespace kvtune::builtin::turboquant
