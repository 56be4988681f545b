// The Hadamard rotation policy: an orthonormal involution, llama.cpp's quantized-cache rotation bit
// for bit, llama.cpp's group choice, and the reason it exists (outlier channels hurt less); then
// rotation=random and vLLM's randomized Hadamard transform, rotation=rht.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kvtune/codecs/hadamard.h"
#include "kvtune/codecs/random_rotation.h"
#include "kvtune/codecs/rht.h"
#include "kvtune/conformance.h"
#include "kvtune/error.h"
#include "kvtune/npy.h"
#include "kvtune/numeric/bits.h"
#include "kvtune/policy.h"
#include "test_support.h"

namespace kvtune {
namespace {

using testing::data_path;
using testing::make_scheme;

// A spec with policy keys added: "q4_0" + "rotation=rht" is "q4_0:rotation=rht".
std::string with_keys(const std::string& inner, const std::string& keys) {
  return inner + (inner.find(':') == std::string::npos ? ":" : ",") + keys;
}

TEST(Hadamard, IsOrthonormalAndItsOwnInverse) {
  for (int n : {2, 8, 64, 128, 256}) {
    const Matrix x = testing::normal_matrix(1, n, uint64_t(n));
    Matrix y = x;
    hadamard_transform(y.data(), n);
    double nx = 0, ny = 0;
    for (int i = 0; i < n; ++i) nx += double(x(0, i)) * x(0, i), ny += double(y(0, i)) * y(0, i);
    EXPECT_NEAR(ny, nx, 1e-5 * nx) << n;
    hadamard_transform(y.data(), n);
    for (int i = 0; i < n; ++i) EXPECT_NEAR(y(0, i), x(0, i), 1e-5f) << n << " " << i;
  }
  float e[4] = {1, 0, 0, 0};  // the first column of H4 / 2
  hadamard_transform(e, 4);
  for (float v : e) EXPECT_EQ(v, 0.5f);
}

TEST(Hadamard, FollowsLlamaCppGroupChoice) {
  EXPECT_EQ(llama_cpp_rotation_group(Role::key, 128), 128);
  EXPECT_EQ(llama_cpp_rotation_group(Role::key, 256), 256);
  EXPECT_EQ(llama_cpp_rotation_group(Role::key, 192), 64);
  EXPECT_EQ(llama_cpp_rotation_group(Role::key, 96), 0);
  EXPECT_EQ(llama_cpp_rotation_group(Role::value, 128), 64);
  EXPECT_EQ(llama_cpp_rotation_group(Role::value, 80), 0);
}

class RotatedReference : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

// ggml's cache rotation around its quantizers: each contiguous group of N floats rotated,
// quantized, dequantized and rotated back.
TEST_P(RotatedReference, MatchesLlamaCppBitForBit) {
  const auto& [spec, file] = GetParam();
  const Matrix x = read_npy(data_path("ggml/input.npy")).values;
  const Matrix want = read_npy(data_path("ggml/" + file)).values;
  Matrix got(x.rows(), x.cols());
  make_scheme(spec)->roundtrip(x, {}, got);
  int64_t mismatches = 0;
  for (int64_t i = 0; i < x.size(); ++i) mismatches += float_bits(got.data()[i]) != float_bits(want.data()[i]);
  EXPECT_EQ(mismatches, 0) << spec;
}

INSTANTIATE_TEST_SUITE_P(
    Llama, RotatedReference,
    ::testing::Values(std::pair{"q4_0:rotation=hadamard,rotation_group=128", "roundtrip_q4_0_hadamard128.npy"},
                      std::pair{"q4_0:rotation=hadamard,rotation_group=64", "roundtrip_q4_0_hadamard64.npy"},
                      std::pair{"q8_0:rotation=hadamard,rotation_group=128", "roundtrip_q8_0_hadamard128.npy"}),
    [](const auto& p) { return std::string(p.param.second.substr(10, p.param.second.size() - 14)); });

// The policy rotates groups of 8 ... 256 channels eight floats per vector; each must give the
// scalar transform's bits (hadamard_transform, the one llama.cpp's reference above pins down).
TEST(RotationPolicy, VectorizedGroupsGiveTheScalarTransformsBits) {
  const Matrix data = read_npy(data_path("ggml/input.npy")).values;  // [256, 128]
  const Matrix x = copy_of(ConstMatrixView{data.data(), data.size() / 256, 256});  // the same floats, 256 a row
  for (const int group : {2, 4, 8, 16, 32, 64, 128, 256}) {
    Matrix want = copy_of(x);
    for (int64_t r = 0; r < x.rows(); ++r) {
      for (int64_t c = 0; c < x.cols(); c += group) hadamard_transform(want.row(r) + c, group);
    }
    Matrix quantized(x.rows(), x.cols());
    make_scheme("q8_0")->roundtrip(want, {}, quantized);
    for (int64_t r = 0; r < x.rows(); ++r) {
      for (int64_t c = 0; c < x.cols(); c += group) hadamard_transform(quantized.row(r) + c, group);
    }
    Matrix got(x.rows(), x.cols());
    make_scheme("q8_0:rotation=hadamard,rotation_group=" + std::to_string(group))->roundtrip(x, {}, got);
    int64_t mismatches = 0;
    for (int64_t i = 0; i < x.size(); ++i) mismatches += float_bits(got.data()[i]) != float_bits(quantized.data()[i]);
    EXPECT_EQ(mismatches, 0) << "rotation_group=" << group;
  }
}

// Around a scheme whose rows round-trip alone (rows_independent), the wrapper rotates, round-trips
// and rotates back 8 KiB of rows at a time. Row counts that leave a partial last tile (16 rows a
// tile at head_dim 128, 32 at 64), in both roles, must give the whole block's bits: rotate every
// row, round-trip the whole block once, rotate every row back.
TEST(RotationPolicy, TiledRoundTripIsTheWholeBlocksBits) {
  const Matrix data = read_npy(data_path("ggml/input.npy")).values;  // [256, 128]
  struct Case {
    const char* inner;
    int64_t rows, cols, group;
  };
  for (const Case& c : {Case{"q4_0", 37, 128, 128}, Case{"q4_0", 15, 128, 64}, Case{"int:bits=4,axis=token", 70, 64, 32},
                        Case{"fp8:scale=dynamic,granularity=token", 33, 128, 16}}) {
    const Matrix x = copy_of(ConstMatrixView{data.data(), c.rows, c.cols});
    const std::string spec = with_keys(c.inner, "rotation=hadamard,rotation_group=" + std::to_string(c.group));
    ASSERT_TRUE(make_scheme(c.inner)->traits().rows_independent) << c.inner;
    for (const Role role : {Role::key, Role::value}) {
      const QuantContext ctx{role, {}, 0};
      Matrix want = copy_of(x);
      for (int64_t r = 0; r < x.rows(); ++r) {
        for (int64_t j = 0; j < x.cols(); j += c.group) hadamard_transform(want.row(r) + j, int(c.group));
      }
      Matrix quantized(x.rows(), x.cols());
      make_scheme(c.inner)->roundtrip(want, ctx, quantized);
      for (int64_t r = 0; r < x.rows(); ++r) {
        for (int64_t j = 0; j < x.cols(); j += c.group) hadamard_transform(quantized.row(r) + j, int(c.group));
      }
      Matrix got(x.rows(), x.cols());
      make_scheme(spec)->roundtrip(x, ctx, got);
      int64_t mismatches = 0;
      for (int64_t i = 0; i < x.size(); ++i) mismatches += float_bits(got.data()[i]) != float_bits(quantized.data()[i]);
      EXPECT_EQ(mismatches, 0) << spec << (role == Role::key ? " (key)" : " (value)");
    }
  }
}

TEST(RotationPolicy, DefaultGroupDependsOnTheRole) {
  const Matrix x = read_npy(data_path("ggml/input.npy")).values;  // head_dim 128
  const SchemePtr s = make_scheme("q4_0:rotation=hadamard");
  Matrix as_key(x.rows(), x.cols()), as_value(x.rows(), x.cols()), g128(x.rows(), x.cols()), g64(x.rows(), x.cols());
  s->roundtrip(x, {Role::key, {}, 0}, as_key);
  s->roundtrip(x, {Role::value, {}, 0}, as_value);
  make_scheme("q4_0:rotation=hadamard,rotation_group=128")->roundtrip(x, {}, g128);
  make_scheme("q4_0:rotation=hadamard,rotation_group=64")->roundtrip(x, {}, g64);
  EXPECT_EQ(as_key, g128);
  EXPECT_EQ(as_value, g64);
}

TEST(RotationPolicy, LowersQ4KeyErrorWithOutlierChannels) {
  const Matrix x = read_npy(data_path("ggml/input.npy")).values;  // channels 11 and 70 are x15
  auto rel_err = [&](const std::string& spec) { return testing::roundtrip_rel_err(spec, x); };
  const double plain = rel_err("q4_0"), rotated = rel_err("q4_0:rotation=hadamard");
  EXPECT_LT(rotated, 0.8 * plain) << "plain " << plain << " rotated " << rotated;
}

TEST(RotationPolicy, SpecsFootprintsAndRefusals) {
  const SchemePtr s = make_scheme("int:bits=4,axis=token,rotation=hadamard,rotation_group=32");
  EXPECT_EQ(s->spec(), "int:bits=4,axis=token,rotation=hadamard,rotation_group=32");
  EXPECT_EQ(make_scheme(s->spec())->spec(), s->spec());
  EXPECT_EQ(make_scheme("q8_0:rotation=hadamard")->spec(), "q8_0:rotation=hadamard");
  EXPECT_EQ(make_scheme("q8_0:rotation=none")->spec(), "q8_0");
  EXPECT_EQ(s->footprint(10, 128), make_scheme("int:bits=4,axis=token")->footprint(10, 128));
  EXPECT_THAT(s->check_shape(4, 48), ::testing::HasSubstr("rotation_group=32 does not divide head_dim 48"));
  EXPECT_THROW(make_scheme("q8_0:rotation_group=64"), InputError);  // a group without a rotation
  EXPECT_THROW(make_scheme("q8_0:rotation=hadamard,rotation_group=48"), InputError);  // not a power of two
}

}  // namespace
}  // namespace kvtune

