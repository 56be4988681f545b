// pair_order=adjacent: keys stored with each RoPE pair in neighbouring channels, as llama.cpp's
// converter stores a Llama model's (convert_hf_to_gguf.py, LlamaModel.permute).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

#include "kvtune/policy.h"
#include "kvtune/rope.h"
#include "kvtune/spec.h"
#include "test_support.h"

namespace kvtune {
namespace {

using testing::make_scheme;

// The reference: the inner scheme's round trip of the keys in llama.cpp's order, put back.
Matrix inner_on_reordered(const std::string& inner, const Matrix& x, const QuantContext& ctx) {
  Matrix moved(x.rows(), x.cols()), y(x.rows(), x.cols()), back(x.rows(), x.cols());
  for (int64_t r = 0; r < x.rows(); ++r) reorder_pairs(x.row(r), moved.row(r), x.cols(), true);
  make_scheme(inner)->roundtrip(moved, ctx, y);
  for (int64_t r = 0; r < x.rows(); ++r) reorder_pairs(y.row(r), back.row(r), x.cols(), false);
  return back;
}

// llama.cpp's permute(w, n_head): w.reshape(n_head, 2, D / 2, ...).swapaxes(1, 2): row 2i of a head
// is the checkpoint's row i, row 2i + 1 its row i + D/2.
TEST(PairOrder, ChannelsMoveAsLlamaCppsConverterPermutesKProj) {
  std::vector<float> x(8), pairs(8), back(8);
  std::iota(x.begin(), x.end(), 0.0f);
  reorder_pairs(x.data(), pairs.data(), 8, true);
  EXPECT_EQ(pairs, (std::vector<float>{0, 4, 1, 5, 2, 6, 3, 7}));
  reorder_pairs(pairs.data(), back.data(), 8, false);
  EXPECT_EQ(back, x);
}

// Tiles of rows (q4_0, rotated q4_0: rows round-trip alone) and the whole block (per-channel int),
// 300 rows so the last tile is partial.
TEST(PairOrder, KeysRoundTripAsTheInnerSchemeOnReorderedChannels) {
  const Matrix x = testing::normal_matrix(300, 128, 11);
  const QuantContext key{Role::key};
  for (const std::string inner : {"q4_0", "q4_0:rotation=hadamard", "int:bits=4,axis=channel"}) {
    const std::string spec = spec_with_param(inner, "pair_order", "adjacent");
    Matrix y(300, 128), via_packed(300, 128);
    const SchemePtr s = make_scheme(spec);
    s->roundtrip(x, key, y);
    EXPECT_EQ(y, inner_on_reordered(inner, x, key)) << spec;
    s->dequantize(s->quantize(x, key), key, via_packed);
    EXPECT_EQ(via_packed, y) << spec;
  }
}

TEST(PairOrder, TheCanonicalSpecPutsThePairOrderBetweenRotationAndTokens) {
  EXPECT_EQ(testing::canonical("q4_0:sink_tokens=4,pair_order=adjacent,rotation=hadamard"),
            "q4_0:rotation=hadamard,pair_order=adjacent,sink_tokens=4");
  EXPECT_EQ(testing::canonical("q8_0:pair_order=as_computed"), "q8_0");
  EXPECT_FALSE(make_scheme("q8_0:pair_order=adjacent")->traits().device_format);
}

// Values (the converter leaves v_proj alone) and keys whose case pairs 2i with 2i + 1 already.
TEST(PairOrder, ValuesAndInterleavedKeysAreStoredAsTheyCome) {
  const Matrix x = testing::normal_matrix(64, 128, 12);
  RopeConfig interleaved{true, 10000.0, RopeConvention::interleaved};
  const SchemePtr adjacent = make_scheme("q4_0:pair_order=adjacent"), plain = make_scheme("q4_0");
  for (const QuantContext ctx : {QuantContext{Role::value}, QuantContext{Role::key, {}, 0, &interleaved}}) {
    Matrix a(64, 128), b(64, 128);
    adjacent->roundtrip(x, ctx, a);
    plain->roundtrip(x, ctx, b);
    EXPECT_EQ(a, b);
  }
}

// One massive pair (channels 40 and 104 in the model's order) among 0.5s, by ggml's q4_0 formula:
// d = max / -8 = -12.5 in a block holding it, so 0.5 / d + 8.5 = 8.46 truncates to code 8, which
// decodes to 0 (an error of 0.5); in the other blocks d = -0.0625 and 0.5 is exact. The model's order
// puts the pair's halves in blocks 1 and 3 (62 elements lost), llama.cpp's both in block 2 (30).
TEST(PairOrder, AMassivePairCostsOneQ4_0BlockInsteadOfTwo) {
  Matrix x(2, 128, 0.5f);
  for (int64_t r = 0; r < 2; ++r) x(r, 40) = x(r, 104) = 100.0f;
  const auto squared_error = [&](const std::string& spec) {
    const Matrix y = testing::roundtrip(spec, x);
    double sum = 0;
    for (int64_t i = 0; i < x.size(); ++i) sum += double(y.data()[i] - x.data()[i]) * (y.data()[i] - x.data()[i]);
    return sum;
  };
  EXPECT_EQ(squared_error("q4_0"), 2 * 62 * 0.25);
  EXPECT_EQ(squared_error("q4_0:pair_order=adjacent"), 2 * 30 * 0.25);
}

// Sinks and append blocks around the pair order: the fused and packed paths agree.
TEST(PairOrder, UnderATokenPolicyTheFusedPathIsThePackedOne) {
  const Matrix x = testing::normal_matrix(100, 64, 14);
  const QuantContext key{Role::key};
  for (const std::string spec : {"q4_0:pair_order=adjacent,sink_tokens=4,block_tokens=32",
                                 "int:bits=4,axis=channel,pair_order=adjacent,residual_window=8,block_tokens=16"}) {
    const SchemePtr s = make_scheme(spec);
    Matrix fused(100, 64), via_packed(100, 64);
    s->roundtrip(x, key, fused);
    s->dequantize(s->quantize(x, key), key, via_packed);
    EXPECT_EQ(fused, via_packed) << spec;
  }
}

// A score estimator inside scores the queries in the keys' order: its logits are the inner
// scheme's on reordered keys and queries.
TEST(PairOrder, AScoreEstimatorScoresQueriesMovedWithTheKeys) {
  const Matrix k = testing::normal_matrix(20, 64, 15), q = testing::normal_matrix(3, 64, 16);
  Matrix k_moved(20, 64), q_moved(3, 64);
  for (int64_t r = 0; r < 20; ++r) reorder_pairs(k.row(r), k_moved.row(r), 64, true);
  for (int64_t r = 0; r < 3; ++r) reorder_pairs(q.row(r), q_moved.row(r), 64, true);
  const SchemePtr wrapped = make_scheme("qjl:sketch=24,norm=f32,seed=9,pair_order=adjacent");
  const SchemePtr inner = make_scheme("qjl:sketch=24,norm=f32,seed=9");
  ASSERT_TRUE(wrapped->estimates_logits());
  Matrix a(3, 20), b(3, 20);
  wrapped->logits(q, wrapped->quantize(k, {}), 20, {}, a);
  inner->logits(q_moved, inner->quantize(k_moved, {}), 20, {}, b);
  EXPECT_EQ(a, b);
}

// One scale over every element (a checkpoint's k_scale) is the same in any channel order.
TEST(PairOrder, AStaticScalePassesThrough) {
  const SchemePtr scaled = make_scheme("fp8:scale=calibrated,pair_order=adjacent")->with_static_scale(0.25);
  ASSERT_NE(scaled, nullptr);
  EXPECT_EQ(scaled->static_scale(), 0.25);
  EXPECT_EQ(scaled->spec(), make_scheme("fp8:scale=calibrated")->with_static_scale(0.25)->spec() + ",pair_order=adjacent");
}

TEST(PairOrder, AnOddHeadIsRefused) {
  EXPECT_THAT(make_scheme("int:bits=8,axis=token,pair_order=adjacent")->check_shape(16, 7),
              ::testing::HasSubstr("pair_order=adjacent needs an even head_dim (RoPE pairs); head_dim 7 is odd"));
}

}  // namespace
}  // namespace kvtune
