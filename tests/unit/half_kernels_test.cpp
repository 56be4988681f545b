// The bulk f16/bf16 conversions (F16C or vectorized integer code) against the scalar reference in
// kvtune/numeric/half.h, which is itself checked against CUDA's and ggml's conversions.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kvtune/numeric/half_kernels.h"
#include "kvtune/numeric/bits.h"
#include "kvtune/numeric/half.h"

namespace kvtune::half_kernels {
namespace {

// Random bit patterns (NaNs, infinities, subnormals included), every f16 value and its midpoints.
std::vector<float> inputs() {
  std::vector<float> x;
  std::mt19937 engine(11);
  for (int i = 0; i < 4000000; ++i) x.push_back(bits_float(static_cast<uint32_t>(engine())));
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_bits_to_f32(static_cast<uint16_t>(h));
    x.push_back(f);
    x.push_back(bits_float(float_bits(f) + 0x1000u));  // the midpoint to the next f16 (normals)
  }
  x.push_back(65519.99f);
  x.push_back(65520.0f);
  x.resize(x.size() / 8 * 8 + 3);  // a ragged tail runs the scalar remainder too
  return x;
}

TEST(HalfKernels, BulkConversionsEqualTheScalarReference) {
  const std::vector<float> x = inputs();
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint16_t> h(x.size()), b(x.size());
  std::vector<float> y(x.size()), z(x.size());
  f32_to_f16(x.data(), h.data(), n);
  f32_to_bf16(x.data(), b.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(h[i], f32_to_f16_bits(x[i])) << std::hex << float_bits(x[i]);
    ASSERT_EQ(b[i], f32_to_bf16_bits(x[i])) << std::hex << float_bits(x[i]);
  }
  f16_to_f32(h.data(), y.data(), n);
  round_to_f16(x.data(), z.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(float_bits(y[i]), float_bits(f16_bits_to_f32(h[i]))) << i;
    ASSERT_EQ(float_bits(z[i]), float_bits(y[i])) << i;
  }
  bf16_to_f32(b.data(), y.data(), n);
  round_to_bf16(x.data(), z.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(float_bits(y[i]), float_bits(bf16_bits_to_f32(b[i]))) << i;
    ASSERT_EQ(float_bits(z[i]), float_bits(y[i])) << i;
  }
}

}  // namespace
}  // namespace kvtune::half_kernels
