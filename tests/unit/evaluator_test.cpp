// Reference attention, metric definitions, the separable K/V evaluation and thread independence.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <optional>
#include <sstream>

#include "kvtune/attention.h"
#include "kvtune/error.h"
#include "kvtune/evaluator.h"
#include "kvtune/npy.h"
#include "kvtune/scenario.h"
#include "test_support.h"

namespace kvtune {
namespace {

using testing::make_scheme;

TEST(Metrics, QuantileInterpolatesLikeNumpy) {
  const std::vector<double> v = {4, 1, 3, 2, 5};
  EXPECT_DOUBLE_EQ(quantile(v, 0.95), 4.8);  // numpy.percentile([1..5], 95) = 4.8
  EXPECT_DOUBLE_EQ(quantile(v, 0.5), 3.0);
  const Summary s = summarize(v);
  EXPECT_DOUBLE_EQ(s.mean, 3.0);
  EXPECT_DOUBLE_EQ(s.max, 5.0);
  EXPECT_EQ(s.count, 5u);
  EXPECT_EQ(summarize({}).count, 0u);
}

TEST(Attention, HandComputedSoftmax) {
  Matrix q(1, 4, 0.0f), k(2, 4, 0.0f);
  q(0, 0) = 2.0f;
  k(0, 0) = 1.0f;  // logit 2 * 1 / sqrt(4) = 1
  const AttentionScores s = attention_scores(q, k);
  EXPECT_DOUBLE_EQ(s.logits[0], 1.0);
  EXPECT_DOUBLE_EQ(s.logits[1], 0.0);
  EXPECT_NEAR(s.probs[0], std::exp(1.0) / (std::exp(1.0) + 1.0), 1e-15);
}

// Stores the keys as float32 and changes them on the way back (`alter`): a test's own key error.
class AlteredOnDequantize : public Scheme {
 public:
  explicit AlteredOnDequantize(std::string name) : name_(std::move(name)) {}
  std::string spec() const override { return name_; }
  std::string family() const override { return name_; }
  size_t footprint(int64_t t, int64_t d) const override { return size_t(t * d * 4); }
  std::vector<std::byte> quantize(ConstMatrixView x, const QuantContext&) const override {
    std::vector<std::byte> p(footprint(x.rows, x.cols));
    std::memcpy(p.data(), x.data, p.size());
    return p;
  }
  void dequantize(std::span<const std::byte> p, const QuantContext&, MatrixView out) const override {
    std::memcpy(out.data, p.data(), p.size());
    alter(out);
  }

 private:
  virtual void alter(MatrixView out) const = 0;
  std::string name_;
};

// Adds `shift` to channel 0 of every key: with the query along channel 0 every logit moves by the
// same amount, which softmax ignores.
class ShiftChannelZero final : public AlteredOnDequantize {
 public:
  explicit ShiftChannelZero(float shift) : AlteredOnDequantize("shift"), shift_(shift) {}

 private:
  void alter(MatrixView out) const override {
    for (int64_t r = 0; r < out.rows; ++r) out(r, 0) += shift_;
  }
  float shift_;
};

// Zeroes key row `row`: the ranking it leaves differs from the exact keys' wherever that row led.
class ZeroRow final : public AlteredOnDequantize {
 public:
  explicit ZeroRow(int64_t row) : AlteredOnDequantize("zero_row"), row_(row) {}

