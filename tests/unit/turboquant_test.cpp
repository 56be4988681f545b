// The turboquant family (plugins/turboquant): its Lloyd-Max codebooks against Max's 1960 table,
// the bit accounting, the outlier split and the norm correction.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "kvtune/error.h"

#include "test_support.h"
#include "turboquant/lloyd_max.h"

namespace kvtune {
namespace {

using builtin::turboquant::gaussian_codebook;
using builtin::turboquant::sphere_codebook;
using testing::make_scheme;

// Max 1960, Table I (N(0,1), minimum mean-squared error): the positive output levels and the
// distortion.
TEST(TurboQuant, GaussianCodebooksMatchMaxsTable) {
  const std::vector<std::vector<double>> levels = {
      {0.7979}, {0.4528, 1.510}, {0.2451, 0.7560, 1.344, 2.152},
      {0.1284, 0.3881, 0.6568, 0.9423, 1.256, 1.618, 2.069, 2.733}};
  const double distortion[] = {0.3634, 0.1175, 0.03454, 0.009497};
  for (int bits = 1; bits <= 4; ++bits) {
    const auto cb = gaussian_codebook(bits);
    const auto& want = levels[size_t(bits - 1)];
    ASSERT_EQ(cb.levels.size(), size_t(1) << bits);
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_NEAR(cb.levels[want.size() + k], want[k], 1e-3) << bits << " " << k;
      EXPECT_NEAR(cb.levels[want.size() - 1 - k], -want[k], 1e-3) << bits << " " << k;  // symmetric
    }
    EXPECT_NEAR(cb.distortion, distortion[bits - 1], 2e-4) << bits;
  }
}

// A coordinate of a unit vector in R^d is ~ N(0, 1/d) for large d: the exact codebook tends to
// Max's, scaled by 1/sqrt(d); at d = 3 the coordinate is uniform on [-1, 1] (Archimedes), whose
// 1-bit Lloyd-Max levels are +-1/2.
TEST(TurboQuant, SphereCodebooksTendToTheGaussianOnes) {
  const auto g = gaussian_codebook(3);
  const auto s = sphere_codebook(1024, 3);
  for (size_t k = 0; k < g.levels.size(); ++k) EXPECT_NEAR(s->levels[k] * 32.0, g.levels[k], 0.01) << k;
  const auto u = sphere_codebook(3, 1);
  EXPECT_NEAR(u->levels[1], 0.5, 1e-6);
  EXPECT_NEAR(u->distortion, 1.0 / 12.0, 1e-6);
  EXPECT_EQ(sphere_codebook(128, 2).get(), sphere_codebook(128, 2).get());  // built once
}

// Every byte is counted: codes, one f16 scale per token and set, 16-bit outlier indices per block.
TEST(TurboQuant, FootprintCountsScalesAndOutlierIndices) {
  EXPECT_EQ(make_scheme("turboquant:bits=3")->footprint(64, 128), size_t(64 * 128 * 3 / 8 + 64 * 2));
  EXPECT_DOUBLE_EQ(make_scheme("turboquant:bits=4")->bits_per_element(1, 128), 4.125);
  // 2.5-bit split of the paper: 32 channels at 3 bits, 96 at 2.
  const size_t split = make_scheme("turboquant:bits=2,outliers=32,outlier_bits=3")->footprint(64, 128);
  EXPECT_EQ(split, size_t(32 * 2 + 64 * 2 * 2 + 64 * 96 * 2 / 8 + 64 * 32 * 3 / 8));
  EXPECT_EQ(make_scheme("turboquant:bits=2,norm=f32")->footprint(1, 128), size_t(4 + 32));
  EXPECT_THROW(make_scheme("turboquant:outlier_bits=4"), InputError);
  EXPECT_FALSE(make_scheme("turboquant:outliers=16")->check_shape(4, 16).empty());
}

// The stored scale makes <xhat, x> = ||x||^2 (up to the f16 scale), and more bits lower the error
// at the distortion Lloyd-Max predicts (relative MSE ~ D_b / (1 - D_b) after the correction).
TEST(TurboQuant, ReconstructionKeepsTheProjectionAndTheErrorFallsWithBits) {
  const Matrix x = testing::normal_matrix(32, 128, 11);
  double previous = 1.0;
  for (int bits = 1; bits <= 4; ++bits) {
    const SchemePtr s = make_scheme("turboquant:bits=" + std::to_string(bits) + ",norm=f32");
    Matrix y(x.rows(), x.cols());
    s->roundtrip(x, {}, y);
    for (int64_t r = 0; r < x.rows(); ++r) {
      double xy = 0, xx = 0;
      for (int64_t c = 0; c < x.cols(); ++c) xy += double(x(r, c)) * y(r, c), xx += double(x(r, c)) * x(r, c);
      EXPECT_NEAR(xy / xx, 1.0, 1e-5) << bits;
    }
    const double err = testing::roundtrip_rel_err("turboquant:bits=" + std::to_string(bits), x);
    const double d = sphere_codebook(128, bits)->distortion * 128;
    EXPECT_NEAR(err * err, d / (1 - d), 0.25 * d / (1 - d)) << bits;
    EXPECT_LT(err, previous) << bits;
    previous = err;
  }
}

// Outlier channels coded apart at more bits lower the error on keys with a few huge channels.
TEST(TurboQuant, OutlierChannelsAtMoreBitsHelpOutlierKeys) {
  Matrix x = testing::normal_matrix(64, 128, 12);
  for (int64_t r = 0; r < x.rows(); ++r) {
    for (int64_t c : {5, 40, 77, 100}) x(r, c) *= 20.0f;
  }
  EXPECT_LT(testing::roundtrip_rel_err("turboquant:bits=2,outliers=4,outlier_bits=4", x),
            0.8 * testing::roundtrip_rel_err("turboquant:bits=2", x));
}

}  // namespace
}  // namespace kvtune
