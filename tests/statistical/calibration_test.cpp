// Calibration as the tools do it (issue #15 item 4): on the recommend template's workload at 32k
// (sweeps/recommend.toml: llama-3.1-8b, layers 0/15/31), static FP8 scales fitted as the maximum
// over a calibration set of 4 fresh draws of 1024 tokens of every KV head of the layer
// (llm-compressor's static_minmax, per tensor) clip nothing the context holds: the result matches
// a scale fitted on the evaluated context itself (fp8 scale=dynamic per tensor, the oracle) and
// unit scale, while the single 1024-token draw of one head the template used before clips, which
// shows in attn_kl's tail.
//
// 48 cases (8 seeds x 3 layers x KV heads 0 and 4; 6 cases are a draw of luck: where the few keys
// that hold most of the attention, the sinks and the needles, fall within E4M3's binades decides
// them, the same for unit and any power-of-two scale). Measured with the llama3 RoPE scaling
// (seeds 0-7 / 8-15 / 16-23): rel_out_err unit 0.0860 / 0.0792 / 0.0770, set 0.0817 / 0.0764 /
// 0.0848, oracle 0.0823 / 0.0769 / 0.0797, single draw 0.0797 / 0.1001 / 0.0910; attn_kl p95 unit
// 0.0671 / 0.0697 / 0.0570, set 0.0641 / 0.0720 / 0.0580, oracle 0.0798 / 0.0537 / 0.0574, single
// draw 0.1020 / 0.1329 / 0.1204. The single draw's mean error is not reliably worse (0.975 of the
// set's on seeds 0-7), its tail is (1.6 to 2.1 times the set's attn_kl p95).
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

TEST(Calibration, ACalibrationSetClipsNothingAndMatchesUnitScaleAndTheOracle) {
  Scenario sc = template_scenario();
  ASSERT_EQ(sc.workload.tokens, 32768);
  ASSERT_EQ(sc.workload.calibration.samples, 4);
  ASSERT_EQ(sc.workload.calibration.granularity, CalibrationGranularity::layer);
  sc.seeds = {0, 1, 2, 3, 4, 5, 6, 7};
  sc.heads = {0, 4};
  sc.pairs = {{"unit", "fp8:format=e4m3,scale=unit", "fp8:format=e4m3,scale=unit", "test"},
              {"calibration set", "fp8:format=e4m3,scale=calibrated", "fp8:format=e4m3,scale=calibrated", "test"},
              {"oracle", "fp8:format=e4m3,scale=dynamic", "fp8:format=e4m3,scale=dynamic", "test"}};
  const EvalResult r = evaluate_scenario(sc, builtin_registry()).at(0);

  Scenario single = sc;  // the template before: one 1024-token draw of the case's own head
  single.workload.calibration = {1024, true, CalibrationSource::fresh};
  single.pairs = {sc.pairs[1]};
  const EvalResult s = evaluate_scenario(single, builtin_registry()).at(0);

  const Summary unit = summary(r, 0, Metric::rel_out_err), set = summary(r, 1, Metric::rel_out_err);
  const Summary oracle = summary(r, 2, Metric::rel_out_err), one = summary(s, 0, Metric::rel_out_err);
  ASSERT_EQ(unit.count, 48 * 4);  // 48 cases x 4 query heads per KV head
  const double unit_kl = summary(r, 0, Metric::attn_kl).p95, set_kl = summary(r, 1, Metric::attn_kl).p95;
  const double oracle_kl = summary(r, 2, Metric::attn_kl).p95, one_kl = summary(s, 0, Metric::attn_kl).p95;
  RecordProperty("rel_out_err_unit", std::to_string(unit.mean));
  RecordProperty("rel_out_err_calibration_set", std::to_string(set.mean));
  RecordProperty("rel_out_err_oracle", std::to_string(oracle.mean));
  RecordProperty("rel_out_err_single_draw", std::to_string(one.mean));
  RecordProperty("attn_kl_p95_unit", std::to_string(unit_kl));
  RecordProperty("attn_kl_p95_calibration_set", std::to_string(set_kl));
  RecordProperty("attn_kl_p95_oracle", std::to_string(oracle_kl));
  RecordProperty("attn_kl_p95_single_draw", std::to_string(one_kl));
  // Calibrated is as accurate as unit (neither clips): 0.95 of it on these seeds in rel_out_err,
  // 0.96 and 1.10 on seeds 8-15 and 16-23; 0.96, 1.03 and 1.02 in attn_kl p95.
  EXPECT_LE(set.mean, 1.1 * unit.mean);
  EXPECT_LE(set_kl, 1.1 * unit_kl);
  // The set sees the context's range: within 10 % of the oracle.
  EXPECT_LT(set.mean, 1.10 * oracle.mean);
  // The single short draw clips what the context holds, and it shows in the attention's tail.
  EXPECT_LT(set_kl, 0.8 * one_kl);
}

}  // namespace
}  // namespace kvtune