 private:
  void alter(MatrixView out) const override { std::fill(out.row(row_), out.row(row_) + out.cols, 0.0f); }
  int64_t row_;
};

// The evaluator's top1_agree and topk_overlap for keys through `scheme` against the same metrics
// from rankings computed here by a stable sort (probability descending, ties to the lower index).
void expect_ranks_of_a_stable_sort(const Case& c, const SchemePtr& scheme, int64_t topk, Precision precision) {
  EvalPlan plan{{scheme}, {make_scheme("f16")}, {{"p", 0, 0}}, topk};
  plan.precision = precision;
  const EvalResult r = evaluate(plan, 1, [&](size_t) { return c; });
  const int64_t t = c.keys.rows();
  Matrix kq(t, c.keys.cols());
  scheme->roundtrip(c.keys, {Role::key, c.positions, c.seed, &c.rope}, kq);
  AttentionScores ref, quant;
  attention_scores(c.queries, c.keys, ref, precision);
  attention_scores(c.queries, kq, quant, precision);
  auto top = [&](const double* p) {
    std::vector<int64_t> order(static_cast<size_t>(t));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    std::vector<int64_t> first(order.begin(), order.begin() + topk);
    std::sort(first.begin(), first.end());
    return std::pair{order[0], first};
  };
  for (int64_t i = 0; i < c.queries.rows(); ++i) {
    const auto [lead_r, top_r] = top(ref.prob_row(i));
    const auto [lead_q, top_q] = top(quant.prob_row(i));
    std::vector<int64_t> common;
    std::set_intersection(top_r.begin(), top_r.end(), top_q.begin(), top_q.end(), std::back_inserter(common));
    const std::string where = scheme->spec() + " k " + std::to_string(topk) + " query " + std::to_string(i);
    EXPECT_EQ(r.pairs[0].samples[size_t(Metric::topk_overlap)][size_t(i)], double(common.size()) / double(topk))
        << where;
    EXPECT_EQ(r.pairs[0].samples[size_t(Metric::top1_agree)][size_t(i)], lead_r == lead_q ? 1.0 : 0.0) << where;
  }
}

// Keys drawn from 13 distinct rows, so that nearly every probability is tied with others, the k-th
// among them; T = 1061 leaves a tail past every block of the evaluator's scan. Both precisions, k
// from 1 to past the number of distinct values.
TEST(Evaluator, TopRanksAreAStableSortsWithTiesToTheLowerIndex) {
  std::mt19937 rng(17);
  std::normal_distribution<float> normal;
  const int64_t t = 1061, d = 16;
  Matrix rows(13, d), k(t, d), v(t, d), q(3, d);
  for (int64_t i = 0; i < rows.size(); ++i) rows.data()[i] = normal(rng);
  for (int64_t j = 0; j < t; ++j) {
    const int64_t pick = (j * 7 + j / 13) % 13;
    for (int64_t e = 0; e < d; ++e) k(j, e) = rows(pick, e), v(j, e) = normal(rng);
  }
  for (int64_t i = 0; i < q.size(); ++i) q.data()[i] = 2.0f * normal(rng);
  const Case c = case_from_tensors(k, v, q);
  for (const Precision precision : {Precision::float64, Precision::float32}) {
    for (const int64_t topk : {int64_t(1), int64_t(5), int64_t(40), int64_t(300)}) {
      expect_ranks_of_a_stable_sort(c, make_scheme("int:bits=2,axis=token"), topk, precision);
    }
  }
}

// One key above all the others, at every position of 75 (each lane of the scan's blocks, the
// tail): the exact keys rank it first, the keys with its row zeroed do not.
TEST(Evaluator, TopRanksFindASingleLargerKeyAnywhere) {
  const int64_t t = 75;
  for (int64_t at = 1; at < t; ++at) {
    Matrix k(t, 4, 0.0f), v(t, 4, 1.0f), q(1, 4, 0.0f);
    q(0, 0) = 1.0f;
    k(at, 0) = 3.0f;
    const Case c = case_from_tensors(k, v, q);
    for (const int64_t topk : {int64_t(1), int64_t(3)}) {
      expect_ranks_of_a_stable_sort(c, std::make_shared<ZeroRow>(at), topk, Precision::float64);
    }
  }
}

TEST(Evaluator, AUniformLogitShiftOnlyMovesMaxLogitErr) {
  Matrix k(3, 4, 0.0f), v(3, 4, 0.0f), q(1, 4, 0.0f);
  q(0, 0) = 1.0f;
  k(0, 0) = 1.0f, k(1, 0) = 2.0f, k(2, 0) = 3.0f;
  v(0, 0) = 1.0f, v(1, 1) = 1.0f, v(2, 0) = -1.0f;
  const Case c = case_from_tensors(k, v, q);
  EvalPlan plan{{std::make_shared<ShiftChannelZero>(0.5f), make_scheme("f16")}, {make_scheme("f16")},
                {{"shifted", 0, 0}, {"exact", 1, 0}}, 2};
  const EvalResult r = evaluate(plan, 1, [&](size_t) { return c; });
  const PairResult& shifted = r.pairs[0];
  EXPECT_DOUBLE_EQ(shifted.summary(Metric::max_logit_err).mean, 0.5 / 2.0);  // 0.5 * q0 / sqrt(4)
  EXPECT_NEAR(shifted.summary(Metric::shift_logit_err).mean, 0.0, 1e-15);
  EXPECT_NEAR(shifted.summary(Metric::attn_kl).mean, 0.0, 1e-15);
  EXPECT_NEAR(shifted.summary(Metric::rel_out_err).mean, 0.0, 1e-15);
  EXPECT_EQ(shifted.summary(Metric::top1_agree).mean, 1.0);
  EXPECT_EQ(shifted.summary(Metric::needle_hit).count, 0u);  // no needles, no needle samples
  const PairResult& exact = r.pairs[1];  // f16 is exact on these values
  for (Metric m : {Metric::rel_out_err, Metric::max_logit_err, Metric::shift_logit_err, Metric::attn_kl}) {
    EXPECT_EQ(exact.summary(m).mean, 0.0) << metric_name(m);
  }
  EXPECT_EQ(exact.k_bits, 16.0);
  EXPECT_EQ(shifted.k_bits, 32.0);
}

TEST(Evaluator, SeparablePairsEqualDirectComputation) {
  WorkloadConfig cfg;
  cfg.tokens = 300;
  cfg.head_dim = 32;
  cfg.queries = 3;
  cfg.keys.outlier_channels = {1, 5};
  cfg.keys.outlier_scale = 10;
  cfg.needles.depths = {0.5};
  std::vector<PairRequest> req = {{"a", "int:bits=4,axis=channel", "int:bits=4,axis=token", ""},
                                  {"b", "int:bits=4,axis=channel", "int:bits=2,axis=token", ""},
                                  {"c", "int:bits=3", "int:bits=4,axis=token", ""}};
  const EvalPlan plan = build_plan(req, builtin_registry(), 8);
  EXPECT_EQ(plan.k_schemes.size(), 2u);  // each distinct K spec quantized once
  EXPECT_EQ(plan.v_schemes.size(), 2u);
  const EvalResult r = evaluate(plan, 2, [&](size_t i) { return generate_case(cfg, i); });
  // Pair b by hand on case 1, query 2.
  const Case c = generate_case(cfg, 1);
  Matrix kq(c.keys.rows(), c.keys.cols()), vq(c.values.rows(), c.values.cols());
  make_scheme("int:bits=4,axis=channel")->roundtrip(c.keys, {}, kq);
  make_scheme("int:bits=2,axis=token")->roundtrip(c.values, {}, vq);
  const AttentionScores ref = attention_scores(c.queries, c.keys);
  const AttentionScores got = attention_scores(c.queries, kq);
  const auto o_ref = attention_output(ref, c.values);
  const auto o = attention_output(got, vq);
  double num = 0, den = 0, max_logit = 0;
  for (int e = 0; e < 32; ++e) {
    num += (o[2 * 32 + e] - o_ref[2 * 32 + e]) * (o[2 * 32 + e] - o_ref[2 * 32 + e]);
    den += o_ref[2 * 32 + e] * o_ref[2 * 32 + e];
  }
  for (int64_t j = 0; j < 300; ++j) max_logit = std::max(max_logit, std::abs(got.logits[2 * 300 + j] - ref.logits[2 * 300 + j]));
  const PairResult& b = r.pairs[1];
  EXPECT_EQ(b.name, "b");
  ASSERT_EQ(b.samples[size_t(Metric::rel_out_err)].size(), 6u);  // 2 cases x 3 queries
  EXPECT_DOUBLE_EQ(b.samples[size_t(Metric::rel_out_err)][5], std::sqrt(num / den));
  EXPECT_DOUBLE_EQ(b.samples[size_t(Metric::max_logit_err)][5], max_logit);
  EXPECT_EQ(b.samples[size_t(Metric::needle_hit)].size(), 6u);
  // Pairs a and b share their K configuration, so their key metrics are identical.
  EXPECT_EQ(r.pairs[0].samples[size_t(Metric::attn_kl)], b.samples[size_t(Metric::attn_kl)]);
}

TEST(Evaluator, ResultsDoNotDependOnTheThreadCount) {
  WorkloadConfig cfg;
  cfg.tokens = 256;
  cfg.head_dim = 64;
  cfg.queries = 2;
  cfg.keys.outlier_count = 3;
  cfg.keys.outlier_scale = 15;
  cfg.rope.enabled = true;
  const EvalPlan plan = build_plan({{"", "int:bits=4,axis=channel,group=32,asym", "int:bits=3,axis=token", ""}},
                                   builtin_registry(), 8);
  auto source = [&](size_t i) { return generate_case(cfg, 100 + i); };
  const EvalResult one = evaluate(plan, 6, source, 1);
  const EvalResult two = evaluate(plan, 6, source, 2);
  for (size_t m = 0; m < kMetricCount; ++m) EXPECT_EQ(one.pairs[0].samples[m], two.pairs[0].samples[m]) << m;
}

// The article's experiment as PyTorch ran it: kvtune must print the same numbers to 4 significant
// digits on the same tensors.
TEST(Evaluator, ReproducesThePyTorchSeedExperiment) {
  Matrix k = read_npy(testing::data_path("seed-torch/K.npy")).values;
  Matrix v = read_npy(testing::data_path("seed-torch/V.npy")).values;
  Matrix q = read_npy(testing::data_path("seed-torch/q.npy")).values;
  const Case c = case_from_tensors(k, v, q);
  const EvalPlan plan = build_plan({{"K+V per-tensor", "int:bits=8,axis=tensor", "int:bits=8,axis=tensor", ""},
                                    {"K per-channel, V per-token", "int:bits=8,axis=channel", "int:bits=8,axis=token", ""},
                                    {"V per-token only", "none", "int:bits=8,axis=token", ""},
                                    {"K per-tensor only", "int:bits=8,axis=tensor", "none", ""}},
                                   builtin_registry(), 8);
  const EvalResult r = evaluate(plan, 1, [&](size_t) { return c; });
  std::ifstream expected(testing::data_path("seed-torch/expected.txt"));
  std::string line;
  size_t row = 0;
  while (std::getline(expected, line)) {
    const double out_err = std::stod(line.substr(line.find("rel_out_err=") + 12));
    const double logit_err = std::stod(line.substr(line.find("max_logit_err=") + 14));
    ASSERT_LT(row, r.pairs.size());
    EXPECT_NEAR(r.pairs[row].summary(Metric::rel_out_err).mean, out_err, 5e-4 * out_err) << line;
    EXPECT_NEAR(r.pairs[row].summary(Metric::max_logit_err).mean, logit_err, 5e-4 * logit_err + 1e-6) << line;
    ++row;
  }
  EXPECT_EQ(row, 4u);
}

}  // namespace
}  // namespace kvtune

