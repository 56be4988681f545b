// The int kernels' fast path (reciprocal multiply, division only near ties) against the
// formula's reference (division per element): identical bits on random data, on exact ties and
// their float neighbours, and on divisors whose reciprocal overflows.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "int/int_kernels.h"
#include "kvtune/codecs/int_codec.h"
#include "kvtune/matrix.h"
#include "kvtune/numeric/bits.h"

namespace kvtune::builtin::int_kernels {
namespace {

void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(float_bits(a[i]), float_bits(b[i])) << what << " element " << i;
}

// Inputs at exact ties k + 1/2 of a divisor, their float neighbours, and random values.
std::vector<float> hard_inputs(float divisor, float minimum, int top, std::mt19937& engine) {
  std::vector<float> x;
  for (int k = -top - 2; k <= top + 2; ++k) {
    const float tie = (float(k) + 0.5f) * divisor + minimum;
    x.push_back(tie);
    x.push_back(std::nextafter(tie, -INFINITY));
    x.push_back(std::nextafter(tie, INFINITY));
  }
  std::uniform_real_distribution<float> any(-1.2f * float(top) * divisor, 1.2f * float(top) * divisor);
  for (int i = 0; i < 4000; ++i) x.push_back(any(engine) + minimum);
  x.resize(x.size() / 8 * 8 + 5);  // a ragged tail runs the scalar remainder too
  return x;
}

TEST(IntKernels, FastSegmentsEqualTheReferenceBitForBit) {
  std::mt19937 engine(5);
  std::uniform_real_distribution<float> log_scale(-12.0f, 12.0f);
  for (int trial = 0; trial < 300; ++trial) {
    const float divisor = std::exp2(log_scale(engine)) * (1.0f + float(trial) / 977.0f);
    for (int bits : {2, 4, 8}) {
      const float qmax = float((1 << (bits - 1)) - 1), top = float((1 << bits) - 1);
      const float minimum = trial % 2 ? -3.0f * divisor : 17.0f;
      std::vector<float> x = hard_inputs(divisor, 0.0f, 1 << bits, engine);
      std::vector<float> fast(x.size()), ref(x.size());
      const float r = fast_reciprocal(divisor);
      sym_segment(x.data(), divisor, r, divisor, qmax, fast.data(), int64_t(x.size()));
      sym_segment_exact(x.data(), divisor, divisor, qmax, ref.data(), int64_t(x.size()));
      expect_same_bits(fast, ref, "sym");
      x = hard_inputs(divisor, minimum, 1 << bits, engine);
      asym_segment(x.data(), minimum, divisor, r, divisor, minimum, top, fast.data(), int64_t(x.size()));
      asym_segment_exact(x.data(), minimum, divisor, divisor, minimum, top, ref.data(), int64_t(x.size()));
      expect_same_bits(fast, ref, "asym");
    }
  }
}

TEST(IntKernels, FastColumnsEqualTheReferenceBitForBit) {
  std::mt19937 engine(6);
  std::uniform_real_distribution<float> log_scale(-10.0f, 10.0f);
  const int64_t n = 131;
  std::vector<float> divisor(n), reciprocal(n), minimum(n), scale(n), x(n), fast(n), ref(n);
  for (int trial = 0; trial < 2000; ++trial) {
    for (int64_t c = 0; c < n; ++c) {
      divisor[c] = std::exp2(log_scale(engine));
      reciprocal[c] = fast_reciprocal(divisor[c]);
      minimum[c] = -float(c % 7) * divisor[c];
      scale[c] = divisor[c];
      // Every third value sits on a tie of its own column's grid.
      const float k = float(int(engine() % 256) - 128);
      x[c] = c % 3 == 0 ? (k + 0.5f) * divisor[c] : std::ldexp(float(engine() % 100000) - 50000.0f, -10) * divisor[c];
    }
    sym_columns(x.data(), divisor.data(), reciprocal.data(), scale.data(), 127.0f, fast.data(), n);
    for (int64_t c = 0; c < n; ++c) sym_segment_exact(&x[c], divisor[c], scale[c], 127.0f, &ref[c], 1);
    expect_same_bits(fast, ref, "sym columns");
    asym_columns(x.data(), minimum.data(), divisor.data(), reciprocal.data(), scale.data(), minimum.data(), 255.0f,
                 fast.data(), n);
    for (int64_t c = 0; c < n; ++c) asym_segment_exact(&x[c], minimum[c], divisor[c], scale[c], minimum[c], 255.0f, &ref[c], 1);
    expect_same_bits(fast, ref, "asym columns");
  }
}

// The column tiles (sixteen columns down the rows, normal or streaming stores) against the exact
// per-element formula: a 64-byte-aligned tile of 37 rows, 128 columns (all vectors) and 131 (a
// ragged remainder), every third value on a tie of its column's grid.
TEST(IntKernels, ColumnTilesEqualTheReferenceBitForBit) {
  std::mt19937 engine(8);
  std::uniform_real_distribution<float> log_scale(-10.0f, 10.0f);
  const int64_t rows = 37;
  for (int64_t n : {int64_t(128), int64_t(131)}) {
    for (bool stream : {false, true}) {
      if (stream && n % 16 != 0) continue;  // streaming needs 64-byte-aligned rows
      std::vector<float> divisor(n), reciprocal(n), minimum(n), scale(n), ref(size_t(rows * n));
      Matrix x(rows, n), fast(rows, n);
      for (int64_t c = 0; c < n; ++c) {
        divisor[c] = std::exp2(log_scale(engine));
        reciprocal[c] = fast_reciprocal(divisor[c]);
        minimum[c] = -float(c % 7) * divisor[c];
        scale[c] = divisor[c];
        for (int64_t r = 0; r < rows; ++r) {
          const float k = float(int(engine() % 256) - 128);
          x(r, c) = (r + c) % 3 == 0 ? (k + 0.5f) * divisor[c]
                                     : std::ldexp(float(engine() % 100000) - 50000.0f, -10) * divisor[c];
        }
      }
      sym_column_tile(x.data(), rows, n, divisor.data(), reciprocal.data(), scale.data(), 127.0f, fast.data(), stream,
                      stream ? x.row(1) : nullptr);
      for (int64_t i = 0; i < rows * n; ++i) {
        sym_segment_exact(x.data() + i, divisor[i % n], scale[i % n], 127.0f, &ref[size_t(i)], 1);
      }
      expect_same_bits(std::vector<float>(fast.data(), fast.data() + rows * n), ref, "sym tile");
      asym_column_tile(x.data(), rows, n, minimum.data(), divisor.data(), reciprocal.data(), scale.data(),
                       minimum.data(), 15.0f, fast.data(), stream, nullptr);
      for (int64_t i = 0; i < rows * n; ++i) {
        asym_segment_exact(x.data() + i, minimum[i % n], divisor[i % n], scale[i % n], minimum[i % n], 15.0f,
                           &ref[size_t(i)], 1);
      }
      expect_same_bits(std::vector<float>(fast.data(), fast.data() + rows * n), ref, "asym tile");
    }
  }
}

TEST(IntKernels, SubnormalDivisorsStayExact) {
  const float divisor = std::ldexp(1.0f, -140);  // 1 / divisor overflows float32
  std::vector<float> x = {0.0f, divisor, -3.5f * divisor, 1e-30f, -1.0f, 0.5f * divisor, 7.0f, 8.0f, 2.5f * divisor};
  std::vector<float> fast(x.size()), ref(x.size());
  EXPECT_EQ(fast_reciprocal(divisor), 0.0f);  // the kernels divide
  sym_segment(x.data(), divisor, fast_reciprocal(divisor), divisor, 7.0f, fast.data(), int64_t(x.size()));
  sym_segment_exact(x.data(), divisor, divisor, 7.0f, ref.data(), int64_t(x.size()));
  expect_same_bits(fast, ref, "subnormal");
}

TEST(IntKernels, MinMaxAndColumnMinMax) {
  std::vector<float> x(7 * 9);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float((i * 37) % 101) - 50.0f;
  float lo, hi;
  min_max(x.data(), int64_t(x.size()), lo, hi);
  EXPECT_EQ(lo, *std::min_element(x.begin(), x.end()));
  EXPECT_EQ(hi, *std::max_element(x.begin(), x.end()));
  std::vector<float> clo(9), chi(9);
  column_min_max(x.data(), 7, 9, clo.data(), chi.data());
  for (int c = 0; c < 9; ++c) {
    float l = x[c], h = x[c];
    for (int r = 1; r < 7; ++r) l = std::min(l, x[r * 9 + c]), h = std::max(h, x[r * 9 + c]);
    EXPECT_EQ(clo[c], l);
    EXPECT_EQ(chi[c], h);
  }
}

// Widths that take the eight-vector, one-vector and scalar column paths, with NaN and both zeros,
// whose results depend on the order of the comparisons: the row order and a < l ? a : l.
TEST(IntKernels, ColumnMinMaxKeepsTheRowOrderBitForBit) {
  std::mt19937 engine(7);
  std::uniform_real_distribution<float> any(-4.0f, 4.0f);
  for (const int64_t n : {int64_t(128), int64_t(147), int64_t(272), int64_t(5)}) {
    for (const int64_t rows : {int64_t(1), int64_t(2), int64_t(33)}) {
      std::vector<float> x(static_cast<size_t>(rows * n));
      for (float& v : x) v = any(engine);
      for (size_t i = 0; i < x.size(); i += 7) x[i] = (i / 7) % 2 ? 0.0f : -0.0f;
      for (size_t i = 3; i < x.size(); i += 23) x[i] = NAN;
      std::vector<float> lo(static_cast<size_t>(n)), hi(static_cast<size_t>(n));
      column_min_max(x.data(), rows, n, lo.data(), hi.data());
      for (int64_t c = 0; c < n; ++c) {
        float l = x[size_t(c)], h = l;
        for (int64_t r = 1; r < rows; ++r) {
          const float a = x[size_t(r * n + c)];
          l = a < l ? a : l;
          h = a > h ? a : h;
        }
        ASSERT_EQ(float_bits(lo[size_t(c)]), float_bits(l)) << "n " << n << " rows " << rows << " column " << c;
        ASSERT_EQ(float_bits(hi[size_t(c)]), float_bits(h)) << "n " << n << " rows " << rows << " column " << c;
      }
    }
  }
}

// The eight-group path skips reach_top_code's division for f16 scales at or above f16's smallest
// normal value, on the claim that it never steps there (a factor 1 +- 2^-11 leaves span / s within
// 0.25 of the top code). Checked on spans whose span / top lies on f16 rounding midpoints and their
// float neighbours (the largest relative rounding) across the whole normal range, and on random
// spans, for every code width's top and qmax.
TEST(IntKernels, NormalF16ScalesNeverStepForTheTopCode) {
  std::mt19937 engine(5);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  int checked = 0;
  for (int bits = 2; bits <= 8; ++bits) {
    for (const float top : {codec::int_sym_qmax(bits), codec::int_asym_top(bits)}) {
      std::vector<float> spans;
      for (int e = -14; e <= 15; ++e) {
        for (int m = 0; m < 1024; m += 7) {  // f16 significands 1 + m / 1024 and the next one's midpoint
          const float mid = std::ldexp(1.0f + (float(m) + 0.5f) / 1024.0f, e) * top;
          spans.insert(spans.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)});
        }
        for (int i = 0; i < 64; ++i) spans.push_back(std::ldexp(mantissa(engine), e) * top);
      }
      for (const float span : spans) {
        const float s = codec::stored_scale(span / top, ScaleType::f16);
        if (!(s >= 0x1p-14f) || s > 65504.0f) continue;
        ASSERT_EQ(codec::reach_top_code(s, span, top, ScaleType::f16), s) << "span " << span << " top " << top;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 100000);
}

// The per-token groups with streaming stores against the same groups stored normally: only the
// stores differ, so the bits must not. Rows of ordinary values, a row of zeros and a row holding a
// NaN (both send their batch down the eight-group path), a huge value, every group length that
// runs sixteen lanes wide, symmetric and asymmetric, three scale types.
TEST(IntKernels, StreamedTokenGroupsAreTheStoredBits) {
  std::mt19937 engine(12);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t rows = 67, d = 128;
  Matrix x(rows, d), stored(rows, d), streamed(rows, d);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < d; ++c) x(r, c) = r == 9 ? 0.0f : normal(engine) * std::ldexp(1.0f, int(r % 9) - 4);
  }
  x(20, 33) = NAN;
  x(41, 100) = 3.0e38f;
  for (const int64_t group : {int64_t(16), int64_t(32), int64_t(64), int64_t(128)}) {
    for (const bool asym : {false, true}) {
      for (const ScaleType t : {ScaleType::f32, ScaleType::f16, ScaleType::bf16}) {
        for (const int bits : {2, 4, 8}) {
          // Without AVX2 and F16C there is no fast path, and nothing streams.
          if (!token_groups(x.data(), rows, d, group, bits, asym, t, stored.data(), false)) continue;
          ASSERT_TRUE(token_groups(x.data(), rows, d, group, bits, asym, t, streamed.data(), true));
          for (int64_t i = 0; i < x.size(); ++i) {
            ASSERT_EQ(float_bits(streamed.data()[i]), float_bits(stored.data()[i]))
                << "group " << group << (asym ? " asym" : " sym") << ", " << bits << " bits, element " << i;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvtune::builtin::int_kernels
