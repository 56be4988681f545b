// When round trips stream their output (plugins/streaming_stores.h: the int family per channel and
// per token), and that they give the packed path's bits. The rule is checked on 16 384 × 128
// floats (8 MiB) against explicit cache sizes. The round trips run on 65 536 × 128 floats, 32 MiB,
// which stream on every host: the rule counts at most 64 MiB of cache. Keys with three ×20 outlier
// channels and a sprinkling of exact zeros, so groups see both wide and degenerate ranges.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
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
constexpr int64_t kStreamedTokens = 65536;  // 32 MiB of output: half of the most cache the rule counts

Matrix keys() {
  Matrix x(kStreamedTokens, kDim);
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t t = 0; t < kStreamedTokens; ++t) {
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
  Matrix fused(kStreamedTokens, kDim), packed(kStreamedTokens, kDim);
  ASSERT_TRUE(builtin::streams_output(fused.data(), kStreamedTokens, kDim)) << "32 MiB must stream on every host";
  for (const char* spec : {"int:bits=8,axis=channel", "int:bits=4,axis=channel,asym",
                           "int:bits=4,axis=channel,group=32,asym", "int:bits=2,axis=channel,group=32,asym",
                           "int:bits=8,axis=channel,group=64", "int:bits=4,axis=token",
                           "int:bits=4,axis=token,group=32,asym", "int:bits=8,axis=token,group=64,asym,scale=bf16"}) {
    SCOPED_TRACE(spec);
    const SchemePtr s = builtin_registry().make(spec);
    s->roundtrip(x, {}, fused);
    s->dequantize(s->quantize(x, {}), {}, packed);
    if (std::memcmp(fused.data(), packed.data(), size_t(x.size()) * sizeof(float)) == 0) continue;
    for (int64_t i = 0; i < x.size(); ++i) {  // name the first element that differs
      ASSERT_EQ(float_bits(fused.data()[i]), float_bits(packed.data()[i])) << "element " << i << ": x " << x.data()[i];
    }
  }
}

}  // namespace
}  // namespace kvtune