// rotation=random: a Haar matrix from rotation_seed (kvtune/codecs/random_rotation.h).
namespace kvtune {
namespace {

TEST(RandomRotation, IsOrthogonalInDoubleAndDeterministic) {
  for (int64_t d : {1, 2, 16, 128, 257}) {
    const std::vector<double> q = make_haar_rotation(d, 7);
    double worst = 0.0;
    for (int64_t i = 0; i < d; ++i) {
      for (int64_t j = 0; j < d; ++j) {
        double dot = 0.0;
        for (int64_t k = 0; k < d; ++k) dot += q[size_t(k * d + i)] * q[size_t(k * d + j)];
        worst = std::max(worst, std::abs(dot - (i == j ? 1.0 : 0.0)));
      }
    }
    EXPECT_LT(worst, 1e-12) << d;
    EXPECT_EQ(q, make_haar_rotation(d, 7)) << d;
    if (d > 1) {
      EXPECT_NE(q, make_haar_rotation(d, 8)) << d;
    }
    EXPECT_EQ(*haar_rotation(d, 7), q) << d;  // the shared cache holds the same matrix
  }
}

// Haar: Q's first column is uniform on the sphere, so E[Q_00^2] = 1/d, and its sign is a fair coin
// (a QR without the positive-diagonal convention would bias it).
TEST(RandomRotation, EntriesHaveTheHaarMoments) {
  const int64_t d = 8, draws = 4000;
  double square = 0.0, positive = 0.0;
  for (int64_t s = 0; s < draws; ++s) {
    const std::vector<double> q = make_haar_rotation(d, uint64_t(s));
    square += q[0] * q[0];
    positive += q[0] > 0 ? 1.0 : 0.0;
  }
  EXPECT_NEAR(square / draws, 1.0 / d, 0.01);  // sd of the mean ~ 0.0024
  EXPECT_NEAR(positive / draws, 0.5, 0.03);    // sd ~ 0.008
}

// The policy rotates all of a row's sums together (they vectorize); each is still rotate_vector's
// float64 sum in the same order, so the round trip is the one rotate_vector gives, bit for bit.
TEST(RandomRotation, PolicyGivesRotateVectorsBits) {
  const Matrix x = testing::normal_matrix(37, 96, 11);
  const auto q = haar_rotation(96, 5);
  Matrix rotated(37, 96), want(37, 96);
  for (int64_t r = 0; r < 37; ++r) rotate_vector(*q, 96, x.row(r), rotated.row(r), /*transpose=*/false);
  Matrix quantized(37, 96);
  make_scheme("q8_0")->roundtrip(rotated, {}, quantized);
  for (int64_t r = 0; r < 37; ++r) rotate_vector(*q, 96, quantized.row(r), want.row(r), /*transpose=*/true);
  Matrix got(37, 96);
  make_scheme("q8_0:rotation=random,rotation_seed=5")->roundtrip(x, {}, got);
  int64_t mismatches = 0;
  for (int64_t i = 0; i < x.size(); ++i) mismatches += float_bits(got.data()[i]) != float_bits(want.data()[i]);
  EXPECT_EQ(mismatches, 0);
}

TEST(RandomRotation, PolicyRoundTripsAndRotatesBack) {
  const Matrix x = testing::normal_matrix(5, 64, 3);
  Matrix y(5, 64);
  make_scheme("f32:rotation=random,rotation_seed=3")->roundtrip(x, {}, y);
  for (int64_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y.data()[i], x.data()[i], 1e-5f);
  EXPECT_EQ(make_scheme("int:bits=4,rotation=random,rotation_seed=3")->spec(), "int:bits=4,axis=tensor,rotation=random,rotation_seed=3");
  EXPECT_EQ(make_scheme("int:bits=4,rotation=random,rotation_seed=0")->spec(), "int:bits=4,axis=tensor,rotation=random");
  EXPECT_THROW(make_scheme("int:rotation=hadamard,rotation_seed=3"), InputError);
  EXPECT_THROW(make_scheme("int:rotation=random,rotation_group=64"), InputError);
  // The seed is the policy's, not the case's: the context seed changes nothing.
  Matrix a(5, 64), b(5, 64);
  const SchemePtr s = make_scheme("int:bits=4,axis=token,rotation=random,rotation_seed=3");
  s->roundtrip(x, {Role::key, {}, 1}, a);
  s->roundtrip(x, {Role::key, {}, 2}, b);
  EXPECT_EQ(a, b);
}

TEST(RandomRotation, SpreadsAnOutlierChannel) {
  Matrix x = testing::normal_matrix(64, 128, 5);
  for (int64_t r = 0; r < x.rows(); ++r) x(r, 9) *= 30.0f;
  const double plain = testing::roundtrip_rel_err("int:bits=4,axis=token", x);
  EXPECT_LT(testing::roundtrip_rel_err("int:bits=4,axis=token,rotation=random,rotation_seed=1", x), 0.7 * plain);
}

// Issue #13: llama.cpp's group choice has no group unless 64 divides head_dim; the rotated scheme
// used to rotate nothing there while its spec still said rotation=hadamard. It now refuses the
// shape, naming the head_dim and the groups rotation_group= could give.
TEST(RotationPolicy, RefusesAHeadDimWithoutALlamaCppGroup) {
  const SchemePtr q4 = make_scheme("q4_0:rotation=hadamard");
  EXPECT_EQ(q4->check_shape(4, 32),
            "'q4_0:rotation=hadamard': rotation=hadamard has no rotation group for head_dim 32 (llama.cpp's needs "
            "head_dim divisible by 64: K the largest power of two >= 64 dividing it, V 64); give rotation_group=N, N "
            "one of 2, 4, 8, 16, 32");
  EXPECT_THAT(make_scheme("int:bits=4,axis=token,rotation=hadamard")->check_shape(4, 48),
              ::testing::HasSubstr("head_dim 48 (llama.cpp's needs head_dim divisible by 64"));
  EXPECT_THAT(make_scheme("int:bits=4,axis=token,rotation=hadamard")->check_shape(4, 48),
              ::testing::EndsWith("give rotation_group=N, N one of 2, 4, 8, 16"));
  EXPECT_THAT(make_scheme("f16:rotation=hadamard")->check_shape(4, 7),
              ::testing::EndsWith("no rotation_group (a power of two >= 2) divides it"));
  // quantize refuses it too (the scheme's own check), for keys and values alike.
  const Matrix x = testing::normal_matrix(4, 32, 5);
  EXPECT_THROW(q4->quantize(x, {Role::key, {}, 0}), InputError);
  EXPECT_THROW(q4->quantize(x, {Role::value, {}, 0}), InputError);
  // With an explicit group, or at a head_dim llama.cpp handles, it is accepted.
  EXPECT_EQ(make_scheme("q4_0:rotation=hadamard,rotation_group=32")->check_shape(4, 32), "");
  EXPECT_EQ(make_scheme("int:bits=4,axis=token,rotation=hadamard,rotation_group=16")->check_shape(4, 48), "");
  EXPECT_EQ(q4->check_shape(4, 64), "");
  EXPECT_EQ(q4->check_shape(4, 192), "");  // K 64, V 64
  EXPECT_EQ(make_scheme("f16:rotation=random")->check_shape(4, 7), "");  // random rotates all of head_dim
}

}  // namespace
}  // namespace kvtune

