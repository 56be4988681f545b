// The research families kivi and kvquant (issue #8) on blocks small enough to compute by hand:
// a 2-bit KIVI group, footprints byte by byte, 1-D k-means against brute force, the sparse
// outlier selection and a calibrated KVQuant codebook.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

#include "kvquant/kvquant_math.h"
#include "kvtune/error.h"
#include "kvtune/registry.h"
#include "kvtune/scenario.h"
#include "kvtune/numeric/half.h"
#include "test_support.h"

namespace kvtune {
namespace {

using testing::make_scheme;
using testing::block;

std::vector<double> kvquant_kmeans(const std::vector<float>& v, int k, bool pin_unit_ends = false) {
  return builtin::kvquant::kmeans_1d(v, k, pin_unit_ends);
}

Matrix roundtrip(const SchemePtr& s, const Matrix& x) {
  Matrix out(x.rows(), x.cols());
  s->roundtrip(x, {}, out);
  return out;
}

TEST(Kivi, TwoBitKeyGroupHandComputed) {
  // Channel 0: min 0, max 3, s = 3 / (2^2 - 1) = 1: every value is a code. Channel 1: min -1,
  // s = 1, (0.5 + 1) / 1 = 1.5 rounds half to even -> code 2 -> 1.0.
  const Matrix x = block(4, 2, {0.0f, -1.0f, 1.0f, 0.5f, 2.0f, 2.0f, 3.0f, 0.0f});
  const SchemePtr s = make_scheme("kivi:bits=2,role=k,group=4,residual=0");
  const Matrix y = roundtrip(s, x);
  const std::vector<float> want = {0.0f, -1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 3.0f, 0.0f};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(y.data()[i], want[i]) << i;
  // Per channel f16 scale + f16 zero point (2 x 4 bytes) and 4 x 2 x 2 bits of codes.
  EXPECT_EQ(s->footprint(4, 2), 10u);
}

TEST(Kivi, KeysStayExactUntilABlockFillsAndInTheWindow) {
  const SchemePtr s = make_scheme("kivi:bits=2,role=k,group=4,residual=1");
  // 6 tokens: window 1, 5 older = one full block of 4 + 1 f16 row of a partial block.
  EXPECT_EQ(s->footprint(6, 2), 10u + 2 * 2 * 2);
  // 9 tokens: 8 older fill two blocks; the window row is f16.
  EXPECT_EQ(s->footprint(9, 2), 2 * 10u + 1 * 2 * 2);
  // A cache shorter than the window has nothing quantized.
  const SchemePtr wide = make_scheme("kivi:bits=2,role=k,group=32,residual=128");
  const Matrix x = testing::normal_matrix(100, 8, 1);
  EXPECT_EQ(wide->footprint(100, 8), 100u * 8 * 2);
  const Matrix y = roundtrip(wide, x);
  for (int64_t i = 0; i < x.size(); ++i) EXPECT_EQ(y.data()[i], round_to_f16(x.data()[i]));
}

TEST(Kivi, ValuesPerTokenInChannelGroups) {
  // 3 tokens, 4 channels, G = 2, R = 1: 2 tokens x 2 groups x (f16 scale + f16 zero) = 16 bytes,
  // 2 x 4 x 2 bits = 2 bytes of codes, 1 window row of 4 f16 = 8 bytes.
  const SchemePtr s = make_scheme("kivi:bits=2,role=v,group=2,residual=1");
  EXPECT_EQ(s->footprint(3, 4), 26u);
  // Groups {0, 3}, {-1, 2} and {1, 4}: s = 1, every value a code; {0.5, 0.5}: s = 0, x' = m.
  const Matrix x = block(3, 4, {0.0f, 3.0f, -1.0f, 2.0f, 1.0f, 4.0f, 0.5f, 0.5f, 9.0f, 9.0f, 9.0f, 9.0f});
  const Matrix y = roundtrip(s, x);
  EXPECT_EQ(y, x);
  EXPECT_NE(s->check_shape(3, 5), "");  // G must divide head_dim
  EXPECT_THROW(make_scheme("kivi:bits=2"), InputError);  // the role is required
}

TEST(Kivi, SpecSpellsGroupAndResidual) {
  EXPECT_EQ(make_scheme("kivi:role=k")->spec(), "kivi:bits=2,role=k,group=32,residual=128");
}

// kivi and kvquant take their role from the spec and declare it (traits().role): the other slot of a
// pair, a sweep's other candidate list, and `quantize --role` for the other role refuse them.
TEST(Kivi, ARoleBuiltSchemeIsRefusedInTheOtherSlot) {
  for (const char* spec : {"kivi:role=v", "kvquant:role=v"}) {
    const SchemePtr s = make_scheme(spec);
    ASSERT_TRUE(s->traits().role.has_value()) << spec;
    EXPECT_EQ(*s->traits().role, Role::value) << spec;
    EXPECT_EQ(role_problem(*s, Role::value), "") << spec;
    EXPECT_THAT(role_problem(*s, Role::key), ::testing::HasSubstr("is built for values (role=v) and cannot store keys"));
    const std::vector<PairRequest> as_keys = {{.k = spec, .v = "f16", .where = "pair 1"}};
    EXPECT_THAT(testing::input_error([&] { build_plan(as_keys, builtin_registry(), 5); }),
                ::testing::HasSubstr("pair 1: '"));
    const std::vector<PairRequest> as_values = {{.k = "f16", .v = spec, .where = "pair 1"}};
    EXPECT_NO_THROW(build_plan(as_values, builtin_registry(), 5));
  }
  EXPECT_FALSE(make_scheme("q8_0")->traits().role.has_value());  // any role
}

// Re-fitting on a round trip moves these two (a codebook fitted again without the sparse entries,
// an outlier set picked again), so they declare requantize_drifts and the conformance suite's
// fixed-point check does not apply; the settings that are fixed points keep the check.
TEST(Kvquant, DeclaresTheDriftOfARefittedValueCodebook) {
  struct Case {
    const char* spec;
    bool drifts;
  };
  for (const Case& c : {Case{"kvquant:role=v", true}, Case{"turboquant:outliers=8", true},
                        Case{"kvquant:role=v,outliers=0", false}, Case{"kvquant:role=k", false},
                        Case{"turboquant", false}}) {
    const SchemePtr s = make_scheme(c.spec);
    EXPECT_EQ(s->traits().requantize_drifts, c.drifts) << c.spec;
    if (!c.drifts) continue;
    // Not every block moves (kvquant's values: 3 Gaussian blocks of 20 in a review); one of these does.
    float moved = 0.0f;
    for (uint64_t seed = 1; seed <= 20 && moved <= 0.01f; ++seed) {
      const Matrix once = roundtrip(s, testing::normal_matrix(64, 128, seed));
      const Matrix twice = roundtrip(s, once);
      for (int64_t i = 0; i < once.size(); ++i) moved = std::max(moved, std::abs(twice.data()[i] - once.data()[i]));
    }
    EXPECT_GT(moved, 0.01f) << c.spec;  // not a last-ulp effect: whole codes move
  }
}

TEST(KMeans1d, TinySetHandComputed) {
  const std::vector<float> v = {0.0f, 10.0f, 1.0f, 0.0f, 1.0f};
  // {0, 0, 1, 1} | {10}: squared error 1, against 54 for {0, 0} | {1, 1, 10}.
  EXPECT_EQ(kvquant_kmeans(v, 2), (std::vector<double>{0.5, 10.0}));
  EXPECT_EQ(kvquant_kmeans(v, 3), (std::vector<double>{0.0, 1.0, 10.0}));
  // Fewer distinct values than centroids: each value, the last repeated.
  EXPECT_EQ(kvquant_kmeans({2.0f, 2.0f}, 4), (std::vector<double>{2.0, 2.0, 2.0, 2.0}));
}

TEST(KMeans1d, PinnedEndsFitTheInterior) {
  // 0 and 1 fixed; the free centroid takes {0.1, 0.2} (error 0.005 + 0.01 for 0.9 -> 1), which
  // beats taking {0.2} alone (0.01 + 0.01) or {0.9} (0.05).
  const std::vector<double> c = kvquant_kmeans({0.0f, 0.1f, 0.2f, 0.9f, 1.0f}, 3, true);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0], 0.0);
  EXPECT_NEAR(c[1], 0.15, 1e-7);
  EXPECT_EQ(c[2], 1.0);
}

