// Layer exemptions (layer_exemption.h): the derived record of "a point with its most damaged
// sampled layers kept at the baseline dtype", checked against hand-computed mixes, the memory
// counted layer by layer for llama-3.1-70b, a runtime with a layer exemption recommending it when
// that is the cheapest way to meet the budget, the runtime table entries, and the sweep file keys.
#include "kvtune/layer_exemption.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include <filesystem>
#include <string>

#include "kvtune/error.h"
#include "kvtune/model_preset.h"
#include "kvtune/runtime_table.h"
#include "kvtune/sweep_analysis.h"
#include "kvtune/sweep_report.h"
#include "test_support.h"

namespace kvtune {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::KiB;

constexpr size_t kErr = size_t(Metric::rel_out_err), kTop1 = size_t(Metric::top1_agree);

LayerSummary layer(int64_t index, double mean, double p95, double max, size_t count = 4) {
  LayerSummary l;
  l.layer = index;
  l.metrics[kErr] = {mean, p95, max, count};
  l.metrics[kTop1] = {1.0 - mean, 1.0 - p95, 1.0, count};
  return l;
}

// A record whose overall metrics are those of its layers (means averaged, p95/max the largest).
SweepRecord layered_record(const std::string& k, const std::string& v, double k_bits, double v_bits,
                           std::vector<LayerSummary> layers) {
  SweepRecord r;
  r.k = k;
  r.v = v;
  r.origin = "search";
  r.k_bits = k_bits;
  r.v_bits = v_bits;
  double sum = 0.0, p95 = 0.0, max = 0.0;
  size_t count = 0;
  for (const LayerSummary& l : layers) {
    sum += l.metrics[kErr].mean * double(l.metrics[kErr].count);
    p95 = std::max(p95, l.metrics[kErr].p95);
    max = std::max(max, l.metrics[kErr].max);
    count += l.metrics[kErr].count;
  }
  r.metrics[kErr] = {sum / double(count), p95, max, count};
  r.metrics[kTop1] = {1.0 - sum / double(count), 1.0 - p95, 1.0, count};
  r.layers = std::move(layers);
  return r;
}

// Layer 0 is the damaged one; the baseline (f16) barely errs anywhere.
SweepRecord damaged_q4() {
  return layered_record("q4_0", "q4_0", 4.5, 4.5, {layer(0, 0.4, 0.5, 0.6), layer(1, 0.1, 0.15, 0.2)});
}
SweepRecord baseline() {
  return layered_record("f16", "f16", 16, 16, {layer(0, 0.01, 0.02, 0.03), layer(1, 0.01, 0.02, 0.03)});
}

TEST(LayerExemption, WithEveryLayerSampledTheExemptLayerIsTheBaselinesOwn) {
  const SweepRecord r = exempt_record(damaged_q4(), baseline(), {0}, /*model_layers=*/2, "f16");
  EXPECT_THAT(r.exempt_layers, ElementsAre(0));
  EXPECT_EQ(r.exempt, "f16");
  EXPECT_TRUE(r.derived());
  // Layer 0 is f16's: 0.01 over 4 samples; layer 1 stays 0.1. Mean (4*0.01 + 4*0.1) / 8.
  EXPECT_DOUBLE_EQ(r.metrics[kErr].mean, 0.055);
  EXPECT_EQ(r.metrics[kErr].count, 8u);
  EXPECT_DOUBLE_EQ(r.metrics[kErr].p95, 0.15);  // the largest per-layer p95: layer 1's
  EXPECT_DOUBLE_EQ(r.metrics[kErr].max, 0.2);
  EXPECT_DOUBLE_EQ(r.layers[0].metrics[kErr].mean, 0.01);
  // One of two layers at 16 bits: (4.5 + 16) / 2.
  EXPECT_DOUBLE_EQ(r.k_bits, 10.25);
  EXPECT_DOUBLE_EQ(r.v_bits, 10.25);
  EXPECT_THAT(r.origin, HasSubstr("layers 0 kept at f16"));
}

TEST(LayerExemption, ASparseSampleCountsTheGainForTheOneExemptModelLayer) {
  // 8 model layers, 2 sampled: each stands for 4, so exempting layer 0 changes a quarter of it.
  const SweepRecord r = exempt_record(damaged_q4(), baseline(), {0}, /*model_layers=*/8, "f16");
  EXPECT_DOUBLE_EQ(r.layers[0].metrics[kErr].mean, 0.25 * 0.01 + 0.75 * 0.4);  // 0.3025
  EXPECT_DOUBLE_EQ(r.metrics[kErr].mean, (0.3025 + 0.1) / 2);
  EXPECT_DOUBLE_EQ(r.layers[0].metrics[kErr].p95, 0.5);  // bound: the larger of the two p95s
  EXPECT_DOUBLE_EQ(r.k_bits, (7 * 4.5 + 16) / 8);         // 5.9375
}

TEST(LayerExemption, AHigherIsBetterMetricTakesTheLowerP95AsItsBound) {
  const SweepRecord r = exempt_record(damaged_q4(), baseline(), {0}, /*model_layers=*/8, "f16");
  // top1_agree p95: layer 0 mixes 0.5 (q4_0) and 0.98 (f16): the bound is 0.5; layer 1 is 0.85.
  EXPECT_DOUBLE_EQ(r.layers[0].metrics[kTop1].p95, 0.5);
  EXPECT_DOUBLE_EQ(r.metrics[kTop1].p95, 0.5);
  EXPECT_DOUBLE_EQ(r.layers[0].metrics[kTop1].mean, 0.25 * 0.99 + 0.75 * 0.6);
}

// A derived record's intervals read without their cases (older files): each layer's mean interval
// mixed end by end with the baseline's, the whole record's the count-weighted ends, p95 the worse
// ends; a rate gets the Wilson interval of its mixed rate over all its samples.
// With the cases kept, a derived record's mean interval is found like any other: over its cases,
// each exempt layer's mixed case by case with the baseline's (1/4 of the stratum's 4 model layers).
TEST(LayerExemption, DerivedMeanIntervalsComeFromTheMixedCases) {
  auto with_cases = [](SweepRecord r, double spread) {
    for (LayerSummary& l : r.layers) {
      Summary& s = l.metrics[kErr];
      s.level = 0.95;
      s.mean_ci = {s.mean - 0.05, s.mean + 0.05};
      s.p95_ci = {s.p95 - 0.01, s.p95 + 0.01};
      s.mean_method = IntervalMethod::t_cases;
      s.p95_method = IntervalMethod::bootstrap_cases;
      s.cases = {{s.mean - spread, s.count / 2}, {s.mean + spread, s.count - s.count / 2}};
    }
    return r;
  };
  const SweepRecord q4 = with_cases(damaged_q4(), 0.02), f16 = with_cases(baseline(), 0.004);
  const SweepRecord r = exempt_record(q4, f16, {0}, 8, "f16");
  const Summary& l0 = r.layers[0].metrics[kErr];
  EXPECT_EQ(l0.mean_method, IntervalMethod::t_cases);
  ASSERT_EQ(l0.cases.size(), 2u);
  const Summary &q0 = q4.layers[0].metrics[kErr], &f0 = f16.layers[0].metrics[kErr];
  EXPECT_DOUBLE_EQ(l0.cases[0].mean, 0.25 * f0.cases[0].mean + 0.75 * q0.cases[0].mean);
  EXPECT_DOUBLE_EQ(l0.cases[1].mean, 0.25 * f0.cases[1].mean + 0.75 * q0.cases[1].mean);
  const Summary& all = r.metrics[kErr];
  EXPECT_EQ(all.mean_method, IntervalMethod::t_cases);
  ASSERT_EQ(all.cases.size(), 4u);  // layer 0's mixed cases, then layer 1's as they were
  EXPECT_EQ(all.cases[2], q4.layers[1].metrics[kErr].cases[0]);
  Summary expected;
  mean_interval_over_cases(all.cases, 0.95, false, std::numeric_limits<double>::infinity(), expected);
  EXPECT_EQ(all.mean_ci.lo, expected.mean_ci.lo);
  EXPECT_EQ(all.mean_ci.hi, expected.mean_ci.hi);
  EXPECT_EQ(all.p95_method, IntervalMethod::mixture_bound);  // p95 has no cases to mix: the worse ends
}

TEST(LayerExemption, DerivedIntervalsAreMixtureBoundsAndWilsonForRates) {
  auto with_intervals = [](SweepRecord r) {
    for (LayerSummary& l : r.layers) {
      for (size_t m : {kErr, kTop1}) {
        Summary& s = l.metrics[m];
        s.level = 0.95;
        s.mean_ci = {s.mean - 0.01, s.mean + 0.02};
        s.p95_ci = {s.p95 - 0.01, s.p95 + 0.01};
        s.mean_method = s.p95_method = IntervalMethod::bootstrap_cases;
      }
    }
    return r;
  };
  const SweepRecord r = exempt_record(with_intervals(damaged_q4()), with_intervals(baseline()), {0}, 8, "f16");
  const Summary& l0 = r.layers[0].metrics[kErr];
  EXPECT_EQ(l0.mean_method, IntervalMethod::mixture_bound);
  EXPECT_DOUBLE_EQ(l0.mean_ci.lo, 0.25 * 0.00 + 0.75 * 0.39);
  EXPECT_DOUBLE_EQ(l0.mean_ci.hi, 0.25 * 0.03 + 0.75 * 0.42);
  EXPECT_DOUBLE_EQ(l0.p95_ci.lo, 0.49);  // the larger (worse) of 0.01 and 0.49
  EXPECT_DOUBLE_EQ(l0.p95_ci.hi, 0.51);
  const Summary& all = r.metrics[kErr];
  EXPECT_EQ(all.mean_method, IntervalMethod::mixture_bound);
  EXPECT_DOUBLE_EQ(all.mean_ci.lo, 0.5 * l0.mean_ci.lo + 0.5 * 0.09);
  EXPECT_DOUBLE_EQ(all.mean_ci.hi, 0.5 * l0.mean_ci.hi + 0.5 * 0.12);
  const Summary& top1 = r.metrics[kTop1];
  EXPECT_EQ(top1.mean_method, IntervalMethod::wilson);
  const Interval w = wilson_interval(top1.mean * 8, 8, 0.95);
  EXPECT_DOUBLE_EQ(top1.mean_ci.lo, w.lo);
  EXPECT_DOUBLE_EQ(top1.mean_ci.hi, w.hi);
  EXPECT_EQ(top1.p95_method, IntervalMethod::mixture_bound);
  // Without intervals in the parts, none in the mix.
  EXPECT_FALSE(exempt_record(damaged_q4(), baseline(), {0}, 8, "f16").metrics[kErr].has_intervals());
}

TEST(LayerExemption, TheMostDamagedLayersRankByTheMetricsDirection) {
  const SweepRecord r = layered_record(
      "q4_0", "q4_0", 4.5, 4.5,
      {layer(0, 0.1, 0.1, 0.1), layer(15, 0.3, 0.3, 0.3), layer(31, 0.2, 0.2, 0.2), layer(40, 0.3, 0.3, 0.3)});
  EXPECT_THAT(most_damaged_layers(r, Metric::rel_out_err, 1), ElementsAre(15));  // a tie keeps layer order
  EXPECT_THAT(most_damaged_layers(r, Metric::rel_out_err, 2), ElementsAre(15, 40));
  EXPECT_THAT(most_damaged_layers(r, Metric::rel_out_err, 3), ElementsAre(15, 31, 40));
  EXPECT_THAT(most_damaged_layers(r, Metric::rel_out_err, 4), IsEmpty());  // one must stay quantized
  // top1_agree is higher-is-better: the lowest agreement (1 - 0.3) is the most damaged.
  EXPECT_THAT(most_damaged_layers(r, Metric::top1_agree, 1), ElementsAre(15));
  SweepRecord none = r;
  none.layers.clear();
  EXPECT_THAT(most_damaged_layers(none, Metric::rel_out_err, 1), IsEmpty());
}

SweepSpec two_layer_spec(const std::vector<SweepRecord>& records) {
  SweepSpec spec;
  spec.name = "unit";
  spec.source = "unit.toml";
  spec.scenario.contexts = {4096};
  spec.scenario.workload.tokens = 4096;
  spec.scenario.workload.layers = 2;
  spec.scenario.layers = {0, 1};
  spec.exemption.counts = {1};
  spec.exemption.spec = "f16";
  for (const SweepRecord& r : records) spec.points.push_back({r.k, r.v, r.origin});
  spec.registry = std::shared_ptr<const Registry>(std::shared_ptr<const Registry>(), &builtin_registry());
  return spec;
}

TEST(LayerExemption, EveryOkEvaluatedRecordGetsItsDerivedRecordsOnlyWithABaseline) {
  SweepRecord failed;
  failed.k = failed.v = "q5_0";
  failed.ok = false;
  const std::vector<SweepRecord> records = {damaged_q4(), baseline(), failed};
  const SweepSpec spec = two_layer_spec(records);
  const std::vector<SweepRecord> all = with_layer_exemptions(spec, records);
  ASSERT_EQ(all.size(), 4u);  // only q4_0 derives one: not the baseline, not the failed point
  EXPECT_THAT(all[3].exempt_layers, ElementsAre(0));
  EXPECT_EQ(all[3].k, "q4_0");
  // Without the baseline's record, or without exempt_layers, nothing is derived.
  EXPECT_EQ(with_layer_exemptions(spec, {damaged_q4()}).size(), 1u);
  SweepSpec off = spec;
  off.exemption.counts.clear();
  EXPECT_EQ(with_layer_exemptions(off, records).size(), 3u);
}

TEST(LayerExemption, MemoryCountsEachLayerWithItsOwnStorageForLlama70b) {
  // llama-3.1-70b: 80 layers x 8 KV heads x 128. q8_0/q4_0 is 130 KiB per token (1.625 KiB per layer),
  // f16/f16 320 KiB (4 KiB per layer): two exempt layers make 78 * 1.625 + 2 * 4 = 134.75 KiB.
  SweepRecord q = layered_record("q8_0", "q4_0", 8.5, 4.5, {layer(0, 0.4, 0.5, 0.6), layer(79, 0.1, 0.15, 0.2)});
  SweepRecord f = layered_record("f16", "f16", 16, 16, {layer(0, 0.01, 0.02, 0.03), layer(79, 0.01, 0.02, 0.03)});
  SweepRecord d = exempt_record(q, f, {0, 79}, 80, "f16");
  SweepSpec spec = two_layer_spec({q, f});
  spec.model = find_model_preset(testing::config_dir(), "llama-3.1-70b");
  spec.scenario.layers = {0, 79};
  const SweepAnalysis a = analyze_sweep(spec, {q, f, d});
  ASSERT_TRUE(a.verdicts[2].memory);
  EXPECT_DOUBLE_EQ(a.verdicts[2].memory->bytes_per_token, 134.75 * KiB);
  EXPECT_EQ(a.verdicts[2].memory->total_bytes, uint64_t(134.75 * KiB) * 4096);
  EXPECT_DOUBLE_EQ(a.verdicts[2].memory->k_bits, (78 * 8.5 + 2 * 16) / 80.0);
}

RuntimeOption table_option(const std::string& name, const std::string& k, const std::string& v) {
  RuntimeOption o;
  o.name = name;
  o.k_spec = k;
  o.v_spec = v;
  o.settings.cli = {"--kv " + name};
  return o;
}

TEST(LayerExemption, ARuntimeRecommendsTheExemptionWhenItIsTheCheapestWayToMeetTheBudget) {
  const std::vector<SweepRecord> evaluated = {
      damaged_q4(), baseline(),
      layered_record("q8_0", "q8_0", 8.5, 8.5, {layer(0, 0.04, 0.05, 0.06), layer(1, 0.04, 0.05, 0.06)})};
  SweepSpec spec = two_layer_spec(evaluated);
  spec.budget.terms = {{Metric::rel_out_err, Statistic::mean, BoundKind::at_most, 0.06}};
  RuntimeView view;
  view.title = "RT";
  view.version = "1.0";
  view.options = {table_option("q4", "q4_0", "q4_0"), table_option("q8", "q8_0", "q8_0"),
                  table_option("f16", "f16", "f16")};
  RuntimeOption exemption;
  exemption.name = "--skip";
  exemption.k_spec = exemption.v_spec = "f16";
  exemption.settings.cli = {"--skip {layers_space}"};
  exemption.settings.caveats = {"exempt layers keep f16"};
  exemption.settings.verified = false;
  view.layer_exemption = exemption;
  spec.runtimes = {{"rt", "1.0"}};
  spec.runtime_views = {view};

  const std::vector<SweepRecord> records = with_layer_exemptions(spec, evaluated);
  const SweepAnalysis a = analyze_sweep(spec, records);
  // q4_0 (0.25) fails, q8_0 (0.04, 8.5 bits) passes, q4_0 with layer 0 at f16 (0.055, 10.25 bits)
  // passes but costs more: q8_0 wins.
  ASSERT_EQ(a.runtimes.size(), 1u);
  ASSERT_TRUE(a.runtimes[0].option);
  EXPECT_EQ(a.runtimes[0].option->name, "q8");
  // No row of its damage-per-layer table is exempt, so the footnote on exempt layers is left out.
  EXPECT_THAT(sweep_report_md(spec, records, a), ::testing::Not(HasSubstr("an exempt layer")));

  // Without q8_0 the exemption is the only way: recommended with the flag filled in.
  view.options = {table_option("q4", "q4_0", "q4_0"), table_option("f16", "f16", "f16")};
  spec.runtime_views = {view};
  const SweepAnalysis b = analyze_sweep(spec, records);
  ASSERT_TRUE(b.runtimes[0].option);
  const RuntimeOption& o = *b.runtimes[0].option;
  EXPECT_EQ(o.name, "q4 + layers 0 kept at f16 (--skip)");
  EXPECT_THAT(o.settings.cli, ElementsAre("--kv q4", "--skip 0"));
  EXPECT_THAT(o.settings.caveats, ElementsAre("exempt layers keep f16"));
  EXPECT_FALSE(o.settings.verified);
  EXPECT_THAT(records[*b.runtimes[0].record].exempt_layers, ElementsAre(0));
  const std::string md = sweep_report_md(spec, records, b);
  EXPECT_THAT(md, HasSubstr("## Damage per layer"));
  EXPECT_THAT(md, HasSubstr("| `RT` | `q4_0` | `q4_0` | 0.01\\* | 0.1 |"));  // layer 0 exempt, marked
  EXPECT_THAT(md, HasSubstr("an exempt layer (kept at f16 for one model layer of the"));
  EXPECT_THAT(md, ::testing::Not(HasSubstr("with sliding\\_window")));
  EXPECT_THAT(md, HasSubstr("3 of 3 points evaluated, 0 failed, 2 feasible; 2 layer exemptions derived, 2 feasible"));
}

TEST(LayerExemption, OptionsFillEveryPlaceholderSpelling) {
  RuntimeOption exemption;
  exemption.name = "skip";
  exemption.k_spec = exemption.v_spec = "bf16";
  exemption.settings.cli = {"--a {layers}", "--b {layers_space}"};
  exemption.settings.python = "skip=[{layers_quoted}]";
  RuntimeOption x = table_option("x", "q4_0", "q4_0");
  x.settings.python = "f(kv=\"x\")";
  const RuntimeOption o = with_exempt_layers(x, exemption, {0, 31});
  EXPECT_THAT(o.settings.cli, ElementsAre("--kv x", "--a 0,31", "--b 0 31"));
  // One call with both keywords: the exemption's alone would configure no cache type.
  EXPECT_EQ(o.settings.python, "f(kv=\"x\", skip=[\"0\", \"31\"])");
  EXPECT_EQ(with_exempt_layers(table_option("y", "q4_0", "q4_0"), exemption, {0}).settings.python, "");
}

// Gemma 2 9B's sliding-window layers (the even ones) kept at f16, as vLLM's
// --kv-cache-dtype-skip-layers sliding_window does: a sampled sliding layer takes the baseline's
// summaries whole, bits weigh 21 of 42 layers at 16, and memory counts the sliding layers at f16
// over their 4096-token window: at 8192 tokens, per token and layer, q8_0/q4_0 stores
// 8 x 256 x (8.5 + 4.5) / 8 = 3328 bytes and f16 8192, so 21 x 8192 x 3328 + 21 x 4096 x 8192.
TEST(LayerExemption, SlidingWindowLayersKeptAtTheBaselineForGemma2) {
  const SweepRecord q = layered_record("q8_0", "q4_0", 8.5, 4.5, {layer(0, 0.4, 0.5, 0.6), layer(1, 0.1, 0.15, 0.2)});
  const SweepRecord f = layered_record("f16", "f16", 16, 16, {layer(0, 0.01, 0.02, 0.03), layer(1, 0.01, 0.02, 0.03)});
  SweepSpec spec = two_layer_spec({q, f});
  spec.model = find_model_preset(testing::config_dir(), "gemma-2-9b");
  spec.scenario.contexts = {8192};
  spec.scenario.workload.tokens = 8192;
  spec.scenario.workload.layers = 42;
  spec.scenario.workload.sliding_window = 4096;
  spec.scenario.workload.sliding_layers = sliding_layer_indices(*spec.model);
  spec.exemption.counts.clear();
  spec.exemption.sliding_window = true;

  const std::vector<SweepRecord> all = with_layer_exemptions(spec, {q, f});
  ASSERT_EQ(all.size(), 3u);
  const SweepRecord& d = all[2];
  EXPECT_EQ(d.exempt_pattern, "sliding_window");
  EXPECT_THAT(d.exempt_layers, ElementsAre(0));
  EXPECT_EQ(exempt_layers_text(d), "sliding_window (sampled: 0)");
  EXPECT_DOUBLE_EQ(d.layers[0].metrics[kErr].mean, 0.01);  // the whole of layer 0's kind is exempt
  EXPECT_DOUBLE_EQ(d.layers[1].metrics[kErr].mean, 0.1);
  EXPECT_DOUBLE_EQ(d.metrics[kErr].mean, 0.055);
  EXPECT_DOUBLE_EQ(d.k_bits, (21 * 8.5 + 21 * 16) / 42.0);
  EXPECT_DOUBLE_EQ(d.v_bits, (21 * 4.5 + 21 * 16) / 42.0);

  const SweepAnalysis a = analyze_sweep(spec, all);
  ASSERT_TRUE(a.verdicts[2].memory);
  EXPECT_EQ(a.verdicts[2].memory->total_bytes, 21ull * 8192 * 3328 + 21ull * 4096 * 8192);

  // Nothing is derived where no sampled layer slides, or where every one does.
  SweepSpec global = spec;
  global.scenario.workload.sliding_layers = {2, 4};
  EXPECT_EQ(with_layer_exemptions(global, {q, f}).size(), 2u);
  global.scenario.workload.sliding_layers = {0, 1};
  EXPECT_EQ(with_layer_exemptions(global, {q, f}).size(), 2u);

  // A runtime that takes the attention-type name writes it; one that takes indices lists the
  // model's sliding layers (not only the sampled ones).
  RuntimeOption exemption;
  exemption.name = "--skip";
  exemption.k_spec = exemption.v_spec = "f16";
  exemption.settings.cli = {"--skip {layers_space}"};
  exemption.settings.python = "skip=[{layers_quoted}]";
  exemption.attention_types = {"sliding_window"};
  RuntimeOption q8q4 = table_option("q", "q8_0", "q4_0");
  q8q4.settings.python = "f(kv=\"q\")";
  const RuntimeOption named = with_exempt_attention_type(q8q4, exemption, "sliding_window");
  EXPECT_EQ(named.name, "q + sliding_window layers kept at f16 (--skip)");
  EXPECT_THAT(named.settings.cli, ElementsAre("--kv q", "--skip sliding_window"));
  EXPECT_EQ(named.settings.python, "f(kv=\"q\", skip=[\"sliding_window\"])");
  spec.budget.terms = {{Metric::rel_out_err, Statistic::mean, BoundKind::at_most, 0.06}};
  RuntimeView view;
  view.title = "RT";
  view.version = "1.0";
  view.options = {table_option("q", "q8_0", "q4_0"), table_option("f16", "f16", "f16")};
  view.layer_exemption = exemption;
  spec.runtimes = {{"rt", "1.0"}};
  spec.runtime_views = {view};
  const SweepAnalysis named_pick = analyze_sweep(spec, all);
  ASSERT_TRUE(named_pick.runtimes[0].option);
  EXPECT_THAT(named_pick.runtimes[0].option->settings.cli, ElementsAre("--kv q", "--skip sliding_window"));
  const std::string md = sweep_report_md(spec, all, named_pick);
  EXPECT_THAT(md, HasSubstr("with sliding\\_window: a sampled sliding-window layer, kept at f16 with every sliding"));
  EXPECT_THAT(md, ::testing::Not(HasSubstr("an exempt layer")));
  view.layer_exemption->attention_types.clear();
  spec.runtime_views = {view};
  const SweepAnalysis indexed = analyze_sweep(spec, all);
  ASSERT_TRUE(indexed.runtimes[0].option);
  EXPECT_THAT(indexed.runtimes[0].option->settings.cli,
              ElementsAre("--kv q", "--skip 0 2 4 6 8 10 12 14 16 18 20 22 24 26 28 30 32 34 36 38 40"));
}

const char* kTable = R"(
name = "RT"
source = "https://example.org"
version_scheme = "semver"
kv_independent = false
oldest = "1.0"
checked = "2.0"
[[options]]
name = "q4"
k = "q4_0"
v = "q4_0"
cli = ["--kv q4"]
[[layer_exemptions]]
name = "--skip"
spec = "bf16"
cli = ["--skip {layers_space}"]
since = "1.5"
)";

