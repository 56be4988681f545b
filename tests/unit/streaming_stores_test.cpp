// The round trips that stream their output (plugins/streaming_stores.h: the int family per channel)
// on a cache of 16 384 × 128 floats, 8 MiB, the smallest output that streams: each fused round trip
// against the scheme's packed path, dequantize(quantize(x)), bit for bit. Keys with three ×20 outlier channels and a
// sprinkling of exact zeros, so groups see both wide and degenerate ranges.
#include <gtest/gtest.h>

#include <random>

#include "kvtune/matrix.h"
#include "kvtune/numeric/bits.h"
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

TEST(StreamingStores, StreamedRoundTripsAreThePackedOnes) {
  const Matrix x = keys();
  Matrix fused(kTokens, kDim), packed(kTokens, kDim);
  ASSERT_TRUE(builtin::streams_output(fused.data(), kTokens, kDim)) << "this size must take the streaming path";
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