// Squared error of assigning every value to its nearest centroid.
double sse(const std::vector<float>& v, const std::vector<double>& c) {
  double total = 0;
  for (float x : v) {
    double best = std::numeric_limits<double>::infinity();
    for (double m : c) best = std::min(best, (x - m) * (x - m));
    total += best;
  }
  return total;
}

TEST(KMeans1d, MatchesBruteForceOverEveryContiguousSplit) {
  std::mt19937_64 engine(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> v(9);
    for (float& x : v) x = normal(engine);
    std::vector<float> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    // k = 3: every pair of cut points of the sorted values.
    double best = std::numeric_limits<double>::infinity();
    for (size_t a = 1; a < sorted.size(); ++a) {
      for (size_t b = a + 1; b < sorted.size(); ++b) {
        auto mean = [&](size_t i, size_t j) {
          double s = 0;
          for (size_t t = i; t < j; ++t) s += sorted[t];
          return s / double(j - i);
        };
        best = std::min(best, sse(v, {mean(0, a), mean(a, b), mean(b, sorted.size())}));
      }
    }
    EXPECT_NEAR(sse(v, kvquant_kmeans(v, 3)), best, 1e-9) << "trial " << trial;
  }
}

TEST(SparseOutliers, LargestMagnitudesLowerIndexOnTies) {
  const float x[] = {1.0f, -5.0f, 3.0f, 5.0f, -2.0f};
  using builtin::kvquant::largest_magnitudes;
  EXPECT_EQ(largest_magnitudes(x, 5, 1, 1), (std::vector<int64_t>{1}));
  EXPECT_EQ(largest_magnitudes(x, 5, 1, 2), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(largest_magnitudes(x, 5, 1, 3), (std::vector<int64_t>{1, 2, 3}));
  // A column of a [3, 2] matrix: entries 1.0, 3.0, -2.0.
  EXPECT_EQ(largest_magnitudes(x, 3, 2, 1), (std::vector<int64_t>{1}));
}

TEST(Kvquant, FootprintCountsCodebooksCodesAndSparseEntries) {
  // Keys, 4 tokens x 2 channels, 2 bits, 25 % = 1 outlier per channel: 2 x 4 f16 centroids (16)
  // + 8 x 2 bits of codes (2) + 2 x (1-byte row + f16) (6).
  EXPECT_EQ(make_scheme("kvquant:bits=2,role=k,outliers=25")->footprint(4, 2), 24u);
  // Values, 2 tokens x 4 channels: 4 f16 centroids (8) + f16 min and max per token (8) + codes (2)
  // + 2 x (1-byte column + f16) (6).
  EXPECT_EQ(make_scheme("kvquant:bits=2,role=v,outliers=25")->footprint(2, 4), 24u);
  // 300 tokens need 2-byte rows: 2 channels x 3 outliers x 4 bytes.
  EXPECT_EQ(make_scheme("kvquant:bits=2,role=k,outliers=1")->footprint(300, 2), 16u + 150 + 24);
  EXPECT_THROW(make_scheme("kvquant:role=k,outliers=60"), InputError);
}

TEST(Kvquant, OutliersComeBackExactAndLeaveTheCodebookToTheRest) {
  // Channel 0: the 100 is the outlier, the zeros get centroids of their own. Channel 1: the -7.
  const Matrix x = block(4, 2, {0.0f, 1.0f, 0.0f, 2.0f, 0.0f, -7.0f, 100.0f, 3.0f});
  const Matrix y = roundtrip(make_scheme("kvquant:bits=2,role=k,outliers=25"), x);
  EXPECT_EQ(y, x);  // 3 dense values per channel, 4 centroids: every value kept
  const Matrix no_sparse = roundtrip(make_scheme("kvquant:bits=2,role=k,outliers=0"), x);
  EXPECT_EQ(no_sparse(2, 1), -7.0f);  // 4 values per channel, 4 centroids: still exact
  const Matrix value_row = roundtrip(make_scheme("kvquant:bits=2,role=v,outliers=25"), block(1, 4, {0, 1, 2, 100}));
  EXPECT_EQ(value_row(0, 3), 100.0f);  // the largest entry of the token is the sparse one
}

TEST(Kvquant, CalibratedKeyCodebooksComeFromTheSample) {
  const SchemePtr s = make_scheme("kvquant:bits=2,role=k,outliers=0");
  const Matrix sample = block(4, 1, {0.0f, 1.0f, 2.0f, 3.0f});
  const SchemePtr fitted = s->calibrate(sample, {});
  EXPECT_EQ(fitted->spec(), s->spec());
  const Matrix y = roundtrip(fitted, block(4, 1, {0.4f, 2.6f, 1.2f, 3.3f}));
  EXPECT_EQ(y, block(4, 1, {0.0f, 3.0f, 1.0f, 3.0f}));
  EXPECT_NE(fitted->check_shape(4, 2), "");  // codebooks for one channel only
}

}  // namespace
}  // namespace kvtune
