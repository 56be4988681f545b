// When round trips stream their output (plugins/streaming_stores.h: the int family per channel),
// and that they give the packed path's bits. The round trips run on a cache of 16 384 × 128
// floats, 8 MiB, the smallest output that streams where the last-level cache is unknown (16 MiB
// assumed); on a host with a larger cache they store normally, and the column tiles' streaming
// stores are checked bit for bit in int_kernels_test.cpp. Keys with three ×20 outlier channels and
// a sprinkling of exact zeros, so groups see both wide and degenerate ranges.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "kvtune/matrix.h"
#include "kvtune/numeric/bits.h"
#include "kvtune/numeric/cpu_features.h"
#include "kvtune/registry.h"
#include "streaming_stores.h"
#include "test_support.h"

namespace kvtune {
namespace {

constexpr int64_t kTokens = 16384, kDim = 128;

Matrix keys() {
  Matrix x(kTokens, kDim);
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t t = 0; t < kTokens; ++t) {
    for (int64_t c = 0; c < kDim; ++c) {
      const float v = normal(rng) * (c == 7 || c == 23 || c == 88 ? 20.0f : 1.0f);
      x(t, c) = (t * kDim + c) % 97 == 0 ? 0.0f : v;
    }
  }
  return x;
}

TEST(StreamingStores, OutputStreamsFromHalfTheLastLevelCache) {
  Matrix y(kTokens, kDim);
  constexpr int64_t kCache = int64_t(16) << 20;  // 8 MiB of output is half of it
  EXPECT_TRUE(builtin::streams_output(y.data(), kTokens, kDim, kCache));
  EXPECT_FALSE(builtin::streams_output(y.data(), kTokens - 1, kDim, kCache));
  EXPECT_FALSE(builtin::streams_output(y.data(), kTokens, kDim, 2 * kCache + 1));
  EXPECT_TRUE(builtin::streams_output(y.data(), 2 * kTokens, kDim, 2 * kCache));
  EXPECT_FALSE(builtin::streams_output(y.data() + 4, kTokens, kDim, kCache)) << "rows not 64-byte aligned";
  EXPECT_FALSE(builtin::streams_output(y.data(), kTokens, kDim - 8, kCache / 2)) << "rows not whole vectors";
  // The default is the host's cache up to 64 MiB, or the assumed one where the C library reports none.
  const int64_t reported = cpu_last_level_cache_bytes();
  EXPECT_EQ(streaming_cache_bytes(), reported > 0 ? std::min(reported, int64_t(64) << 20) : kAssumedCacheBytes);
  EXPECT_EQ(builtin::streams_output(y.data(), kTokens, kDim),
            builtin::streams_output(y.data(), kTokens, kDim, streaming_cache_bytes()));
}

TEST(StreamingStores, RoundTripsAreThePackedOnes) {
  const Matrix x = keys();
  Matrix fused(kTokens, kDim), packed(kTokens, kDim);
  for (const char* spec : {"int:bits=8,axis=channel", "int:bits=4,axis=channel,asym",
                           "int:bits=4,axis=channel,group=32,asym", "int:bits=2,axis=channel,group=32,asym",
                           "int:bits=8,axis=channel,group=64"}) {
    SCOPED_TRACE(spec);
    const SchemePtr s = builtin_registry().make(spec);
    s->roundtrip(x, {}, fused);
    s->dequantize(s->quantize(x, {}), {}, packed);
    for (int64_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(float_bits(fused.data()[i]), float_bits(packed.data()[i])) << "element " << i << ": x " << x.data()[i];
    }
  }
}

}  // namespace
}  // namespace kvtune