// rotation=rht: vLLM's randomized Hadamard transform of int4_per_token_head
// (vllm/v1/attention/ops/int4_per_token_head.py @055e47c2), y = H (s o x), x = s o (H y) / d.
namespace kvtune {
namespace {

std::string sign_string(const std::vector<float>& s) {
  std::string out;
  for (float v : s) out += v > 0 ? '+' : '-';
  return out;
}

// The outside reference: vLLM's _get_rht_signs(128, 0, "cpu") as Debian's python3-torch 1.13.1
// prints it, `g = torch.Generator(device="cpu"); g.manual_seed(0x9E3779B9);
// 2.0 * torch.bernoulli(torch.full((128,), 0.5), generator=g) - 1.0`, written as +/-. d = 64 gives
// the first 64 of them (the same generator stream).
constexpr const char* kTorchRhtSigns128 =
    "+-++----+--++-+-++--+++-+-+--++-+---++-++-+-++---------+-------+--++-++-+-++++----+---+--++--+-+---+++----+-+-+-+++++++-++-+-++-";

TEST(Rht, SignsAreVllmsTorchBernoulliDraws) {
  EXPECT_EQ(sign_string(rht_signs(128)), kTorchRhtSigns128);
  EXPECT_EQ(sign_string(rht_signs(64)), std::string(kTorchRhtSigns128).substr(0, 64));
  EXPECT_EQ(sign_string(rht_signs(1)), "+");
}

TEST(Rht, ForwardIsHadamardOfTheSignedVectorByHand) {
  // d = 4: s = + - + +, x = 1 2 3 4 -> s o x = 1 -2 3 4. Each butterfly maps (a, b) to (a + b, a - b):
  // h = 1 pairs (1, -2) and (3, 4): -1 3 7 -1; h = 2 pairs (-1, 7) and (3, -1): 6 2 -8 4.
  float x[4] = {1, 2, 3, 4};
  const std::vector<float> s = rht_signs(4);
  rht_forward(x, s);
  EXPECT_EQ(x[0], 6.0f);
  EXPECT_EQ(x[1], 2.0f);
  EXPECT_EQ(x[2], -8.0f);
  EXPECT_EQ(x[3], 4.0f);
  rht_inverse(x, s);  // s o (H y) / 4 gives 1 2 3 4 back, exactly (small integers)
  EXPECT_EQ(x[0], 1.0f);
  EXPECT_EQ(x[1], 2.0f);
  EXPECT_EQ(x[2], 3.0f);
  EXPECT_EQ(x[3], 4.0f);
  // The policy stores the rotated row: f32:rotation=rht packs 6 2 -8 4.
  const Matrix row = testing::block(1, 4, {1, 2, 3, 4});
  const std::vector<std::byte> packed = make_scheme("f32:rotation=rht")->quantize(row, {});
  ASSERT_EQ(packed.size(), 16u);
  float stored[4];
  std::memcpy(stored, packed.data(), 16);
  EXPECT_EQ(stored[0], 6.0f);
  EXPECT_EQ(stored[2], -8.0f);
}

TEST(Rht, HTimesHIsDTimesIdentitySoF32RoundTrips) {
  for (int d : {2, 16, 64, 128, 256}) {
    // H H = d I on an integer vector, exactly.
    std::vector<float> e(size_t(d), 0.0f);
    e[3 % size_t(d)] = 1.0f;
    e[0] += 2.0f;
    std::vector<float> y = e;
    hadamard_butterflies(y.data(), d);
    hadamard_butterflies(y.data(), d);
    for (int i = 0; i < d; ++i) EXPECT_EQ(y[size_t(i)], float(d) * e[size_t(i)]) << d << " " << i;
    // An identity inner scheme gives the input back within 1e-6 relative.
    const Matrix x = testing::normal_matrix(9, d, uint64_t(d));
    Matrix back(9, d);
    make_scheme("f32:rotation=rht")->roundtrip(x, {}, back);
    for (int64_t i = 0; i < x.size(); ++i) {
      EXPECT_NEAR(back.data()[i], x.data()[i], 1e-6f * std::max(1.0f, std::abs(x.data()[i]))) << d << " " << i;
    }
  }
}

// Rows for the RHT's bit comparisons: normal draws, an outlier channel, a row of tiny values whose
// inverse lands among the subnormals (the division by d), a zero row and a row of one value.
Matrix rht_rows_of(int64_t rows, int64_t d, uint64_t seed) {
  Matrix x = testing::normal_matrix(rows, d, seed);
  for (int64_t r = 0; r < rows; ++r) x(r, 5 % d) *= 30.0f;
  for (int64_t j = 0; j < d; ++j) {
    x(1, j) *= 1e-37f;
    x(2, j) = 0.0f;
    x(3, j) = -2.5f;
  }
  return x;
}

int64_t bit_mismatches(const Matrix& a, const Matrix& b) {
  int64_t n = 0;
  for (int64_t i = 0; i < a.size(); ++i) n += float_bits(a.data()[i]) != float_bits(b.data()[i]);
  return n;
}

// The policy transforms heads of 16 ... 256 channels sixteen floats per vector (any other power of
// two by rht.h's scalar functions); each must give rht_forward's and rht_inverse's bits. f32 stores
// the rotated rows as they are, so quantize shows the forward transform and dequantize the inverse.
TEST(Rht, VectorHeadsAreTheScalarTransformsBits) {
  for (const int64_t d : {8, 16, 32, 64, 128, 256, 512}) {
    const Matrix x = rht_rows_of(21, d, uint64_t(d));
    const std::vector<float> s = rht_signs(d);
    Matrix forward = copy_of(x);
    for (int64_t r = 0; r < x.rows(); ++r) rht_forward(forward.row(r), s);
    const SchemePtr scheme = make_scheme("f32:rotation=rht");
    const std::vector<std::byte> packed = scheme->quantize(x, {});
    ASSERT_EQ(packed.size(), size_t(x.size()) * sizeof(float));
    Matrix stored(x.rows(), d);
    std::memcpy(stored.data(), packed.data(), packed.size());
    EXPECT_EQ(bit_mismatches(stored, forward), 0) << "forward, d = " << d;

    Matrix inverse = copy_of(stored);
    for (int64_t r = 0; r < x.rows(); ++r) rht_inverse(inverse.row(r), s);
    Matrix got(x.rows(), d);
    scheme->dequantize(packed, {}, got);
    EXPECT_EQ(bit_mismatches(got, inverse), 0) << "inverse, d = " << d;
  }
}

// Around a scheme whose rows round-trip alone, rotation=rht goes 8 KiB of rows at a time, as
// rotation=hadamard does. Row counts that leave a partial last tile, in both roles, must give the
// whole block's bits: rht_forward on every row, the inner round trip of the whole block, rht_inverse
// on every row. The first inner scheme is vLLM's int4_per_token_head (docs/runtimes.md).
TEST(Rht, TiledRoundTripIsTheWholeBlocksBits) {
  struct Case {
    const char* inner;
    int64_t rows, cols;
  };
  for (const Case& c : {Case{"tokenint:bits=4,zero=int,round=away,min_scale=1e-6,reciprocal,zero_in_scale", 53, 128},
                        Case{"tokenint:bits=8,round=away,min_scale=1e-6,reciprocal", 37, 64},
                        Case{"q4_0", 19, 256}, Case{"int:bits=4,axis=token", 70, 32}, Case{"f32", 33, 128}}) {
    const Matrix x = rht_rows_of(c.rows, c.cols, uint64_t(c.rows));
    const std::vector<float> s = rht_signs(c.cols);
    const std::string spec = with_keys(c.inner, "rotation=rht");
    ASSERT_TRUE(make_scheme(c.inner)->traits().rows_independent) << c.inner;
    for (const Role role : {Role::key, Role::value}) {
      const QuantContext ctx{role, {}, 0};
      Matrix want = copy_of(x);
      for (int64_t r = 0; r < x.rows(); ++r) rht_forward(want.row(r), s);
      Matrix quantized(x.rows(), x.cols());
      make_scheme(c.inner)->roundtrip(want, ctx, quantized);
      for (int64_t r = 0; r < x.rows(); ++r) rht_inverse(quantized.row(r), s);
      Matrix got(x.rows(), x.cols());
      make_scheme(spec)->roundtrip(x, ctx, got);
      EXPECT_EQ(bit_mismatches(got, quantized), 0) << spec << (role == Role::key ? " (key)" : " (value)");
    }
  }
}

// An output of 8 MiB or more gets the rotation back with streaming stores (on AVX-512): the same
// bits as rotating every row, round-tripping the whole block and rotating every row back, for the
// Hadamard groups and the RHT. 16 400 rows of 128 floats: 8.0 MiB and a partial last tile.
TEST(RotationPolicy, StreamedRotationBackIsTheSameBits) {
  const int64_t rows = 16400, cols = 128;
  const Matrix x = rht_rows_of(rows, cols, 5);
  ASSERT_GE(x.size() * int64_t(sizeof(float)), int64_t(8) << 20);
  struct Case {
    const char* inner;
    const char* rotation;
    int group;  // 0: rht
  };
  const std::vector<float> s = rht_signs(cols);
  for (const Case& c : {Case{"q4_0", "rotation=hadamard", 128}, Case{"q8_0", "rotation=hadamard,rotation_group=32", 32},
                        Case{"tokenint:bits=4,zero=int,round=away,min_scale=1e-6,reciprocal,zero_in_scale",
                             "rotation=rht", 0}}) {
    // Every row forth (or back): the scalar transforms, one row at a time.
    const auto rotate = [&](Matrix& m, bool back) {
      for (int64_t r = 0; r < m.rows(); ++r) {
        if (c.group == 0) {
          back ? rht_inverse(m.row(r), s) : rht_forward(m.row(r), s);
        } else {
          for (int64_t j = 0; j < cols; j += c.group) hadamard_transform(m.row(r) + j, c.group);
        }
      }
    };
    Matrix want = copy_of(x);
    rotate(want, false);
    Matrix quantized(rows, cols);
    make_scheme(c.inner)->roundtrip(want, {Role::key, {}, 0}, quantized);
    rotate(quantized, true);
    const std::string spec = with_keys(c.inner, c.rotation);
    Matrix got(rows, cols);
    make_scheme(spec)->roundtrip(x, {Role::key, {}, 0}, got);
    EXPECT_EQ(bit_mismatches(got, quantized), 0) << spec;
  }
}

TEST(Rht, KeepsDotProductsUpToD) {
  const int d = 128;
  const Matrix x = testing::normal_matrix(2, d, 11);
  std::vector<float> a(x.row(0), x.row(0) + d), b(x.row(1), x.row(1) + d);
  const std::vector<float> s = rht_signs(d);
  rht_forward(a.data(), s);
  rht_forward(b.data(), s);
  double xy = 0, ab = 0, xx = 0, aa = 0;
  for (int i = 0; i < d; ++i) {
    xy += double(x(0, i)) * x(1, i);
    ab += double(a[size_t(i)]) * b[size_t(i)];
    xx += double(x(0, i)) * x(0, i);
    aa += double(a[size_t(i)]) * a[size_t(i)];
  }
  EXPECT_NEAR(ab / d, xy, 1e-5 * xx);  // (Rx).(Ry) = d x.y: R / sqrt(d) is orthogonal
  EXPECT_NEAR(aa / d, xx, 1e-5 * xx);
  // A score estimator inside scores on rotated queries and the wrapper divides by d: qjl under
  // rotation=rht is qjl of the rotated keys and queries, over d, bit for bit.
  const Matrix keys = testing::normal_matrix(6, d, 12), queries = testing::normal_matrix(3, d, 13);
  Matrix rk = keys, rq = queries;
  for (int64_t r = 0; r < rk.rows(); ++r) rht_forward(rk.row(r), s);
  for (int64_t r = 0; r < rq.rows(); ++r) rht_forward(rq.row(r), s);
  const SchemePtr inner = make_scheme("qjl"), rotated = make_scheme("qjl:rotation=rht");
  Matrix want(3, 6), got(3, 6);
  inner->logits(rq, inner->quantize(rk, {}), 6, {}, want);
  rotated->logits(queries, rotated->quantize(keys, {}), 6, {}, got);
  for (int64_t i = 0; i < want.size(); ++i) EXPECT_EQ(got.data()[i], want.data()[i] / float(d)) << i;
}

TEST(Rht, RefusesAHeadDimThatIsNotAPowerOfTwo) {
  const SchemePtr s = make_scheme("int:bits=4,axis=token,rotation=rht");
  EXPECT_EQ(s->check_shape(4, 96),
            "'int:bits=4,axis=token,rotation=rht': rotation=rht needs a power-of-two head_dim (vLLM's randomized "
            "Hadamard transform rotates the whole head and asserts it); head_dim 96 is not one");
  const Matrix x = testing::normal_matrix(4, 96, 2);
  EXPECT_THROW(s->quantize(x, {Role::key, {}, 0}), InputError);
  Matrix y(4, 96);
  EXPECT_THROW(s->roundtrip(x, {Role::value, {}, 0}, y), InputError);
  EXPECT_EQ(s->check_shape(4, 128), "");
  EXPECT_EQ(s->check_shape(4, 1), "");  // 2^0: H is the identity
}

TEST(Rht, SpecsAndRefusedKeys) {
  EXPECT_EQ(make_scheme("int:rotation=rht,bits=4,axis=token")->spec(), "int:bits=4,axis=token,rotation=rht");
  EXPECT_EQ(make_scheme("q4_0:rotation=rht")->spec(), "q4_0:rotation=rht");
  EXPECT_EQ(make_scheme("f16:rotation=rht,sink_tokens=2")->spec(), "f16:rotation=rht,sink_tokens=2");
  EXPECT_EQ(make_scheme("q8_0:rotation=rht")->footprint(10, 128), make_scheme("q8_0")->footprint(10, 128));
  EXPECT_TRUE(make_scheme("q8_0:rotation=rht")->traits().rotates_rows);
  try {
    make_scheme("int:bits=4,axis=token,rotation=rht,rotation_group=64");
    ADD_FAILURE() << "rotation_group was accepted with rotation=rht";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("scheme spec 'int:bits=4,axis=token,rotation=rht,rotation_group=64': "
                                               "'rotation_group' is refused with rotation=rht"));
  }
  try {
    make_scheme("q4_0:rotation=rht,rotation_seed=3");
    ADD_FAILURE() << "rotation_seed was accepted with rotation=rht";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("'rotation_seed' is refused with rotation=rht"));
  }
  EXPECT_EQ(make_scheme("q4_0:rotation=rht,rotation_seed=0")->spec(), "q4_0:rotation=rht");
}

// The conformance checks (kvtune/conformance.h) on a few families under rotation=rht; the suite
// enumerates the other rotations around every family, and check-plugin's enumeration is unchanged.
TEST(Rht, PassesTheConformanceChecks) {
  for (const char* spec : {"int:bits=4,axis=token,rotation=rht", "int:bits=8,axis=channel,asym,rotation=rht",
                           "q4_0:rotation=rht", "f16:rotation=rht", "fp8:scale=dynamic,granularity=token,rotation=rht",
                           "qjl:rotation=rht", "int:bits=4,axis=token,rotation=rht,sink_tokens=2,block_tokens=2"}) {
    for (const conformance::Result& r : conformance::check_scheme(*make_scheme(spec), builtin_registry())) {
      EXPECT_TRUE(r.passed) << spec << " " << r.check << ": " << r.message;
    }
  }
}

}  // namespace
}  // namespace kvtune