TEST(LayerExemption, ATablesExemptionIsVersionedLikeItsOptions) {
  const RuntimeTable t = parse_runtime_table(kTable, "rt.toml", "rt", builtin_registry());
  ASSERT_EQ(t.layer_exemptions.size(), 1u);
  EXPECT_FALSE(runtime_options(t, "1.4").layer_exemption);
  const RuntimeView v = runtime_options(t, "1.5");
  ASSERT_TRUE(v.layer_exemption);
  EXPECT_EQ(v.layer_exemption->k_spec, "bf16");
  EXPECT_EQ(v.layer_exemption->name, "--skip");
}

TEST(LayerExemption, ATableExemptionWithoutAPlaceholderIsRefusedWithItsPosition) {
  std::string text = kTable;
  text.replace(text.find("--skip {layers_space}"), std::string("--skip {layers_space}").size(), "--skip 0");
  try {
    parse_runtime_table(text, "rt.toml", "rt", builtin_registry());
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("rt.toml:13:1"));
    EXPECT_THAT(e.what(), HasSubstr("needs {layers}, {layers_space} or {layers_quoted}"));
  }
}

// An exemption's python is keyword arguments for the option's call; a second call in its place, or
// an option snippet without a closing parenthesis to put them before, is refused where it stands.
TEST(LayerExemption, ATablesExemptionPythonIsKeywordsForTheOptionsCall) {
  std::string text = kTable;
  text += "python = \"skip=[{layers_quoted}]\"\n";
  EXPECT_EQ(runtime_options(parse_runtime_table(text, "rt.toml", "rt", builtin_registry()), "1.5")
                .layer_exemption->settings.python,
            "skip=[{layers_quoted}]");
  std::string call = kTable;
  call += "python = \"LLM(model=..., skip=[{layers_quoted}])\"\n";
  EXPECT_THAT(testing::input_error([&] { parse_runtime_table(call, "rt.toml", "rt", builtin_registry()); }),
              HasSubstr("rt.toml:18:10: a [[layer_exemptions]] python is keyword arguments for the option's call"));
  std::string open_call = text;
  const std::string cli = "cli = [\"--kv q4\"]";
  open_call.replace(open_call.find(cli), cli.size(), cli + "\npython = \"f(kv=4\"");
  EXPECT_THAT(testing::input_error([&] { parse_runtime_table(open_call, "rt.toml", "rt", builtin_registry()); }),
              HasSubstr("rt.toml:8:1: 'python' must end with its call's ')'"));
  std::string commented = text;  // the keywords would land inside the comment
  commented.replace(commented.find(cli), cli.size(), cli + "\npython = \"f(kv=4)  # g(x)\"");
  EXPECT_THAT(testing::input_error([&] { parse_runtime_table(commented, "rt.toml", "rt", builtin_registry()); }),
              HasSubstr("rt.toml:8:1: 'python' must end with its call's ')', with no comment"));
}

TEST(LayerExemption, ATablesAttentionTypesAreTheOnesKvtuneJudges) {
  std::string text = kTable;
  text += "attention_types = [\"sliding_window\"]\n";
  const RuntimeView v = runtime_options(parse_runtime_table(text, "rt.toml", "rt", builtin_registry()), "1.5");
  ASSERT_TRUE(v.layer_exemption);
  EXPECT_THAT(v.layer_exemption->attention_types, ElementsAre("sliding_window"));
  text = kTable;
  text += "attention_types = [\"sliding_window\", \"full_attention\"]\n";
  EXPECT_THAT(testing::input_error([&] { parse_runtime_table(text, "rt.toml", "rt", builtin_registry()); }),
              HasSubstr("rt.toml:18:38: 'attention_types' entries must be one of: sliding_window (found 'full_attention')"));
}

}  // namespace
}  // namespace kvtune