namespace kvtune {
namespace {

// A finite tensor can still leave a scheme's range: f16 overflows above 65504. That is refused as
// bad input naming the scheme, the role and the element, never averaged into NaN metrics.
TEST(Evaluator, RefusesInputsBeyondTheSchemesRange) {
  Matrix k(4, 8, 1.0f), v(4, 8, 1.0f), q(1, 8, 1.0f);
  k(2, 3) = 1e5f;
  const Case c = case_from_tensors(k, v, q);
  const EvalPlan plan = build_plan({{"", "f16", "f16", ""}}, builtin_registry(), 2);
  try {
    evaluate(plan, 1, [&](size_t) { return c; });
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(std::string(e.what()), ::testing::HasSubstr("keys through 'f16' are not finite at [2, 3]"));
  }
}

TEST(Scenario, WorkloadErrorsNameTheFile) {
  const std::string toml = "seeds = 1\n[workload]\ntokens = 2\nhead_dim = 8\n[workload.sinks]\ncount = 1\n"
                           "[workload.needles]\ndepths = [0.5]\n[[pairs]]\nk = \"none\"\nv = \"none\"\n";
  try {
    parse_scenario(toml, "s.toml");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(std::string(e.what()), ::testing::HasSubstr("s.toml: [workload]: workload: 1 needle(s) per query need at least one more token"));
  }
}

// The calibration step: a case with a calibration sample is evaluated exactly as if every scheme
// had been calibrated on that sample beforehand.
TEST(Evaluator, CalibratesStaticScalesOnTheCaseSample) {
  WorkloadConfig cfg;
  cfg.tokens = 1024;
  cfg.head_dim = 64;
  cfg.queries = 4;
  cfg.keys.outlier_channels = {3, 17};
  cfg.keys.outlier_scale = 30.0;
  cfg.sinks = {2, 16.0, 0.1, 0.3};  // sink keys about 16x the median key norm
  cfg.calibration = {256, false, CalibrationSource::same};
  const Case c = generate_case(cfg, 3);
  const SchemePtr fp8 = make_scheme("fp8:format=e4m3,scale=calibrated");
  EvalPlan plan;
  plan.k_schemes = {fp8};
  plan.v_schemes = {fp8};
  plan.pairs = {{"cal", 0, 0}};
  const EvalResult with_step = evaluate(plan, 1, [&](size_t) { return c; }, 1);

  const QuantContext kctx{Role::key, c.calibration.positions, c.seed, &c.rope};
  const QuantContext vctx{Role::value, c.calibration.positions, c.seed, &c.rope};
  EvalPlan fitted = plan;
  fitted.k_schemes = {fp8->calibrate(c.calibration.keys, kctx)};
  fitted.v_schemes = {fp8->calibrate(c.calibration.values, vctx)};
  EXPECT_NE(fitted.k_schemes[0]->spec(), fp8->spec());  // a static scale was fitted
  Case plain = c;
  plain.calibration = {};
  const EvalResult by_hand = evaluate(fitted, 1, [&](size_t) { return plain; }, 1);
  for (size_t m = 0; m < kMetricCount; ++m) EXPECT_EQ(with_step.pairs[0].samples[m], by_hand.pairs[0].samples[m]) << m;

  // The window skipped the sinks, whose keys are far larger than anything in it: they clip, and
  // the result is worse than with the sinks in the calibration window.
  cfg.calibration.include_sinks = true;
  const Case seen = generate_case(cfg, 3);
  const EvalResult with_sinks = evaluate(plan, 1, [&](size_t) { return seen; }, 1);
  EXPECT_GT(with_step.pairs[0].summary(Metric::attn_kl).mean, 5 * with_sinks.pairs[0].summary(Metric::attn_kl).mean);
}

TEST(Scenario, ReadsLayersOverridesRecencyAndCalibration) {
  const std::string toml =
      "seeds = [4, 9]\n"
      "[workload]\n"
      "tokens = [512, 1024]\n"
      "head_dim = 64\n"
      "num_layers = 6\n"
      "kv_heads = 2\n"
      "q_per_kv = 4\n"
      "layers = [1, 5]\n"
      "[workload.keys]\n"
      "outlier_count = 2\n"
      "[workload.recency]\n"
      "strength = 3.0\n"
      "tokens = 64\n"
      "[workload.calibration]\n"
      "tokens = 128\n"
      "include_sinks = false\n"
      "source = \"fresh\"\n"
      "[workload.needles]\n"
      "depths = [0.5]\n"
      "per_query = 1\n"
      "[[workload.overrides]]\n"
      "layers = [5]\n"
      "keys = { outlier_channels = [1, 2, 3], outlier_scale = 40.0 }\n"
      "sinks = { count = 4, key_norm = 20.0 }\n"
      "[[pairs]]\nk = \"none\"\nv = \"none\"\n";
  const Scenario sc = parse_scenario(toml, "w.toml");
  EXPECT_EQ(sc.contexts, (std::vector<int64_t>{512, 1024}));
  EXPECT_EQ(sc.workload.tokens, 512);
  EXPECT_EQ(sc.workload.layers, 6);
  EXPECT_EQ(sc.workload.kv_heads, 2);
  EXPECT_EQ(sc.workload.q_per_kv, 4);
  EXPECT_EQ(sc.layers, (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(sc.heads, (std::vector<int64_t>{0, 1}));  // "all" by default
  EXPECT_EQ(sc.workload.recency.strength, 3.0);
  EXPECT_EQ(sc.workload.recency.tokens, 64.0);
  EXPECT_EQ(sc.workload.calibration.tokens, 128);
  EXPECT_FALSE(sc.workload.calibration.include_sinks);
  EXPECT_EQ(sc.workload.calibration.source, CalibrationSource::fresh);
  ASSERT_EQ(sc.workload.overrides.size(), 1u);
  const WorkloadConfig layer5 = layer_config(sc.workload, 5);
  EXPECT_EQ(layer5.keys.outlier_channels, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(layer5.keys.outlier_count, 0);
  EXPECT_EQ(layer5.keys.outlier_scale, 40.0);
  EXPECT_EQ(layer5.sinks.count, 4);
  EXPECT_EQ(layer5.sinks.key_norm, 20.0);
  EXPECT_EQ(layer_config(sc.workload, 1).sinks.count, 0);
  const std::vector<CaseKey> cases = scenario_cases(sc);
  ASSERT_EQ(cases.size(), 8u);  // 2 seeds x 2 layers x 2 heads, seed-major
  EXPECT_EQ(cases[0].seed, 4u);
  EXPECT_EQ(cases[3].layer, 5);
  EXPECT_EQ(cases[3].kv_head, 1);
  EXPECT_EQ(cases[4].seed, 9u);
  EXPECT_EQ(workload_at(sc, 1024).tokens, 1024);
}

// Each bad value is named at file:line:column with what was expected.
TEST(Scenario, RefusesBadLayersOverridesAndCalibration) {
  const auto error_of = [](const std::string& workload) {
    try {
      parse_scenario("[workload]\ntokens = 256\nhead_dim = 16\n" + workload + "[[pairs]]\nk = \"none\"\nv = \"none\"\n",
                     "b.toml");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  using ::testing::HasSubstr;
  EXPECT_THAT(error_of("num_layers = 4\nlayers = [0, 4]\n"), HasSubstr("b.toml:5:14: 'layers' entries must be integers in 0..3"));
  EXPECT_THAT(error_of("layers = \"some\"\n"), HasSubstr("b.toml:4:10: 'layers' must be \"all\" or an array"));
  // A float past int64's range where an integer belongs is refused, not converted (toml++'s own
  // conversion of it is undefined behaviour; fuzz/regressions/scenario keeps the input).
  EXPECT_THAT(error_of("num_layers = 4\nlayers = [0, 1.5e26]\n"), HasSubstr("b.toml:5:14: 'layers' entries must be integers in 0..3"));
  EXPECT_THAT(error_of("queries = -1.5e26\n"), HasSubstr("b.toml:4:11: 'queries' must be an integer in 1..65536"));
  EXPECT_THAT(error_of("num_layers = 4\nsliding_window = 64\nsliding_layers = [4]\n"),
              HasSubstr("b.toml:6:19: 'sliding_layers' entries must be integers in 0..3"));
  EXPECT_THAT(error_of("sliding_window = 64\n"),
              HasSubstr("b.toml:4:18: a sliding window of 64 tokens needs the layers that slide"));
  EXPECT_THAT(error_of("num_layers = 2\nsliding_layers = [0]\n"), HasSubstr("b.toml:5:18: a sliding window of 0 tokens"));
  EXPECT_THAT(error_of("num_layers = 4\nlayers = [1, 1]\n"), HasSubstr("b.toml:5:10: 'layers' lists 1 twice"));
  // A needle depth or a context given twice would be evaluated twice and weigh twice.
  EXPECT_THAT(error_of("[workload.needles]\ndepths = [0.5, 0.25, 0.5]\n"),
              HasSubstr("b.toml:5:22: 'depths' lists 0.5 twice"));
  try {
    parse_scenario("[workload]\ntokens = [256, 512, 256]\nhead_dim = 16\n[[pairs]]\nk = \"none\"\nv = \"none\"\n", "t.toml");
    ADD_FAILURE() << "a context given twice was accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("t.toml:2:10: 'tokens' lists 256 twice"));
  }
  EXPECT_THAT(error_of("num_layers = 2\n[[workload.overrides]]\nlayers = [2]\n"),
              HasSubstr("b.toml:6:11: 'layers' entries must be integers in 0..1"));
  EXPECT_THAT(error_of("[[workload.overrides]]\nlayers = [0]\nkeys = { outlier_scael = 3.0 }\n"),
              HasSubstr("unknown key 'outlier_scael' in [workload.overrides.keys]"));
  EXPECT_THAT(error_of("[[workload.overrides]]\nkeys = { outlier_scale = 3.0 }\n"),
              HasSubstr("missing key 'layers' in [workload.overrides]"));
  EXPECT_THAT(error_of("[workload.calibration]\nsource = \"fresh\"\n"),
              HasSubstr("b.toml:5:10: calibration needs 'tokens'"));
  EXPECT_THAT(error_of("[workload.calibration]\ntokens = 300\n"),
              HasSubstr("calibration tokens 300 exceed the context of 256 tokens"));
  EXPECT_THAT(error_of("[workload.calibration]\ntokens = 10\ninclude_sinks = \"no\"\n"),
              HasSubstr("b.toml:6:17: 'include_sinks' must be true or false"));
  EXPECT_THAT(error_of("model = \"llama-3.1-8b\"\n"), HasSubstr("b.toml:4:9: model presets are not available here"));
  EXPECT_THAT(error_of("[workload.needles]\ndepths = [0.5]\nper_query = 0\n"),
              HasSubstr("b.toml:6:13: 'per_query' must be an integer in 1..64"));
}

// A preset's sliding layers (Hugging Face's pattern) reach the workload: a case of a sliding layer
// holds its window, a global layer's the whole context; an explicit num_layers drops the rest.
TEST(Scenario, APresetsSlidingLayersReachTheWorkload) {
  ModelPreset toy;
  toy.name = "toy";
  toy.shape = {4, 1, 16, 64, 2};
  toy.q_heads = 1;
  toy.rope_theta = 10000.0;
  toy.sliding_window_pattern = 2;
  const ModelLookup models = [&](const std::string&) { return toy; };
  const std::string pairs = "[[pairs]]\nk = \"none\"\nv = \"none\"\n";
  const Scenario sc = parse_scenario("[workload]\nmodel = \"toy\"\ntokens = 256\nlayers = \"all\"\n" + pairs, "t.toml", models);
  EXPECT_EQ(sc.workload.sliding_window, 64);
  EXPECT_EQ(sc.workload.sliding_layers, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(scenario_case(sc, {0, 0, 0}, 256).keys.rows(), 64);
  EXPECT_EQ(scenario_case(sc, {0, 1, 0}, 256).keys.rows(), 256);
  const std::vector<EvalResult> r = evaluate_scenario(sc, builtin_registry());
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].tokens, 256);  // the longest case, whichever comes first
  const Scenario one = parse_scenario("[workload]\nmodel = \"toy\"\ntokens = 256\nnum_layers = 1\n" + pairs, "t.toml", models);
  EXPECT_EQ(one.workload.sliding_layers, (std::vector<int64_t>{0}));
}

// A preset's rope_scaling reaches the workload; [workload.rope.scaling] replaces it, and is checked
// key by key like the preset's.
TEST(Scenario, APresetsRopeScalingReachesTheWorkload) {
  ModelPreset toy;
  toy.name = "toy";
  toy.shape = {4, 1, 16, 0, 0};
  toy.q_heads = 1;
  toy.rope_theta = 500000.0;
  toy.rope_scaling = {RopeScalingType::llama3, 8.0, 1.0, 4.0, 8192.0};
  const ModelLookup models = [&](const std::string&) { return toy; };
  const std::string head = "[workload]\nmodel = \"toy\"\ntokens = 256\n";
  const std::string pairs = "[[pairs]]\nk = \"none\"\nv = \"none\"\n";
  EXPECT_EQ(parse_scenario(head + pairs, "t.toml", models).workload.rope.scaling, toy.rope_scaling);
  const Scenario linear = parse_scenario(
      head + "[workload.rope.scaling]\nrope_type = \"linear\"\nfactor = 2.0\n" + pairs, "t.toml", models);
  EXPECT_EQ(linear.workload.rope.scaling, (RopeScaling{RopeScalingType::linear, 2.0}));
  EXPECT_EQ(linear.workload.rope.theta, 500000.0);  // the preset's base stays
  try {
    parse_scenario(head + "[workload.rope.scaling]\nrope_type = \"dynamic\"\nfactor = 2.0\n" + pairs, "t.toml", models);
    ADD_FAILURE() << "an unmodelled rope_scaling type was accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("t.toml:5:13: 'rope_type' must be one of: default, linear, llama3"));
  }
  // "default" drops the preset's scaling.
  EXPECT_EQ(parse_scenario(head + "[workload.rope.scaling]\nrope_type = \"default\"\n" + pairs, "t.toml", models)
                .workload.rope.scaling.type,
            RopeScalingType::none);
}

// A preset's sliding RoPE base (Gemma 3's rope_local_base_freq) reaches the workload, and a sliding
// layer's case turns by it; [workload.rope] sliding_theta replaces it and needs sliding layers.
TEST(Scenario, APresetsSlidingRopeBaseReachesTheSlidingLayers) {
  ModelPreset toy;
  toy.name = "toy";
  toy.shape = {4, 1, 16, 64, 2};
  toy.q_heads = 1;
  toy.rope_theta = 1e6;
  toy.rope_scaling = {RopeScalingType::linear, 8.0};
  toy.sliding_window_pattern = 2;
  toy.sliding_rope_theta = 10000.0;
  const ModelLookup models = [&](const std::string&) { return toy; };
  const std::string head = "[workload]\nmodel = \"toy\"\ntokens = 256\nlayers = \"all\"\n";
  const std::string pairs = "[[pairs]]\nk = \"none\"\nv = \"none\"\n";
  const Scenario sc = parse_scenario(head + pairs, "t.toml", models);
  EXPECT_EQ(sc.workload.sliding_rope_theta, 10000.0);
  EXPECT_EQ(scenario_case(sc, {0, 0, 0}, 256).rope.theta, 10000.0);  // layer 0 slides
  EXPECT_EQ(scenario_case(sc, {0, 1, 0}, 256).rope.theta, 1e6);
  EXPECT_EQ(scenario_case(sc, {0, 1, 0}, 256).rope.scaling.type, RopeScalingType::linear);
  EXPECT_EQ(parse_scenario(head + "[workload.rope]\nsliding_theta = 20000.0\n" + pairs, "t.toml", models)
                .workload.sliding_rope_theta,
            20000.0);
  // A workload that turns the preset's sliding layers off drops their base (this read a null node).
  const Scenario none = parse_scenario(
      head + "sliding_window = 0\nsliding_layers = []\n[workload.rope]\ntheta = 20000.0\n" + pairs, "t.toml", models);
  EXPECT_EQ(none.workload.sliding_rope_theta, 0.0);
  EXPECT_EQ(scenario_case(none, {0, 0, 0}, 256).rope.theta, 20000.0);
  try {
    parse_scenario("[workload]\ntokens = 256\n[workload.rope]\nsliding_theta = 20000.0\n" + pairs, "t.toml", models);
    ADD_FAILURE() << "a sliding base without sliding layers was accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("t.toml:4:17: 'sliding_theta' is the sliding layers' RoPE base"));
  }
}

// A preset's logit softcap (Gemma 2's attn_logit_softcapping) reaches the workload and its cases;
// [workload] logit_softcap replaces it (0 turns it off) and is range-checked.
TEST(Scenario, APresetsLogitSoftcapReachesTheCases) {
  ModelPreset toy;
  toy.name = "toy";
  toy.shape = {2, 1, 16, 0, 0};
  toy.q_heads = 1;
  toy.rope_theta = 10000.0;
  toy.logit_softcap = 50.0;
  const ModelLookup models = [&](const std::string&) { return toy; };
  const std::string head = "[workload]\nmodel = \"toy\"\ntokens = 64\n";
  const std::string pairs = "[[pairs]]\nk = \"none\"\nv = \"none\"\n";
  const Scenario sc = parse_scenario(head + pairs, "t.toml", models);
  EXPECT_EQ(sc.workload.logit_softcap, 50.0);
  EXPECT_EQ(scenario_case(sc, {0, 0, 0}, 64).logit_softcap, 50.0);
  EXPECT_EQ(parse_scenario(head + "logit_softcap = 0\n" + pairs, "t.toml", models).workload.logit_softcap, 0.0);
  EXPECT_EQ(parse_scenario(head + "logit_softcap = 30.0\n" + pairs, "t.toml", models).workload.logit_softcap, 30.0);
  try {
    parse_scenario(head + "logit_softcap = -1\n" + pairs, "t.toml", models);
    ADD_FAILURE() << "a negative softcap was accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("t.toml:4:17: 'logit_softcap' must be a number in 0"));
  }
}

// An odd head_dim with RoPE on is refused at the key it came from; when the model preset gives it,
// [workload] has no head_dim key, and the error points at `model` (this dereferenced a null node).
TEST(Scenario, AnOddHeadDimWithRopeIsRefusedWhereverItCameFrom) {
  ModelPreset odd;
  odd.name = "odd";
  odd.shape = {4, 2, 63, 0, 0};
  odd.q_heads = 4;
  odd.rope_theta = 10000.0;
  const ModelLookup models = [&](const std::string&) { return odd; };
  const std::string pairs = "[[pairs]]\nk = \"f16\"\nv = \"f16\"\n";
  auto error_of = [&](const std::string& workload) {
    try {
      parse_scenario("[workload]\n" + workload + pairs, "o.toml", models);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  using ::testing::HasSubstr;
  EXPECT_THAT(error_of("model = \"odd\"\ntokens = 64\n"),
              HasSubstr("o.toml:2:9: RoPE needs an even head_dim, and it is 63"));
  EXPECT_THAT(error_of("tokens = 64\nhead_dim = 15\n[workload.rope]\nenabled = true\n"),
              HasSubstr("o.toml:4:1: RoPE needs an even head_dim, and it is 15"));
  EXPECT_EQ(error_of("model = \"odd\"\ntokens = 64\n[workload.rope]\nenabled = false\n"), "no error");
}

TEST(Scenario, RefusesWorkloadsTooLargeToHold) {
  const std::string toml = "[workload]\ntokens = 16000000\nhead_dim = 4096\n[[pairs]]\nk = \"none\"\nv = \"none\"\n";
  EXPECT_THROW(parse_scenario(toml, "big.toml"), InputError);
}

}  // namespace
}  // namespace kvtune

namespace kvtune {
namespace {

// Issue #13: quantize and simulate share one rule (require_finite_roundtrip). A block scheme
// overflows its whole block through the scale, so the message names the row's largest input (the
// culprit), and the file when the tensors came from one.
TEST(Evaluator, OutOfRangeErrorNamesTheFileAndTheValue) {
  Matrix k(4, 32, 1.0f), v(4, 32, 1.0f), q(1, 32, 1.0f);
  k(2, 5) = 1e38f;
  Case c = case_from_tensors(k, v, q);
  c.keys_file = "k.npy";
  c.values_file = "v.npy";
  const auto error_of = [&](const std::string& k_spec, const std::string& v_spec, const Case& cs) {
    try {
      evaluate(build_plan({{"", k_spec, v_spec, ""}}, builtin_registry(), 2), 1, [&](size_t) { return cs; });
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of("q8_0", "none", c),
            "k.npy: keys through 'q8_0' are not finite at [2, 0]: the input value 1e+38 at [2, 5] exceeds the "
            "scheme's range");
  EXPECT_EQ(error_of("f16", "none", c),
            "k.npy: keys through 'f16' are not finite at [2, 5]: the input value 1e+38 at [2, 5] exceeds the "
            "scheme's range");
  Case cv = case_from_tensors(v, k, q);  // the large value now in V
  cv.values_file = "big-v.npy";
  EXPECT_EQ(error_of("none", "f16", cv),
            "big-v.npy: values through 'f16' are not finite at [2, 5]: the input value 1e+38 at [2, 5] exceeds the "
            "scheme's range");
}

// The core rule itself, as `kvtune quantize` calls it on its round trip.
TEST(Evaluator, RequireFiniteRoundtripAcceptsFiniteOutput) {
  Matrix in(2, 4, 3.0f), out(2, 4, 3.0f);
  const SchemePtr f16 = make_scheme("f16");
  EXPECT_NO_THROW(require_finite_roundtrip(in, out, *f16, Role::value, "x.npy"));
  out(1, 2) = std::numeric_limits<float>::infinity();
  in(1, 0) = -7e4f;
  EXPECT_THROW(
      {
        try {
          require_finite_roundtrip(in, out, *f16, Role::value, "");
        } catch (const InputError& e) {
          EXPECT_STREQ(e.what(),
                       "values through 'f16' are not finite at [1, 2]: the input value -70000 at [1, 0] exceeds the "
                       "scheme's range");
          throw;
        }
      },
      InputError);
}

// A kernel-mode backend that has a fused kernel for f16 keys only; it declines everything else.
class DecliningKernelBackend final : public EvalBackend {
 public:
  std::string name() const override { return "fake-kernel"; }
  void roundtrip(const Scheme& scheme, ConstMatrixView x, const QuantContext& ctx, MatrixView out) const override {
    scheme.roundtrip(x, ctx, out);
  }
  bool fuses_attention() const override { return true; }
  std::string fused_attention_gap(const Scheme& k, const Scheme& v, int64_t head_dim) const override {
    if (k.spec() == "q4_0") return "";  // claims support but returns nothing (see fused_attention)
    return k.spec() == "f16" ? "" : "no device format for '" + k.spec() + "' (" + v.spec() + ", head_dim " +
                                          std::to_string(head_dim) + ")";
  }
  std::optional<std::vector<double>> fused_attention(const Scheme& k, const Scheme&, const Case& c) const override {
    if (k.spec() != "f16") return std::nullopt;
    return std::vector<double>(static_cast<size_t>(c.queries.rows() * c.values.cols()), 0.0);  // o = 0
  }
};

// Issue #13: a pair the fused kernel declines is labelled as the simulator's, with the reason, not
// reported under the kernel's name.
TEST(Evaluator, LabelsPairsTheFusedKernelDeclined) {
  const Matrix k = testing::normal_matrix(16, 32, 1), v = testing::normal_matrix(16, 32, 2),
               q = testing::normal_matrix(2, 32, 3);
  const Case c = case_from_tensors(k, v, q);
  EvalPlan plan = build_plan({{"fused", "f16", "f16", ""},
                              {"declined", "int:bits=4,axis=channel", "f16", ""},
                              {"silent", "q4_0", "f16", ""}},
                             builtin_registry(), 2);
  plan.backend = std::make_shared<DecliningKernelBackend>();
  const EvalResult r = evaluate(plan, 1, [&](size_t) { return c; });
  ASSERT_EQ(r.pairs.size(), 3u);
  EXPECT_EQ(r.backend, "fake-kernel");
  EXPECT_EQ(r.pairs[0].backend_used, "fake-kernel");
  EXPECT_EQ(r.pairs[0].kernel_vs_sim.size(), 2u);
  EXPECT_DOUBLE_EQ(r.pairs[0].summary(Metric::rel_out_err).mean, 1.0);  // the kernel's o = 0 counted
  EXPECT_EQ(r.pairs[1].backend_used,
            "cpu (no fused kernel for this pair: no device format for 'int:bits=4,axis=channel' (f16, head_dim 32))");
  EXPECT_TRUE(r.pairs[1].kernel_vs_sim.empty());
  EXPECT_LT(r.pairs[1].summary(Metric::rel_out_err).mean, 0.5);  // the simulator's product
  EXPECT_EQ(r.pairs[2].backend_used, "cpu (no fused kernel for this pair: the fake-kernel backend returned no output)");

  plan.backend = nullptr;  // the CPU backend labels every pair "cpu"
  for (const PairResult& p : evaluate(plan, 1, [&](size_t) { return c; }).pairs) EXPECT_EQ(p.backend_used, "cpu");
}

// A case with a logit softcap: no fused kernel applies one, so kernel mode labels every pair as the
// simulator's. The cap is 1-Lipschitz, so a capped case's max_logit_err never exceeds the uncapped
// one's, and a tight cap (2 against logits of a few units) makes it strictly smaller.
TEST(Evaluator, ASoftcappedCaseKeepsTheSimulatorsProductAndCapsLogitErrors) {
  const Matrix k = testing::normal_matrix(64, 32, 1, 3.0f), v = testing::normal_matrix(64, 32, 2),
               q = testing::normal_matrix(2, 32, 3, 3.0f);
  Case c = case_from_tensors(k, v, q);
  EvalPlan plan = build_plan({{"fused", "f16", "f16", ""}, {"q4", "q4_0", "q4_0", ""}}, builtin_registry(), 2);
  const EvalResult plain = evaluate(plan, 1, [&](size_t) { return c; });
  c.logit_softcap = 2.0;
  const EvalResult capped = evaluate(plan, 1, [&](size_t) { return c; });
  for (size_t p = 0; p < 2; ++p) {
    EXPECT_LE(capped.pairs[p].summary(Metric::max_logit_err).mean, plain.pairs[p].summary(Metric::max_logit_err).mean);
  }
  EXPECT_LT(capped.pairs[1].summary(Metric::max_logit_err).mean, 0.9 * plain.pairs[1].summary(Metric::max_logit_err).mean);
  plan.backend = std::make_shared<DecliningKernelBackend>();
  const EvalResult kernel = evaluate(plan, 1, [&](size_t) { return c; });
  EXPECT_EQ(kernel.pairs[0].backend_used,
            "cpu (no fused kernel for this pair: the fused kernel applies no logit softcap (the workload's "
            "logit_softcap))");
  EXPECT_TRUE(kernel.pairs[0].kernel_vs_sim.empty());
  EXPECT_EQ(kernel.pairs[0].summary(Metric::rel_out_err).mean, capped.pairs[0].summary(Metric::rel_out_err).mean);
}

// Issue #13: a repeated seed, layer or head would evaluate the same case twice and weigh it double.
TEST(Scenario, RefusesRepeatedSeedsLayersAndHeads) {
  const auto error_of = [](const std::string& top, const std::string& workload) {
    try {
      parse_scenario(top + "[workload]\ntokens = 64\nhead_dim = 16\nnum_layers = 4\nkv_heads = 4\n" + workload +
                         "[[pairs]]\nk = \"none\"\nv = \"none\"\n",
                     "d.toml");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of("seeds = [3, 1, 3]\n", ""), "d.toml:1:9: 'seeds' lists 3 twice");
  EXPECT_EQ(error_of("", "heads = [0, 2, 2]\n"), "d.toml:6:9: 'heads' lists 2 twice");
  EXPECT_EQ(error_of("", "layers = [3, 3]\n"), "d.toml:6:10: 'layers' lists 3 twice");
  EXPECT_EQ(error_of("", "[[workload.overrides]]\nlayers = [1, 1]\n"), "d.toml:7:10: 'layers' lists 1 twice");
  EXPECT_EQ(error_of("seeds = [3, 1]\n", "heads = [0, 2]\nlayers = [3, 1]\n"), "no error");
  // A count's last seed stays within 0..2^62, as an explicit seed must (2^62 + 1 had been accepted).
  EXPECT_EQ(error_of("seeds = 2\nseed_start = 4611686018427387903\n", ""), "no error");
  EXPECT_THAT(error_of("seeds = 2\nseed_start = 4611686018427387904\n", ""),
              ::testing::HasSubstr("d.toml:2:14: 'seed_start' must be an integer in 0..4611686018427387903"));
}

}  // namespace
}  // namespace kvtune
