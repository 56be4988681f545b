// row_key_dots against the one-pair loop it must reproduce bit for bit (s = 0, s += a[e] * b[e]):
// row counts 1 to 21, key counts on both sides of the eight-key blocks (the scalar tail), head dims
// 1 to 128, keys with huge and tiny values so that the order of the sums shows in the last bits.
#include "kvtune/numeric/row_dots.h"

#include <gtest/gtest.h>

#include <bit>
#include <random>
#include <vector>

namespace kvtune {
namespace {

TEST(RowKeyDots, EachIsTheOnePairLoopsSum) {
  std::mt19937_64 engine(9);
  std::normal_distribution<double> normal;
  std::uniform_int_distribution<int> exponent(-30, 30);
  for (const int64_t d : {int64_t(1), int64_t(3), int64_t(64), int64_t(128)}) {
    for (const int64_t n : {int64_t(1), int64_t(2), int64_t(21)}) {
      for (const int64_t t : {int64_t(0), int64_t(7), int64_t(8), int64_t(17), int64_t(1000)}) {
        std::vector<double> rows(static_cast<size_t>(n * d));
        std::vector<float> keys(static_cast<size_t>(t * d));
        for (double& v : rows) v = std::ldexp(normal(engine), exponent(engine));
        for (float& v : keys) v = static_cast<float>(std::ldexp(normal(engine), exponent(engine)));
        std::vector<double> out(static_cast<size_t>(n * t), -1.0);
        row_key_dots(rows.data(), n, keys.data(), t, d, out.data());
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t j = 0; j < t; ++j) {
            double s = 0.0;
            for (int64_t e = 0; e < d; ++e) s += rows[i * d + e] * double(keys[j * d + e]);
            ASSERT_EQ(std::bit_cast<uint64_t>(out[i * t + j]), std::bit_cast<uint64_t>(s))
                << "d " << d << ", row " << i << " of " << n << ", key " << j << " of " << t;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvtune
