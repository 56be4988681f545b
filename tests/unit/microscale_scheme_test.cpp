// The microscale schemes' fused round trip (MicroScheme::roundtrip over microscale_kernels) against
// their packed path, dequantize(quantize(x)), bit for bit for every variant: rows of exact E2M1
// ties at scale 1, zeros of both signs, magnitudes from float32 subnormals to 1e30, a static
// nvfp4 scale that saturates or underflows blocks, and a calibrated one.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "float_param.h"
#include "kvtune/error.h"
#include "kvtune/matrix.h"
#include "kvtune/numeric/bits.h"
#include "kvtune/registry.h"
#include "test_support.h"

namespace kvtune {
namespace {

Matrix hard_block() {
  constexpr int64_t kTokens = 24, kDim = 64;
  Matrix x(kTokens, kDim, 0.0f);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f};
  for (int64_t t = 0; t < kTokens; ++t) {
    for (int64_t c = 0; c < kDim; ++c) {
      float v = 0.0f;
      switch (t) {
        case 0: v = (c % 2 ? -1.0f : 1.0f) * ties[c % 8]; break;  // every block's amax 6: scale 1, exact ties
        case 1: v = 0.0f; break;
        case 2: v = -0.0f; break;
        case 3: v = c % 3 ? -0.0f : 0.0f; break;
        case 4: v = 1e-40f * float(c % 5); break;  // float32 subnormals
        case 5: v = 1e30f * normal(rng); break;
        case 6: v = c == 7 ? 1.0f : 0.0f; break;
        default: v = std::ldexp(normal(rng), int(t) - 12); break;  // 2^-5 ... 2^11
      }
      x(t, c) = v;
    }
  }
  return x;
}

void expect_fused_is_packed(const std::string& spec, const Matrix& x) {
  SCOPED_TRACE(spec);
  SchemePtr s = builtin_registry().make(spec);
  if (s->traits().static_scales) s = s->calibrate(x, {});
  Matrix fused(x.rows(), x.cols(), 123.0f), packed(x.rows(), x.cols(), 456.0f);
  s->roundtrip(x, {}, fused);
  s->dequantize(s->quantize(x, {}), {}, packed);
  for (int64_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(float_bits(fused.data()[i]), float_bits(packed.data()[i]))
        << "element " << i << ": x " << x.data()[i] << ", fused " << fused.data()[i] << ", packed " << packed.data()[i];
  }
}

TEST(MicroSchemes, FusedRoundTripIsThePackedOne) {
  const Matrix x = hard_block();
  for (const char* spec : {"mxfp4", "mxfp4:block=16", "mxfp4:round=away", "mxfp4:block=16,round=away", "mxfp8",
                           "nvfp4", "nvfp4:scale=calibrated", "nvfp4:scale=calibrated,bound=448",
                           "nvfp4:bound=74.66667", "nvfp4:scale=static,value=0.001",
                           "nvfp4:scale=static,value=1e-30", "nvfp4:scale=static,value=1e20"}) {
    expect_fused_is_packed(spec, x);
  }
  // An all-zero tensor (nvfp4's tensor scale falls back to 1) and one of negative zeros.
  expect_fused_is_packed("nvfp4", Matrix(4, 32, 0.0f));
  expect_fused_is_packed("nvfp4", Matrix(4, 32, -0.0f));
  expect_fused_is_packed("mxfp4", Matrix(4, 32, -0.0f));
}

// Tensors that span many of the fused path's tiles and end in a partial one (300 tokens x 64:
// 1200 blocks of 16, 600 of 32), the hard block's rows repeated between normal ones: with a NaN in
// one tile and an infinity in another, then with neither (the dynamic nvfp4 tensor scale is then
// finite).
TEST(MicroSchemes, FusedRoundTripIsThePackedOneOverManyTiles) {
  const Matrix hard = hard_block();
  Matrix x(300, 64);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t t = 0; t < x.rows(); ++t) {
    for (int64_t c = 0; c < x.cols(); ++c) x(t, c) = t % 7 == 0 ? hard(t / 7 % hard.rows(), c) : normal(rng);
  }
  for (bool with_nan : {true, false}) {
    x(150, 3) = with_nan ? -std::numeric_limits<float>::quiet_NaN() : 2.0f;
    x(211, 9) = with_nan ? std::numeric_limits<float>::infinity() : -3.0f;
    for (const char* spec : {"mxfp4", "mxfp4:block=16", "mxfp4:block=16,round=away", "mxfp8", "nvfp4",
                             "nvfp4:bound=448", "nvfp4:scale=static,value=0.001", "nvfp4:scale=static,value=1"}) {
      expect_fused_is_packed(spec, x);
    }
  }
}

// Block maxima in every float32 binade, from the smallest subnormal to the largest finite value:
// each power of two, one unit above it and the largest value of its binade, and 2^-127 and
// 6 * 2^-127 with their neighbours (where the E8M0 scale of amax / 6 turns from 2^-127 to 2^-126).
// So the block scales of the fused path (the vectorized scale loops) meet every branch of the codec's.
// One block per token of 32 channels, the other elements a spread below the maximum.
TEST(MicroSchemes, FusedRoundTripIsThePackedOneForMaximaInEveryBinade) {
  std::vector<float> maxima;
  for (int e = -149; e <= 127; ++e) {
    const float p = std::ldexp(1.0f, e);
    maxima.push_back(p);
    if (e >= -126) maxima.push_back(std::nextafter(p, 2.0f * p));
    if (e >= -126 && e < 127) maxima.push_back(std::nextafter(2.0f * p, 0.0f));
  }
  maxima.push_back(std::numeric_limits<float>::max());
  for (float edge : {0x1p-127f, 0x1.8p-125f}) {  // 2^-127 itself, and the maximum whose amax / 6 it is
    for (float m : {std::nextafter(edge, 0.0f), edge, std::nextafter(edge, 1.0f)}) maxima.push_back(m);
  }
  while (maxima.size() % 16 != 0) maxima.push_back(0.0f);
  Matrix x(int64_t(maxima.size()), 32);
  const float spread[] = {1.0f, -0.75f, 0.5f, -0.3f, 0.125f, -0.0f, 0.9f, -0.51f};
  for (int64_t t = 0; t < x.rows(); ++t) {
    for (int64_t c = 0; c < x.cols(); ++c) x(t, c) = maxima[size_t(t)] * spread[c % 8] * (c < 8 ? 1.0f : 0.5f);
  }
  for (const char* spec : {"mxfp4", "mxfp4:block=16", "mxfp4:block=16,round=away", "nvfp4", "nvfp4:scale=static,value=1",
                           "nvfp4:scale=static,value=1e-30", "nvfp4:scale=static,value=1e20"}) {
    expect_fused_is_packed(spec, x);
  }
}

// `bound` fits the per-tensor scale as amax / bound: a calibrated scheme keeps amax / 448 of its
// sample as its static scale (ModelOpt's checkpoints since PR #790), the block codes then sit 6x
// lower in E4M3 than with the default amax / 2688, and a bound that would overflow the block scales,
// or one given with a static scale, is refused.
TEST(MicroSchemes, ABoundFitsThePerTensorScaleAgainstIt) {
  Matrix sample(2, 16, 0.5f);
  sample(1, 3) = -896.0f;  // amax 896: amax / 448 = 2, amax / 2688 = 1/3
  const SchemePtr modelopt = builtin_registry().make("nvfp4:scale=calibrated,bound=448");
  EXPECT_EQ(modelopt->spec(), "nvfp4:scale=calibrated,bound=448");
  const auto fitted = modelopt->calibrate(sample.view(), {});
  EXPECT_EQ(fitted->spec(), "nvfp4:scale=static,value=2");
  EXPECT_EQ(builtin_registry().make("nvfp4:scale=calibrated")->calibrate(sample.view(), {})->spec(),
            "nvfp4:scale=static,value=" + builtin::spell_float32(896.0f / 2688.0f));
  for (const char* bad : {"nvfp4:bound=3000", "nvfp4:bound=0", "nvfp4:scale=static,value=1,bound=448"}) {
    EXPECT_THROW(builtin_registry().make(bad), InputError) << bad;
  }
}

}  // namespace
}  // namespace kvtune
