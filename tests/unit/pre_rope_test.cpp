// rope_stage=pre: keys quantized before RoPE and re-rotated after dequantizing (KVQuant).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "kvtune/error.h"
#include "kvtune/workload.h"
#include "test_support.h"

namespace kvtune {
namespace {

using testing::make_scheme;

// Keys with outlier channels in low-frequency RoPE dimensions (rotate_half pairs i with i + D/2 at
// frequency theta^(-2i/D): large i turns slowly), where real keys carry them.
Case rope_case(int64_t tokens, uint64_t seed) {
  WorkloadConfig cfg;
  cfg.tokens = tokens;
  cfg.head_dim = 64;
  cfg.keys.outlier_channels = {26, 28, 30};
  cfg.keys.outlier_scale = 20.0;
  cfg.rope = {true, 10000.0, RopeConvention::rotate_half};
  return generate_case(cfg, seed);
}

double rel_err(const std::string& spec, const Case& c) {
  return testing::roundtrip_rel_err(spec, c.keys, {Role::key, c.positions, c.seed, &c.rope});
}

TEST(PreRope, AnExactInnerSchemeGivesTheKeysBack) {
  const Case c = rope_case(256, 1);
  EXPECT_LT(rel_err("f32:rope_stage=pre", c), 1e-6);
  EXPECT_EQ(make_scheme("int:bits=4,axis=channel,rope_stage=pre")->spec(), "int:bits=4,axis=channel,rope_stage=pre");
}

TEST(PreRope, PerChannelKeysFitBetterBeforeRope) {
  const Case c = rope_case(4096, 2);
  const double pre = rel_err("int:bits=4,axis=channel,rope_stage=pre", c);
  const double post = rel_err("int:bits=4,axis=channel", c);
  EXPECT_LT(pre, 0.9 * post) << "pre " << pre << " post " << post;
}

TEST(PreRope, PackedPathMatchesTheRoundTrip) {
  const Case c = rope_case(100, 3);
  const QuantContext ctx{Role::key, c.positions, c.seed, &c.rope};
  const SchemePtr s = make_scheme("int:bits=4,axis=channel,rope_stage=pre,sink_tokens=4,block_tokens=32");
  Matrix fused(100, 64), via_packed(100, 64);
  s->roundtrip(c.keys, ctx, fused);
  s->dequantize(s->quantize(c.keys, ctx), ctx, via_packed);
  EXPECT_EQ(fused, via_packed);
}

TEST(PreRope, ValuesAreLeftAlone) {
  const Case c = rope_case(64, 4);
  const QuantContext ctx{Role::value, c.positions, c.seed, &c.rope};
  Matrix a(64, 64), b(64, 64);
  make_scheme("int:bits=4,axis=token,rope_stage=pre")->roundtrip(c.values, ctx, a);
  make_scheme("int:bits=4,axis=token")->roundtrip(c.values, ctx, b);
  EXPECT_EQ(a, b);
}

TEST(PreRope, KeysWithoutRopeAreRefused) {
  const Matrix x = testing::normal_matrix(16, 8, 5);
  Matrix y(16, 8);
  try {
    make_scheme("int:bits=4,rope_stage=pre")->roundtrip(x, {}, y);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(std::string(e.what()), ::testing::HasSubstr("rope_stage=pre needs keys that carry RoPE"));
  }
}

}  // namespace
}  // namespace kvtune
