// Sweep analysis and its rendering (sweep_analysis.h, sweep_report.h) on hand-made specs and
// records: each budget bound, the Pareto frontier of a hand-checked set, both objectives, runtime
// recommendations restricted to the runtime's own options (and none for a runtime that cannot meet
// the budget), the gap text, DESIGN §6's memory figures, and the files the report writes.
#include "kvtune/sweep_analysis.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>

#include "kvtune/model_preset.h"
#include "kvtune/sweep_html.h"
#include "kvtune/sweep_report.h"
#include "test_support.h"

namespace kvtune {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using testing::GiB;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::KiB;
using ::testing::Not;

SweepRecord record(const std::string& k, const std::string& v, double k_bits, double v_bits, double err) {
  SweepRecord r;
  r.k = k;
  r.v = v;
  r.origin = "search";
  r.k_bits = k_bits;
  r.v_bits = v_bits;
  Summary& e = r.metrics[size_t(Metric::rel_out_err)];
  e = {err, err * 2, err * 3, 16};
  r.metrics[size_t(Metric::attn_kl)] = {err / 10, err / 5, err, 16};
  r.metrics[size_t(Metric::top1_agree)] = {1.0, 1.0, 1.0, 16};
  return r;
}

SweepRecord failed(const std::string& k, const std::string& v, const std::string& error) {
  SweepRecord r;
  r.k = k;
  r.v = v;
  r.ok = false;
  r.error = error;
  return r;
}

SweepSpec make_spec(const std::vector<SweepRecord>& records) {
  SweepSpec spec;
  spec.name = "unit";
  spec.source = "unit.toml";
  spec.scenario.contexts = {4096};
  spec.scenario.workload.tokens = 4096;
  for (const SweepRecord& r : records) spec.points.push_back({r.k, r.v, r.origin});
  spec.registry = std::shared_ptr<const Registry>(std::shared_ptr<const Registry>(), &builtin_registry());
  return spec;
}

SweepAnalysis analyze(const SweepSpec& spec, const std::vector<SweepRecord>& records) {
  return analyze_sweep(spec, records);
}

// --- feasibility ---

TEST(SweepAnalysis, EveryBoundIsCheckedWithNumbersInTheViolation) {
  std::vector<SweepRecord> records = {record("a", "a", 8, 8, 0.0312), record("b", "b", 4, 4, 0.01)};
  records[1].metrics[size_t(Metric::attn_kl)].p95 = 0.5;
  records[1].metrics[size_t(Metric::needle_hit)] = {0.75, 0.0, 1.0, 8};
  SweepSpec spec = make_spec(records);
  spec.budget.terms = {{Metric::rel_out_err, Statistic::mean, BoundKind::at_most, 0.02},
                       {Metric::attn_kl, Statistic::p95, BoundKind::at_most, 0.1},
                       {Metric::needle_hit, Statistic::mean, BoundKind::at_least, 0.9}};
  spec.budget.max_bits = 6;
  const SweepAnalysis a = analyze(spec, records);
  ASSERT_EQ(a.verdicts.size(), 2u);
  EXPECT_FALSE(a.verdicts[0].feasible);
  EXPECT_THAT(violation_texts(a.verdicts[0]), ElementsAre("rel_out_err 0.0312 > 0.02", "no needle samples", "bits 8 > 6"));
  EXPECT_FALSE(a.verdicts[1].feasible);
  EXPECT_THAT(violation_texts(a.verdicts[1]), ElementsAre("attn_kl p95 0.5 > 0.1", "needle_hit 0.75 < 0.9"));
  EXPECT_FALSE(a.best);
}

TEST(SweepAnalysis, ValuesJustOverABoundPrintEnoughDigitsToDiffer) {
  const std::vector<SweepRecord> records = {record("a", "a", 8, 8, 0.0200004)};
  SweepSpec spec = make_spec(records);
  spec.budget.terms = {{Metric::rel_out_err, Statistic::mean, BoundKind::at_most, 0.02}};
  const SweepAnalysis a = analyze(spec, records);
  EXPECT_THAT(violation_texts(a.verdicts[0]), ElementsAre("rel_out_err 0.0200004 > 0.02"));
}

TEST(SweepAnalysis, WithoutBoundsEveryRunPointIsFeasible) {
  const std::vector<SweepRecord> records = {record("a", "a", 8, 8, 0.5), record("b", "b", 4, 4, 0.9)};
  const SweepAnalysis a = analyze(make_spec(records), records);
  EXPECT_TRUE(a.verdicts[0].feasible);
  EXPECT_TRUE(a.verdicts[1].feasible);
  EXPECT_FALSE(a.verdicts[0].memory);  // no model preset: no memory figures
  EXPECT_EQ(a.best, 1u);
}

TEST(SweepAnalysis, ANonFiniteErrorNeverMeetsABound) {
  const std::vector<SweepRecord> records = {record("a", "a", 8, 8, std::numeric_limits<double>::quiet_NaN())};
  SweepSpec spec = make_spec(records);
  spec.budget.terms = {{Metric::rel_out_err, Statistic::mean, BoundKind::at_most, 0.02}};
  const SweepAnalysis a = analyze(spec, records);
  EXPECT_FALSE(a.verdicts[0].feasible);
  EXPECT_THAT(a.frontier, IsEmpty());
}

TEST(SweepAnalysis, FailedRecordsAreInfeasibleWithTheirErrorAndOffTheFrontier) {
  const std::vector<SweepRecord> records = {
      failed("int:bits=4,group=96", "f16", "group 96 does not divide head_dim 128"),
      record("f16", "f16", 16, 16, 0.0001)};
  const SweepAnalysis a = analyze(make_spec(records), records);
  EXPECT_FALSE(a.verdicts[0].feasible);
  EXPECT_THAT(violation_texts(a.verdicts[0]), ElementsAre("failed: group 96 does not divide head_dim 128"));
  EXPECT_THAT(a.frontier, ElementsAre(1u));
  EXPECT_EQ(a.best, 1u);
}

// --- frontier and objectives ---

// Hand-checked: C is dominated by B (same bits, more error), E by D (more bits and error), F ties D
// exactly and comes later, H failed. Left: G, D, B, A by bits.
std::vector<SweepRecord> frontier_set() {
  return {record("A", "A", 16, 16, 0.0001), record("B", "B", 8.5, 8.5, 0.002), record("C", "C", 8.5, 8.5, 0.003),
          record("D", "D", 4.5, 4.5, 0.02), record("E", "E", 6, 6, 0.03),      record("F", "F", 4, 5, 0.02),
          record("G", "G", 3, 3, 0.2),      failed("H", "H", "boom")};
}

TEST(SweepAnalysis, FrontierIsTheParetoSetByBits) {
  const std::vector<SweepRecord> records = frontier_set();
  const SweepAnalysis a = analyze(make_spec(records), records);
  EXPECT_THAT(a.frontier, ElementsAre(6u, 3u, 1u, 0u));
}

TEST(SweepAnalysis, MinBitsPicksTheFewestBitsThenTheLowerError) {
  const std::vector<SweepRecord> records = frontier_set();
  SweepSpec spec = make_spec(records);
  spec.budget.terms = {{Metric::rel_out_err, Statistic::mean, BoundKind::at_most, 0.01}};
  EXPECT_EQ(analyze(spec, records).best, 1u);  // B: 8.5 bits like C, lower error
  spec.budget.terms = {{Metric::rel_out_err, Statistic::mean, BoundKind::at_most, 0.025}};
  EXPECT_EQ(analyze(spec, records).best, 3u);  // D and F tie exactly: the first in record order
}

TEST(SweepAnalysis, MinErrorPicksTheLowestErrorThenFewerBits) {
  std::vector<SweepRecord> records = frontier_set();
  records.push_back(record("A2", "A2", 8, 8, 0.0001));  // A's error with fewer bits
  SweepSpec spec = make_spec(records);
  spec.budget.objective = Objective::min_error;
  spec.budget.max_bits = 20;
  EXPECT_EQ(analyze(spec, records).best, 8u);
  spec.budget.max_bits = 5;
  EXPECT_EQ(analyze(spec, records).best, 3u);  // D: the lowest error within 5 bits
}

// --- runtimes ---

RuntimeOption option(const std::string& name, const std::string& k, const std::string& v) {
  RuntimeOption o;
  o.name = name;
  o.k_spec = k;
  o.v_spec = v;
  return o;
}

// f16, q8_0/q8_0, q8_0/q4_0, q4_0/q4_0 with a 1% error bound: the best (fewest bits) is q8_0/q4_0.
std::vector<SweepRecord> runtime_records() {
  return {record("f16", "f16", 16, 16, 0.0001), record("q8_0", "q8_0", 8.5, 8.5, 0.002),
          record("q8_0", "q4_0", 8.5, 4.5, 0.004), record("q4_0", "q4_0", 4.5, 4.5, 0.02)};
}

SweepSpec runtime_spec(const std::vector<SweepRecord>& records) {
  SweepSpec spec = make_spec(records);
  spec.budget.terms = {{Metric::rel_out_err, Statistic::mean, BoundKind::at_most, 0.01}};

  RuntimeView joint;  // one dtype for K and V: cannot express q8_0/q4_0
  joint.title = "Joint RT";
  joint.version = "1.2.0";
  joint.options = {option("f16", "f16", "f16"), option("int8", "q8_0", "q8_0"), option("int8 again", "q8_0", "q8_0"),
                   option("not evaluated", "q5_0", "q5_0")};
  joint.options[1].settings.cli = {"--kv-dtype int8", "--attn-backend X"};
  joint.options[1].settings.env = {"RT_KV=1", "RT_FAST=0"};
  joint.options[1].settings.python = "LLM(model=..., kv_dtype=\"int8\")\nllm.generate(...)";
  joint.options[1].settings.build = {"RT_INT8=ON"};
  joint.options[1].settings.caveats = {"scales per layer, not per head", "second caveat"};
  joint.options[1].settings.verified = false;

  RuntimeView split;  // K and V separately: its best is the overall best
  split.version = "b1";
  split.options = {option("q8_0/q8_0", "q8_0", "q8_0"), option("q8_0/q4_0", "q8_0", "q4_0")};

  RuntimeView tiny;  // only q4_0: over the error bound
  tiny.title = "Tiny RT";
  tiny.version = "0.1";
  tiny.options = {option("q4_0", "q4_0", "q4_0")};
  tiny.options[0].settings.cli = {"--tiny-q4"};

  spec.runtimes = {{"joint", "latest"}, {"split", "b1"}, {"tiny", "latest"}};
  spec.runtime_views = {joint, split, tiny};
  return spec;
}

TEST(SweepAnalysis, ARuntimesBestIsChosenOnlyAmongItsOwnOptions) {
  const std::vector<SweepRecord> records = runtime_records();
  const SweepAnalysis a = analyze(runtime_spec(records), records);
  ASSERT_EQ(a.best, 2u);
  ASSERT_EQ(a.runtimes.size(), 3u);

  const RuntimeChoice& joint = a.runtimes[0];
  EXPECT_EQ(joint.title, "Joint RT");
  EXPECT_EQ(joint.version, "1.2.0");
  ASSERT_EQ(joint.record, 1u);
  ASSERT_TRUE(joint.option);
  EXPECT_EQ(joint.option->name, "int8");  // two options with one pair: the first is named
  EXPECT_FALSE(joint.closest);
  EXPECT_EQ(gap_text(records, a, joint),
            "the best overall (K q8_0, V q4_0; not available in Joint RT) needs 6.5 bits/element vs 8.5 here "
            "(rel_out_err 0.004 vs 0.002)");

  const RuntimeChoice& split = a.runtimes[1];
  EXPECT_EQ(split.title, "split");  // no title in the view: the target's name
  EXPECT_EQ(split.record, 2u);
  EXPECT_THAT(gap_text(records, a, split), IsEmpty());
}

TEST(SweepAnalysis, ARuntimeWithNoFeasibleOptionGetsItsClosestAndNoRecommendation) {
  const std::vector<SweepRecord> records = runtime_records();
  const SweepAnalysis a = analyze(runtime_spec(records), records);
  const RuntimeChoice& tiny = a.runtimes[2];
  EXPECT_FALSE(tiny.record);
  EXPECT_FALSE(tiny.option);
  ASSERT_EQ(tiny.closest, 3u);
  EXPECT_EQ(tiny.closest_option->name, "q4_0");
  EXPECT_THAT(gap_text(records, a, tiny), HasSubstr("none of its options meets the budget"));
  EXPECT_THAT(gap_text(records, a, tiny), HasSubstr("K q8_0, V q4_0; not available in Tiny RT"));
}

TEST(SweepAnalysis, MinErrorGapNamesTheErrors) {
  const std::vector<SweepRecord> records = runtime_records();
  SweepSpec spec = runtime_spec(records);
  spec.budget.objective = Objective::min_error;
  spec.runtime_views[0].options = {option("int8", "q8_0", "q8_0")};
  const SweepAnalysis a = analyze(spec, records);
  EXPECT_EQ(a.best, 0u);
  EXPECT_EQ(gap_text(records, a, a.runtimes[0]),
            "the best overall (K f16, V f16; not available in Joint RT) reaches rel_out_err 0.0001 vs 0.002 here "
            "(16 vs 8.5 bits/element)");
}

TEST(SweepAnalysis, NothingFeasibleIsSaidInEveryGap) {
  const std::vector<SweepRecord> records = runtime_records();
  SweepSpec spec = runtime_spec(records);
  spec.budget.terms = {{Metric::rel_out_err, Statistic::mean, BoundKind::at_most, 1e-6}};
  const SweepAnalysis a = analyze(spec, records);
  EXPECT_FALSE(a.best);
  for (const RuntimeChoice& c : a.runtimes) {
    EXPECT_FALSE(c.record);
    EXPECT_TRUE(c.closest);
    EXPECT_EQ(gap_text(records, a, c), "no evaluated configuration meets the budget");
  }
  EXPECT_EQ(a.runtimes[0].closest, 0u);  // f16: the lowest error among its options
}

TEST(SweepAnalysis, ShippedTablesGiveTheirViewsATitle) {
  const RuntimeTable t =
      load_runtime_table(testing::config_dir() / "runtimes" / "llama-cpp.toml", builtin_registry());
  EXPECT_EQ(runtime_options(t, "latest").title, "llama.cpp");
}

// --- memory (DESIGN §6) ---

SweepSpec llama70b_spec(const std::vector<SweepRecord>& records) {
  SweepSpec spec = make_spec(records);
  spec.model = find_model_preset(testing::config_dir(), "llama-3.1-70b");
  return spec;
}

TEST(SweepAnalysis, MemoryFiguresMatchTheDesignForLlama70b) {
  const std::vector<SweepRecord> records = {record("f16", "f16", 16, 16, 0.0001),
                                            record("q8_0", "q4_0", 8.5, 4.5, 0.004)};
  SweepSpec spec = llama70b_spec(records);
  spec.budget.fit = MemoryFit{100 * GiB, 20 * GiB, 131072, 3};
  const SweepAnalysis a = analyze(spec, records);
  ASSERT_TRUE(a.verdicts[0].memory);
  EXPECT_DOUBLE_EQ(a.verdicts[0].memory->bytes_per_token, 320.0 * KiB);
  EXPECT_EQ(a.verdicts[0].memory->total_bytes, 40 * GiB);
  EXPECT_EQ(a.verdicts[0].sequences, 2u);  // 80 GiB free / 40 GiB
  EXPECT_FALSE(a.verdicts[0].feasible);
  EXPECT_THAT(violation_texts(a.verdicts[0]), ElementsAre("3 sequences x 40.00 GiB > 80.00 GiB free after weights (2 fit)"));
  ASSERT_TRUE(a.verdicts[1].memory);
  EXPECT_DOUBLE_EQ(a.verdicts[1].memory->bytes_per_token, 130.0 * KiB);
  EXPECT_EQ(a.verdicts[1].sequences, 4u);  // 16.25 GiB each
  EXPECT_TRUE(a.verdicts[1].feasible);
  EXPECT_EQ(a.best, 1u);
}

// 8 x 80 GiB with 140 GB of weights (tensor parallel): 17.5e9 bytes of weights per GPU leave
// 85899345920 - 17500000000 = 68399345920 bytes (63.70 GiB) per GPU. f16: 1 of 8 KV heads per GPU,
// 40 GiB / 8 = 5 GiB per sequence, 68399345920 / 5368709120 = 12.7, so 12 fit and 13 do not.
// q8_0/q4_0: 130 KiB x 131072 / 8 = 2181038080 bytes (2.03 GiB) per GPU, 68399345920 / 2181038080 = 31.4: 31 fit.
TEST(SweepAnalysis, TensorParallelFitIsPerGpu) {
  const std::vector<SweepRecord> records = {record("f16", "f16", 16, 16, 0.0001),
                                            record("q8_0", "q4_0", 8.5, 4.5, 0.004)};
  SweepSpec spec = llama70b_spec(records);
  spec.budget.fit = MemoryFit{80 * GiB, 140000000000ull, 131072, 13, 8};
  const SweepAnalysis a = analyze(spec, records);
  ASSERT_TRUE(a.verdicts[0].memory);
  EXPECT_EQ(a.verdicts[0].memory->total_bytes, 40 * GiB);  // the whole model's, as without tensor parallelism
  EXPECT_EQ(a.verdicts[0].bytes_per_sequence_per_gpu, 5 * GiB);
  EXPECT_EQ(a.verdicts[0].sequences, 12u);
  EXPECT_FALSE(a.verdicts[0].feasible);
  ASSERT_EQ(a.verdicts[0].violations.size(), 1u);
  EXPECT_EQ(a.verdicts[0].violations[0].free_bytes, 68399345920ull);
  EXPECT_EQ(a.verdicts[0].violations[0].gpus, 8);
  EXPECT_THAT(violation_texts(a.verdicts[0]),
              ElementsAre("13 sequences x 5.00 GiB > 63.70 GiB free after weights per GPU of 8 (tensor parallel) "
                          "(12 fit)"));
  EXPECT_EQ(a.verdicts[1].bytes_per_sequence_per_gpu, 2181038080ull);
  EXPECT_EQ(a.verdicts[1].sequences, 31u);
  EXPECT_TRUE(a.verdicts[1].feasible);

  std::ostringstream out;
  print_sweep_summary(out, spec, records, a);
  EXPECT_THAT(out.str(), HasSubstr("13 sequences of 131072 tokens in each of 8 GPUs of 80.00 GiB (tensor parallel) "
                                   "with 130.39 GiB of weights, 16.30 GiB per GPU"));
  EXPECT_THAT(out.str(), HasSubstr("2.03 GiB per GPU of 8; 31 sequences fit"));
}

TEST(SweepAnalysis, MemoryIsReportedAtTheEvaluatedContextWithoutAFitBudget) {
  const std::vector<SweepRecord> records = {record("f16", "f16", 16, 16, 0.0001)};
  const SweepAnalysis a = analyze(llama70b_spec(records), records);
  ASSERT_TRUE(a.verdicts[0].memory);
  EXPECT_EQ(a.verdicts[0].memory->total_bytes, 320 * KiB * 4096);
  EXPECT_FALSE(a.verdicts[0].sequences);
  EXPECT_TRUE(a.verdicts[0].feasible);
}

// --- rendering ---

std::string summary(const SweepSpec& spec, const std::vector<SweepRecord>& records, const SweepAnalysis& a) {
  std::ostringstream out;
  print_sweep_summary(out, spec, records, a);
  return out.str();
}

// serve_ctx without a fit: memory at the served context, not the 4096 simulated tokens. f16 at
// 320 KiB/token x 65536 = 20 GiB; q8_0/q4_0 at 130 KiB/token x 65536 = 8.125 GiB.
TEST(SweepAnalysis, MemoryIsCountedAtTheServedContext) {
  const std::vector<SweepRecord> records = {record("f16", "f16", 16, 16, 0.0001),
                                            record("q8_0", "q4_0", 8.5, 4.5, 0.004)};
  SweepSpec spec = llama70b_spec(records);
  spec.budget.terms = {{Metric::rel_out_err, Statistic::mean, BoundKind::at_most, 0.05}};
  const SweepAnalysis simulated = analyze(spec, records);  // memory at the 4096 tokens (the test above)
  EXPECT_THAT(summary(spec, records, simulated), Not(HasSubstr("serving:")));
  EXPECT_THAT(sweep_summary_json(spec, records, simulated),
              HasSubstr("\"serving\": {\n    \"ctx\": 4096,\n    \"beyond_model_context\": false\n  }"));

  spec.serve_ctx = 65536;
  const SweepAnalysis served = analyze(spec, records);
  ASSERT_TRUE(served.verdicts[0].memory && served.verdicts[1].memory);
  EXPECT_EQ(served.verdicts[0].memory->total_bytes, 320 * KiB * 65536);
  EXPECT_EQ(served.verdicts[1].memory->total_bytes, 130 * KiB * 65536);
  const std::string text = summary(spec, records, served);
  EXPECT_THAT(text, HasSubstr("serving: 65536 tokens per sequence (memory is counted there; simulated at 4096)\n"));
  EXPECT_THAT(text, HasSubstr("memory: 8.12 GiB per sequence of 65536 tokens (130.0 KiB/token)"));
  EXPECT_THAT(text, HasSubstr("memory/seq @65536"));
  const std::string json = sweep_summary_json(spec, records, served);
  EXPECT_THAT(json, HasSubstr("\"serving\": {\n    \"ctx\": 65536,\n    \"beyond_model_context\": false\n  }"));
  EXPECT_THAT(json, HasSubstr("\"memory\": {\n        \"context\": 65536,\n        \"total_bytes\": 8724152320"));

  // Beyond the model's 131072 tokens, with no fit: said all the same.
  spec.serve_ctx = 262144;
  const SweepAnalysis longer = analyze(spec, records);
  EXPECT_THAT(summary(spec, records, longer),
              HasSubstr("serving: 262144 tokens per sequence (memory is counted there; simulated at 4096); beyond "
                        "Llama-3.1-70B's context of 131072 tokens"));
  EXPECT_THAT(sweep_summary_json(spec, records, longer),
              HasSubstr("\"serving\": {\n    \"ctx\": 262144,\n    \"beyond_model_context\": true\n  }"));
  // So is a simulated context beyond it, served there.
  spec.serve_ctx = 0;
  spec.scenario.contexts = {262144};
  EXPECT_THAT(summary(spec, records, analyze(spec, records)),
              HasSubstr("serving: 262144 tokens per sequence; beyond Llama-3.1-70B's context of 131072 tokens"));
  // With runtimes and no fit, the line says why none of them gets a context setting.
  spec.scenario.contexts = {4096};
  spec.serve_ctx = 65536;
  spec.runtimes = {{"rt", "latest"}};
  spec.runtime_views = {RuntimeView{}};
  EXPECT_THAT(summary(spec, records, analyze(spec, records)),
              HasSubstr("simulated at 4096); the runtimes' settings for it are printed with a memory budget, which "
                        "says how many sequences they hold\n"));
}

// The part of a rendered text from `from` up to `to` (or the end).
std::string section(const std::string& text, const std::string& from, const std::string& to) {
  const size_t begin = text.find(from);
  if (begin == std::string::npos) return "";
  const size_t end = to.empty() ? std::string::npos : text.find(to, begin + from.size());
  return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

TEST(SweepReport, ConsoleSummaryPrintsSettingsToPasteAndNeverRecommendsTheInfeasible) {
  const std::vector<SweepRecord> records = runtime_records();
  SweepSpec spec = runtime_spec(records);
  spec.notes = {{.kind = SweepNote::Kind::option_dropped, .where = "rt 1.0", .option = "q5_0", .dropped = 1,
                 .reasons = {"head_dim"}}};
  const SweepAnalysis a = analyze(spec, records);
  const std::string text = summary(spec, records, a);

  EXPECT_THAT(text, HasSubstr("sweep unit"));
  EXPECT_THAT(text, HasSubstr("4 of 4 points evaluated, 0 failed, 3 feasible"));
  EXPECT_THAT(text, HasSubstr("budget: rel_out_err <= 0.01; objective min_bits"));
  EXPECT_THAT(text, HasSubstr("Pareto frontier"));
  EXPECT_THAT(text, HasSubstr("yes (best)"));
  EXPECT_THAT(text, HasSubstr("rt 1.0: option 'q5_0' dropped: head_dim"));  // the note is data now, rendered here

  const std::string joint = section(text, "Joint RT 1.2.0", "split b1");
  EXPECT_THAT(joint, HasSubstr("recommended: int8 (K q8_0, V q8_0)"));
  EXPECT_THAT(joint, HasSubstr("      --kv-dtype int8 --attn-backend X\n"));
  EXPECT_THAT(joint, HasSubstr("      RT_KV=1\n      RT_FAST=0\n"));
  EXPECT_THAT(joint, HasSubstr("      LLM(model=..., kv_dtype=\"int8\")\n      llm.generate(...)\n"));
  EXPECT_THAT(joint, HasSubstr("RT_INT8=ON"));
  EXPECT_THAT(joint, HasSubstr("scales per layer, not per head"));
  EXPECT_THAT(joint, HasSubstr("second caveat"));
  EXPECT_THAT(joint, HasSubstr("(emulation not verified against the runtime's sources)"));
  EXPECT_THAT(joint, HasSubstr("gap: the best overall (K q8_0, V q4_0; not available in Joint RT) needs 6.5 "
                               "bits/element vs 8.5 here"));

  const std::string split = section(text, "split b1", "Tiny RT 0.1");
  EXPECT_THAT(split, HasSubstr("recommended: q8_0/q4_0"));
  EXPECT_THAT(split, HasSubstr("this is the best configuration overall"));
  EXPECT_THAT(split, Not(HasSubstr("not verified")));

  const std::string tiny = section(text, "Tiny RT 0.1", "Notes");
  EXPECT_THAT(tiny, HasSubstr("cannot meet the budget"));
  EXPECT_THAT(tiny, HasSubstr("closest option (not a recommendation): q4_0 (K q4_0, V q4_0)"));
  EXPECT_THAT(tiny, HasSubstr("rel_out_err 0.02 > 0.01"));
  EXPECT_THAT(tiny, Not(HasSubstr("recommended")));
  EXPECT_THAT(tiny, Not(HasSubstr("--tiny-q4")));  // its settings are not offered to paste
}

// Runtime "RT" 1.0 with an f16 option and a q8_0/q4_0 one that has a flag and a Python call.
RuntimeView rt_view() {
  RuntimeView view;
  view.title = "RT";
  view.version = "1.0";
  view.options = {option("f16", "f16", "f16"), option("q8_0/q4_0", "q8_0", "q4_0")};
  view.options[1].settings.cli = {"--kv q8_0-q4_0"};
  view.options[1].settings.python = "LLM(model=..., kv=\"q8_0-q4_0\")";
  return view;
}

// The spec's runtimes: "rt" as `with`, and "bare", the same titled "Bare" with `strip` applied.
void with_and_bare(SweepSpec& spec, const RuntimeView& with, const std::function<void(RuntimeView&)>& strip) {
  RuntimeView bare = with;
  bare.title = "Bare";
  strip(bare);
  spec.runtimes = {{"rt", "latest"}, {"bare", "latest"}};
  spec.runtime_views = {with, bare};
}

// On a tensor-parallel fit every option shown carries the runtime's [[tensor_parallel]] setting
// (the GPU count filled in, the keyword joined into the option's call); a runtime without one is
// flagged, and a fit of one GPU changes nothing.
TEST(SweepAnalysis, ATensorParallelFitPrintsEachRuntimesSettingForItsGpus) {
  const std::vector<SweepRecord> records = {record("f16", "f16", 16, 16, 0.0001),
                                            record("q8_0", "q4_0", 8.5, 4.5, 0.004)};
  SweepSpec spec = llama70b_spec(records);
  spec.budget.fit = MemoryFit{80 * GiB, 140000000000ull, 131072, 13, 8};
  RuntimeView with = rt_view();
  with.tensor_parallel = RuntimeOption{"--tp", "", "", {}, {"rt.toml:9:1"}, {}, {"q_heads", "kv_heads"}};
  with.tensor_parallel->settings.cli = {"--tp {gpus}"};
  with.tensor_parallel->settings.python = "tp={gpus}";
  with.tensor_parallel->settings.caveats = {"heads split over {gpus} GPUs"};
  with_and_bare(spec, with, [](RuntimeView& v) { v.tensor_parallel.reset(); });

  const SweepAnalysis a = analyze(spec, records);
  const RuntimeChoice& c = a.runtimes[0];
  ASSERT_TRUE(c.option);
  EXPECT_EQ(c.option->name, "q8_0/q4_0");
  EXPECT_EQ(c.gpus, 8);
  EXPECT_FALSE(c.gpus_unset);
  EXPECT_THAT(c.option->settings.cli, ElementsAre("--kv q8_0-q4_0", "--tp 8"));
  EXPECT_EQ(c.option->settings.python, "LLM(model=..., kv=\"q8_0-q4_0\", tp=8)");
  EXPECT_THAT(c.option->settings.caveats, ElementsAre("heads split over 8 GPUs"));
  EXPECT_THAT(c.option->origins, ElementsAre("rt.toml:9:1"));
  EXPECT_THAT(c.gpus_refused, IsEmpty());  // 8 divides the 64 attention heads and the 8 KV heads
  const RuntimeChoice& bare = a.runtimes[1];
  ASSERT_TRUE(bare.option);
  EXPECT_TRUE(bare.gpus_unset);
  EXPECT_THAT(bare.option->settings.cli, ElementsAre("--kv q8_0-q4_0"));
  const std::string text = summary(spec, records, a);
  EXPECT_THAT(text, HasSubstr("--kv q8_0-q4_0 --tp 8"));
  EXPECT_THAT(text, HasSubstr("the memory fit spreads the cache over 8 GPUs, but this table has no [[tensor_parallel]] "
                              "entry: no setting for them is printed, and how Bare spreads its cache was not checked"));
  const std::string json = sweep_summary_json(spec, records, a);
  EXPECT_THAT(json, HasSubstr("\"gpus\": 8,\n      \"gpus_unset\": false"));
  EXPECT_THAT(json, HasSubstr("\"gpus\": 8,\n      \"gpus_unset\": true"));

  // On 3 GPUs the runtime cannot split Llama-3.1-70B's heads: said, in the text and the JSON.
  spec.budget.fit->tensor_parallel = 3;
  spec.budget.fit->sequences = 1;
  const SweepAnalysis three = analyze(spec, records);
  EXPECT_THAT(three.runtimes[0].gpus_refused, ElementsAre("q_heads", "kv_heads"));
  EXPECT_THAT(three.runtimes[1].gpus_refused, IsEmpty());  // no setting, no rule
  EXPECT_THAT(summary(spec, records, three),
              HasSubstr("RT cannot start Llama-3.1-70B on 3 GPUs: 3 does not divide its 64 attention heads; its 8 KV "
                        "heads and 3 do not divide one into the other (choose another GPU count)"));
  EXPECT_THAT(sweep_summary_json(spec, records, three), HasSubstr("\"gpus_refused\": [\n        \"q_heads\",\n        \"kv_heads\"\n      ]"));

  spec.budget.fit = MemoryFit{80 * GiB, 20 * GiB, 131072, 1, 1};
  const SweepAnalysis one = analyze(spec, records);
  ASSERT_TRUE(one.runtimes[0].option);
  EXPECT_EQ(one.runtimes[0].gpus, 1);
  EXPECT_THAT(one.runtimes[0].option->settings.cli, ElementsAre("--kv q8_0-q4_0"));
  EXPECT_EQ(one.runtimes[0].option->settings.python, "LLM(model=..., kv=\"q8_0-q4_0\")");
  EXPECT_FALSE(one.runtimes[1].gpus_unset);
  EXPECT_THAT(summary(spec, records, one), Not(HasSubstr("[[tensor_parallel]]")));
}

// A runtime that rounds its cells (llama-server: slots to 256, a sliding layer its window plus
// n_ubatch, rounded to 256) gets the shown option's memory as it allocates it. Gemma 2 9B, q8_0/q4_0
// (13 bits per element: 3328 bytes per token and layer over 8 KV heads of 256): kvtune counts
// 21 x 8192 + 21 x 4096 tokens, 858 783 744 bytes; llama-server keeps 4608 on each sliding layer,
// 894 566 400 bytes. 7.8 GB free holds 9 of the first and 8 of the second.
TEST(SweepAnalysis, ARuntimeThatRoundsItsCellsGetsItsOwnMemoryLine) {
  const std::vector<SweepRecord> records = {record("f16", "f16", 16, 16, 0.0001),
                                            record("q8_0", "q4_0", 8.5, 4.5, 0.004)};
  SweepSpec spec = make_spec(records);
  spec.model = find_model_preset(testing::config_dir(), "gemma-2-9b");
  spec.budget.fit = MemoryFit{24 * GiB, 24 * GiB - 7800000000ull, 8192, 9, 1};
  RuntimeView with = rt_view();
  with.context = RuntimeOption{"-c", "", "", {}, {"rt.toml:12:1"}};
  with.context->settings.cli = {"-c {tokens}", "-np {seqs}"};
  with.context->cells = CellAllocation{256, 512, {}, 256};
  with_and_bare(spec, with, [](RuntimeView& v) { v.context->cells.reset(); });

  const SweepAnalysis a = analyze(spec, records);
  ASSERT_EQ(a.best, 1u);
  ASSERT_TRUE(a.verdicts[1].memory);
  EXPECT_EQ(a.verdicts[1].memory->total_bytes, 858783744u);
  EXPECT_EQ(a.verdicts[1].sequences, 9u);
  const RuntimeChoice& c = a.runtimes[0];
  ASSERT_EQ(c.record, 1u);
  ASSERT_TRUE(c.allocation);
  EXPECT_EQ(c.allocation->cells.slot, 8192);
  EXPECT_EQ(c.allocation->cells.sliding, 4608);
  EXPECT_EQ(c.allocation->bytes_per_sequence, 894566400u);
  EXPECT_EQ(c.allocation->sequences, 8u);
  EXPECT_FALSE(a.runtimes[1].allocation);  // a runtime that allocates as kvtune counts
  const std::string text = summary(spec, records, a);
  EXPECT_THAT(text, HasSubstr("as RT allocates it: 853.12 MiB per sequence (8192 cells on each full layer, 4608 on "
                              "each sliding layer: its 4096-token window and 512 more, rounded up; the context caveat "
                              "says why); 8 sequences fit, fewer than the 9 the budget asks\n"));
  EXPECT_THAT(text, Not(HasSubstr("as Bare allocates it")));
  EXPECT_THAT(sweep_summary_json(spec, records, a),
              HasSubstr("\"allocation\": {\n        \"slot_cells\": 8192,\n        \"sliding_cells\": 4608,\n"
                        "        \"sliding_extra\": 512,\n        \"sliding_full\": false,\n"
                        "        \"full_layers\": 21,\n        \"sliding_layers\": 21,\n        \"layer_group\": null,\n"
                        "        \"bytes_per_sequence\": 894566400,\n"
                        "        \"bytes_per_sequence_per_gpu\": 894566400,\n        \"sequences\": 8\n      }"));

  // A runtime that keeps a sliding layer as large as a full one (SGLang for Gemma): 42 x 8192 cells,
  // 1 145 044 992 bytes; 7.8 GB holds 6.
  with_and_bare(spec, with, [](RuntimeView& v) { v.context->cells = CellAllocation{1, 0, {}, 1, true}; });
  const SweepAnalysis full = analyze(spec, records);
  ASSERT_TRUE(full.runtimes[1].allocation);
  EXPECT_TRUE(full.runtimes[1].allocation->cells.sliding_full);
  EXPECT_EQ(full.runtimes[1].allocation->cells.sliding, 8192);
  EXPECT_EQ(full.runtimes[1].allocation->bytes_per_sequence, 42ull * 8192 * 3328);
  EXPECT_EQ(full.runtimes[1].allocation->sequences, 6u);
  EXPECT_THAT(summary(spec, records, full),
              HasSubstr("as Bare allocates it: 1.07 GiB per sequence (8192 cells on each full layer and on each "
                        "sliding layer, which it sizes as a full one; the context caveat says why); 6 sequences fit"));

  // A rule scoped to other classes says nothing of gemma-2-9b (Gemma2ForCausalLM): kvtune's count stands.
  with_and_bare(spec, with, [](RuntimeView& v) {
    v.context->cells = CellAllocation{1, 0, {}, 1, true, false, {"Gemma3ForConditionalGeneration"}};
  });
  EXPECT_FALSE(analyze(spec, records).runtimes[1].allocation);

  // vLLM's groups: Gemma 3 27B's 52 sliding layers padded to 60 in groups of 10, each holding its
  // window and a block (1040 cells).
  {
    SweepSpec g = spec;
    g.model = find_model_preset(testing::config_dir(), "gemma-3-27b");
    g.budget.fit = MemoryFit{80 * GiB, 54864813280ull, 32768, 1, 1};
    with_and_bare(g, with, [](RuntimeView& v) { v.context->cells = CellAllocation{16, 16, {}, 16, false, true}; });
    const SweepAnalysis grouped = analyze(g, records);
    ASSERT_TRUE(grouped.runtimes[1].allocation);
    EXPECT_EQ(grouped.runtimes[1].allocation->cells.sliding_layers, 60);
    EXPECT_EQ(grouped.runtimes[1].allocation->cells.layer_group, 10);
    EXPECT_THAT(summary(g, records, grouped),
                HasSubstr("32768 cells on each full layer, 1040 on each sliding layer: its 1024-token window and 16 "
                          "more, rounded up; 60 sliding layers for 52 (groups of 10); the context caveat says why)"));
    EXPECT_THAT(sweep_summary_json(g, records, grouped),
                HasSubstr("\"full_layers\": 10,\n        \"sliding_layers\": 60,\n        \"layer_group\": 10,"));
  }

  // A context of 8000 tokens: slots of 8192 on the full layers too.
  with_and_bare(spec, with, [](RuntimeView& v) { v.context->cells.reset(); });
  spec.budget.fit->ctx = 8000;
  const SweepAnalysis padded = analyze(spec, records);
  ASSERT_TRUE(padded.runtimes[0].allocation);
  EXPECT_EQ(padded.runtimes[0].allocation->cells.slot, 8192);
  EXPECT_EQ(padded.runtimes[0].allocation->bytes_per_sequence, 894566400u);
  // Within the window and the batch, a sliding layer holds the whole slot: as kvtune counts at 4096.
  spec.budget.fit->ctx = 4096;
  EXPECT_FALSE(analyze(spec, records).runtimes[0].allocation);
  // Without sliding layers and at a multiple of 256 nothing differs either.
  spec.model = find_model_preset(testing::config_dir(), "llama-3.1-8b");
  spec.budget.fit->ctx = 8192;
  EXPECT_FALSE(analyze(spec, records).runtimes[0].allocation);
}

// With a memory fit every option shown carries the runtime's [[context]] setting (the fit's
// sequences and context filled in, the keyword joined into the option's call); a runtime without one
// is flagged, and without a fit nothing is added.
TEST(SweepAnalysis, AFitPrintsEachRuntimesSettingForItsSequences) {
  const std::vector<SweepRecord> records = {record("f16", "f16", 16, 16, 0.0001),
                                            record("q8_0", "q4_0", 8.5, 4.5, 0.004)};
  SweepSpec spec = llama70b_spec(records);
  spec.budget.fit = MemoryFit{80 * GiB, 140000000000ull, 131072, 13, 8};
  RuntimeView with = rt_view();
  with.context = RuntimeOption{"-c", "", "", {}, {"rt.toml:12:1"}};
  with.context->cache_share = CacheShare{0.9, false};
  with.context->settings.cli = {"-c {tokens}", "-np {seqs}"};
  with.context->settings.python = "max_len={ctx}";
  with_and_bare(spec, with, [](RuntimeView& v) { v.context.reset(); });

  const SweepAnalysis a = analyze(spec, records);
  const RuntimeChoice& c = a.runtimes[0];
  ASSERT_TRUE(c.option);
  EXPECT_EQ(c.option->name, "q8_0/q4_0");
  EXPECT_EQ(c.context, 131072);
  EXPECT_EQ(c.sequences, 13);
  EXPECT_FALSE(c.context_unset);
  EXPECT_THAT(c.option->settings.cli, ElementsAre("--kv q8_0-q4_0", "-c 1703936", "-np 13"));
  EXPECT_EQ(c.option->settings.python, "LLM(model=..., kv=\"q8_0-q4_0\", max_len=131072)");
  EXPECT_THAT(c.option->origins, ElementsAre("rt.toml:12:1"));
  // 0.9 of each 80 GiB GPU less 17.5 GB of weights holds 27 of q8_0/q4_0's 2 181 038 080 bytes per GPU.
  EXPECT_EQ(c.sequences_in_share, 27u);
  const RuntimeChoice& bare = a.runtimes[1];
  ASSERT_TRUE(bare.option);
  EXPECT_TRUE(bare.context_unset);
  EXPECT_FALSE(bare.sequences_in_share);
  EXPECT_THAT(bare.option->settings.cli, ElementsAre("--kv q8_0-q4_0"));
  const std::string text = summary(spec, records, a);
  EXPECT_THAT(text, HasSubstr("--kv q8_0-q4_0 -c 1703936 -np 13"));
  EXPECT_THAT(text, HasSubstr("if 80.00 GiB is the whole GPU, RT's default cache share (0.9 of it, weights included; "
                              "activations not counted) holds at most 27 sequences\n"));
  EXPECT_THAT(text, HasSubstr("the memory fit holds 13 sequences of 131072 tokens, but this table has no [[context]] "
                              "entry: no setting for them is printed, and how Bare sizes its cache was not checked"));
  const std::string json = sweep_summary_json(spec, records, a);
  EXPECT_THAT(json, HasSubstr("\"context\": 131072,\n      \"sequences\": 13,\n      \"context_unset\": false,\n"
                              "      \"cache_share\": {\n        \"share\": 0.9,\n        \"of\": \"gpu\",\n"
                              "        \"sequences\": 27\n      }"));
  EXPECT_THAT(json, HasSubstr("\"context\": 131072,\n      \"sequences\": 13,\n      \"context_unset\": true"));

  // Nothing meets the budget here: the closest option of an infeasible fit carries the setting too.
  spec.budget.fit->sequences = 100;
  const SweepAnalysis tight = analyze(spec, records);
  ASSERT_TRUE(tight.runtimes[0].closest_option);
  EXPECT_THAT(tight.runtimes[0].closest_option->settings.cli, ::testing::Contains("-np 100"));
  // A share of what the weights leave: 0.8 of 68 399 345 920 bytes holds 25; fewer than asked is said.
  spec.runtime_views[0].context->cache_share = CacheShare{0.8, true};
  const SweepAnalysis free_share = analyze(spec, records);
  EXPECT_EQ(free_share.runtimes[0].sequences_in_share, 25u);
  EXPECT_THAT(summary(spec, records, free_share),
              HasSubstr("if 80.00 GiB is the whole GPU, RT's default cache share (0.8 of what the weights leave; "
                        "activations not counted) holds at most 25 sequences, fewer than the 100 the budget asks: raise "
                        "the share (the caveats name its setting)"));
  spec.runtime_views[0].context->cache_share = CacheShare{0.9, false};

  // The option that needs nothing, shown beside one that needs something, carries it as well.
  spec.budget.fit->sequences = 12;
  spec.runtime_views[0].options[1].settings.needs = {"a calibrated checkpoint"};
  const SweepAnalysis needs = analyze(spec, records);
  ASSERT_TRUE(needs.runtimes[0].fallback_option);
  EXPECT_EQ(needs.runtimes[0].fallback_option->name, "f16");
  EXPECT_THAT(needs.runtimes[0].fallback_option->settings.cli, ElementsAre("-c 1572864", "-np 12"));
  EXPECT_THAT(summary(spec, records, needs), Not(HasSubstr("beyond Llama-3.1-70B's context")));
  EXPECT_THAT(sweep_summary_json(spec, records, needs), HasSubstr("\"beyond_model_context\": false"));

  // Sequences longer than the model's context (its preset's max_context) are said to be.
  spec.budget.fit->ctx = 262144;
  const SweepAnalysis longer = analyze(spec, records);
  EXPECT_THAT(summary(spec, records, longer),
              HasSubstr("serving: 262144 tokens per sequence (memory is counted there; simulated at 4096); beyond "
                        "Llama-3.1-70B's context of 131072 tokens: runtimes refuse or cap longer sequences unless its "
                        "rope scaling is set up for them\n"));
  EXPECT_THAT(sweep_summary_json(spec, records, longer), HasSubstr("\"beyond_model_context\": true"));

  spec.budget.fit.reset();
  spec.budget.terms = {{Metric::rel_out_err, Statistic::mean, BoundKind::at_most, 0.05}};
  const SweepAnalysis none = analyze(spec, records);
  ASSERT_TRUE(none.runtimes[0].option);
  EXPECT_EQ(none.runtimes[0].context, 0);
  EXPECT_FALSE(none.runtimes[1].context_unset);
  EXPECT_THAT(none.runtimes[0].option->settings.cli, ElementsAre("--kv q8_0-q4_0"));
  EXPECT_THAT(summary(spec, records, none), Not(HasSubstr("[[context]]")));
}

// Two options of equal bits (fp8 with and without checkpoint scales): the lower error wins,
// whichever comes first in the table.
TEST(SweepAnalysis, EqualBitsAreBrokenByLowerErrorWhateverTheTableOrder) {
  const std::vector<SweepRecord> records = {record("fp8:format=e4m3,scale=unit", "fp8:format=e4m3,scale=unit", 8, 8, 0.03),
                                            record("fp8:format=e4m3,scale=calibrated",
                                                   "fp8:format=e4m3,scale=calibrated", 8, 8, 0.004)};
  SweepSpec spec = make_spec(records);
  spec.budget.terms = {{Metric::rel_out_err, Statistic::mean, BoundKind::at_most, 0.05}};
  RuntimeView view;
  view.options = {option("unit", records[0].k, records[0].v), option("calibrated", records[1].k, records[1].v)};
  spec.runtimes = {{"rt", "latest"}};
  for (int order = 0; order < 2; ++order) {
    spec.runtime_views = {view};
    const SweepAnalysis a = analyze(spec, records);
    ASSERT_TRUE(a.runtimes[0].option);
    EXPECT_EQ(a.runtimes[0].option->name, "calibrated") << "table order " << order;
    std::swap(view.options[0], view.options[1]);
  }
}

// Closest = smallest relative excess, not lowest error: f16 misses max_bits 5 by 220 %, q4_0 the
// error bound by 100 %.
TEST(SweepAnalysis, TheClosestOptionMissesTheBudgetByTheLeast) {
  const std::vector<SweepRecord> records = runtime_records();
  SweepSpec spec = runtime_spec(records);
  spec.budget.max_bits = 5;
  spec.runtime_views[0].options = {option("f16", "f16", "f16"), option("q4", "q4_0", "q4_0")};
  const SweepAnalysis a = analyze(spec, records);
  const RuntimeChoice& c = a.runtimes[0];
  EXPECT_FALSE(c.record);
  ASSERT_EQ(c.closest, 3u);
  EXPECT_DOUBLE_EQ(a.verdicts[3].excess, 1.0);   // (0.02 - 0.01) / 0.01
  EXPECT_DOUBLE_EQ(a.verdicts[0].excess, 2.2);   // (16 - 5) / 5
  EXPECT_DOUBLE_EQ(a.verdicts[2].excess, 0.3);   // q8_0/q4_0: (6.5 - 5) / 5
  EXPECT_DOUBLE_EQ(a.verdicts[1].excess, 0.7);   // q8_0/q8_0: (8.5 - 5) / 5
  const std::string text = summary(spec, records, a);
  EXPECT_THAT(section(text, "Joint RT 1.2.0", "split b1"), HasSubstr("misses the budget by 100%"));
}

// An option that needs a calibrated checkpoint is recommended with what it needs, and the best
// option for a user without one is printed beside it with its own settings and metrics.
TEST(SweepAnalysis, AnOptionThatNeedsACheckpointComesWithTheBestOneThatDoesNot) {
  const std::vector<SweepRecord> records = {record("fp8:format=e4m3,scale=unit", "fp8:format=e4m3,scale=unit", 8, 8, 0.03),
                                            record("fp8:format=e4m3,scale=calibrated",
                                                   "fp8:format=e4m3,scale=calibrated", 8, 8, 0.004),
                                            record("f16", "f16", 16, 16, 0.0001)};
  SweepSpec spec = make_spec(records);
  spec.budget.terms = {{Metric::rel_out_err, Statistic::mean, BoundKind::at_most, 0.05}};
  RuntimeView view;
  view.title = "RT";
  view.version = "1.0";
  view.options = {option("fp8, checkpoint scales", records[1].k, records[1].v),
                  option("fp8, no scales", records[0].k, records[0].v), option("auto", "f16", "f16")};
  view.options[0].settings.needs = {"a checkpoint with calibrated k_scale/v_scale"};
  view.options[0].settings.cli = {"--kv fp8"};
  view.options[1].settings.cli = {"--kv fp8 --no-scales"};
  spec.runtimes = {{"rt", "latest"}};
  spec.runtime_views = {view};
  const SweepAnalysis a = analyze(spec, records);
  const RuntimeChoice& c = a.runtimes[0];
  ASSERT_EQ(c.record, 1u);
  ASSERT_EQ(c.fallback, 0u);
  EXPECT_EQ(c.fallback_option->name, "fp8, no scales");

  const std::string text = summary(spec, records, a);
  EXPECT_THAT(text, HasSubstr("recommended: fp8, checkpoint scales"));
  EXPECT_THAT(text, HasSubstr("it needs: a checkpoint with calibrated k_scale/v_scale"));
  EXPECT_THAT(text, HasSubstr("without that: fp8, no scales (K fp8:format=e4m3,scale=unit"));
  EXPECT_THAT(text, HasSubstr("--kv fp8 --no-scales"));
  EXPECT_THAT(text, HasSubstr("rel_out_err 0.03"));
  const std::string json = sweep_summary_json(spec, records, a);
  EXPECT_THAT(json, HasSubstr("\"without_needs\""));
  EXPECT_THAT(json, HasSubstr("\"needs\": [\n"));

  // Without the need on the best option there is no fallback.
  spec.runtime_views[0].options[0].settings.needs.clear();
  EXPECT_FALSE(analyze(spec, records).runtimes[0].fallback);
}

TEST(SweepReport, NothingFeasibleSaysSoAndShowsTheClosest) {
  const std::vector<SweepRecord> records = runtime_records();
  SweepSpec spec = runtime_spec(records);
  spec.budget.terms = {{Metric::rel_out_err, Statistic::mean, BoundKind::at_most, 1e-6}};
  const std::string text = summary(spec, records, analyze(spec, records));
  EXPECT_THAT(text, HasSubstr("nothing meets the budget"));
  EXPECT_THAT(text, HasSubstr("closest (smallest violation, not a recommendation): K f16, V f16"));
  EXPECT_THAT(text, HasSubstr("misses the budget by 9900% (the largest relative excess over a bound"));
  EXPECT_THAT(text, Not(HasSubstr("recommended:")));
}

TEST(SweepReport, FrontierCsvHasTheHeaderAndQuotesSpecsWithCommas) {
  const std::vector<SweepRecord> records = {record("int:bits=4,axis=token", "q4_0", 4.5, 4.5, 0.02),
                                            record("f16", "f16", 16, 16, 0.0001)};
  const SweepSpec spec = llama70b_spec(records);
  const std::string csv = frontier_csv(spec, records, analyze(spec, records));
  std::istringstream lines(csv);
  std::string header, first, second;
  std::getline(lines, header);
  std::getline(lines, first);
  std::getline(lines, second);
  EXPECT_EQ(header,
            "k,v,k_bits,v_bits,bits,rel_out_err,rel_out_err_p95,attn_kl_p95,needle_hit,bytes_per_token,feasible,"
            "exempt_layers,undecided,rel_out_err_lo,rel_out_err_hi,rel_out_err_p95_lo,rel_out_err_p95_hi,"
            "attn_kl_p95_lo,attn_kl_p95_hi,needle_hit_lo,needle_hit_hi,level");
  EXPECT_THAT(first, ::testing::StartsWith("\"int:bits=4,axis=token\",q4_0,4.5,4.5,4.5,0.02,0.04,0.004,,"));
  EXPECT_THAT(first, ::testing::EndsWith(",true,,false,,,,,,,,,"));  // records without intervals
  EXPECT_EQ(second, "f16,f16,16,16,16,0.0001,0.0002,2e-05,,327680,true,,false,,,,,,,,,");
}

TEST(SweepReport, SummaryJsonCarriesEverySection) {
  const std::vector<SweepRecord> records = runtime_records();
  const SweepSpec spec = runtime_spec(records);
  const std::string json = sweep_summary_json(spec, records, analyze(spec, records));
  for (const char* key : {"\"name\"", "\"source\"", "\"spec_hash\"", "\"workload\"", "\"budget\"", "\"counts\"",
                          "\"frontier\"", "\"best\"", "\"runtimes\"", "\"recommendation\"", "\"closest\"",
                          "\"caveats\"", "\"gap\"", "\"notes\"", "\"rel_out_err\"", "\"violations\""}) {
    EXPECT_THAT(json, HasSubstr(key));
  }
  EXPECT_THAT(json, HasSubstr("\"meets_budget\": false"));
  EXPECT_EQ(json.back(), '\n');
}

TEST(SweepReport, MarkdownReportHasTheSectionsAndTables) {
  const std::vector<SweepRecord> records = runtime_records();
  const SweepSpec spec = runtime_spec(records);
  const std::string md = sweep_report_md(spec, records, analyze(spec, records));
  EXPECT_THAT(md, ::testing::StartsWith("# sweep unit\n"));
  EXPECT_THAT(md, HasSubstr("\n## Pareto frontier"));
  EXPECT_THAT(md, HasSubstr("\n| k | v | k\\_bits |"));
  EXPECT_THAT(md, HasSubstr("| `q8_0` | `q4_0` |"));
  EXPECT_THAT(md, HasSubstr("\n## Best feasible configuration\n"));
  EXPECT_THAT(md, HasSubstr("\n### Joint RT 1.2.0\n"));
  EXPECT_THAT(md, HasSubstr("```\n--kv-dtype int8 --attn-backend X\n```"));
  EXPECT_THAT(md, HasSubstr("cannot meet the budget"));
}

TEST(SweepReport, WritesTheThreeFiles) {
  const std::vector<SweepRecord> records = runtime_records();
  const SweepSpec spec = runtime_spec(records);
  const fs::path dir = fs::temp_directory_path() / ("kvtune_sweep_report_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  write_sweep_report(dir.string(), spec, records, analyze(spec, records));
  for (const char* name : {"summary.json", "frontier.csv", "report.md"}) {
    EXPECT_TRUE(fs::is_regular_file(dir / name)) << name;
    EXPECT_GT(fs::file_size(dir / name), 0u) << name;
  }
  fs::remove_all(dir);
}

// --- budget.confidence ---

// A record whose rel_out_err mean has the interval [lo, hi] at 95 %.
SweepRecord with_interval(SweepRecord r, double lo, double hi) {
  Summary& e = r.metrics[size_t(Metric::rel_out_err)];
  e.level = 0.95;
  e.mean_ci = {lo, hi};
  e.p95_ci = {e.p95, e.p95};
  e.mean_method = e.p95_method = IntervalMethod::bootstrap_cases;
  return r;
}

TEST(SweepAnalysis, WithConfidenceATermIsJudgedOnItsInterval) {
  const std::vector<SweepRecord> records = {
      with_interval(record("sure", "sure", 8, 8, 0.010), 0.008, 0.012),       // all of it below 0.02
      with_interval(record("straddles", "x", 4, 4, 0.018), 0.015, 0.024),     // 0.02 inside
      with_interval(record("over", "over", 2, 2, 0.030), 0.025, 0.036),       // all of it above
      record("none", "none", 3, 3, 0.01)};                                     // no interval at all
  SweepSpec spec = make_spec(records);
  spec.budget.terms = {{Metric::rel_out_err, Statistic::mean, BoundKind::at_most, 0.02}};
  spec.budget.confidence = 0.95;
  const SweepAnalysis a = analyze(spec, records);
  EXPECT_TRUE(a.verdicts[0].feasible);
  EXPECT_FALSE(a.verdicts[0].undecided);
  EXPECT_FALSE(a.verdicts[1].feasible);
  EXPECT_TRUE(a.verdicts[1].undecided);
  EXPECT_THAT(violation_texts(a.verdicts[1]),
              ElementsAre("rel_out_err 0.018: its 95 % interval [0.015, 0.024] straddles the bound 0.02 (undecided)"));
  EXPECT_DOUBLE_EQ(a.verdicts[1].excess, 0.2);  // the interval's far end, 0.024, is 20 % over 0.02
  EXPECT_FALSE(a.verdicts[2].feasible);
  EXPECT_FALSE(a.verdicts[2].undecided);
  EXPECT_THAT(violation_texts(a.verdicts[2]), ElementsAre("rel_out_err 0.03 > 0.02 (95 % interval [0.025, 0.036])"));
  EXPECT_TRUE(a.verdicts[3].undecided);  // nothing says how far its estimate may be off
  EXPECT_THAT(violation_texts(a.verdicts[3]), ElementsAre(HasSubstr("has no 95 % interval to judge")));
  ASSERT_TRUE(a.best);
  EXPECT_EQ(*a.best, 0u);  // the undecided 4-bit point is not chosen over the sure 8-bit one

  // Without budget.confidence the estimates decide, as before.
  spec.budget.confidence.reset();
  const SweepAnalysis b = analyze(spec, records);
  EXPECT_TRUE(b.verdicts[1].feasible);
  EXPECT_FALSE(b.verdicts[1].undecided);
  EXPECT_TRUE(b.verdicts[3].feasible);
  EXPECT_EQ(*b.best, 3u);  // the fewest bits of the four
}

TEST(SweepAnalysis, ALowerBoundIsJudgedOnTheIntervalsLowEnd) {
  std::vector<SweepRecord> records = {record("a", "a", 8, 8, 0.01), record("b", "b", 4, 4, 0.01)};
  Summary& sure = records[0].metrics[size_t(Metric::needle_hit)];
  sure = {0.99, 1.0, 1.0, 120};
  sure.level = 0.95;
  sure.mean_ci = wilson_interval(0.99 * 120, 120, 0.95);
  sure.p95_ci = {1.0, 1.0};
  Summary& close = records[1].metrics[size_t(Metric::needle_hit)];
  close = sure;
  close.mean = 0.925;
  close.mean_ci = wilson_interval(0.925 * 120, 120, 0.95);
  SweepSpec spec = make_spec(records);
  spec.scenario.workload.needles.depths = {0.5};
  spec.budget.terms = {{Metric::needle_hit, Statistic::mean, BoundKind::at_least, 0.9}};
  spec.budget.confidence = 0.95;
  const SweepAnalysis a = analyze(spec, records);
  EXPECT_GT(sure.mean_ci.lo, 0.9);
  EXPECT_TRUE(a.verdicts[0].feasible);
  EXPECT_LT(close.mean_ci.lo, 0.9);  // 111 of 120: the Wilson interval reaches below 0.9
  EXPECT_TRUE(a.verdicts[1].undecided);
}

TEST(SweepReport, UndecidedPointsAreCountedAndMarkedInEveryOutput) {
  const std::vector<SweepRecord> records = {with_interval(record("sure", "sure", 8, 8, 0.010), 0.008, 0.012),
                                            with_interval(record("maybe", "maybe", 4, 4, 0.018), 0.015, 0.024)};
  SweepSpec spec = make_spec(records);
  spec.budget.terms = {{Metric::rel_out_err, Statistic::mean, BoundKind::at_most, 0.02}};
  spec.budget.confidence = 0.95;
  const SweepAnalysis a = analyze(spec, records);
  const std::string text = summary(spec, records, a);
  EXPECT_THAT(text, HasSubstr("1 feasible, 1 undecided"));
  EXPECT_THAT(text, HasSubstr("rel_out_err <= 0.02 (each judged on its 95 % confidence interval)"));
  EXPECT_THAT(text, HasSubstr("intervals: [low, high] at 95 % confidence"));
  EXPECT_THAT(text, HasSubstr("rel_out_err 0.01 [0.008, 0.012]"));
  EXPECT_THAT(text, HasSubstr("undecided"));
  const std::string json = sweep_summary_json(spec, records, a);
  EXPECT_THAT(json, HasSubstr("\"undecided\": 1"));
  EXPECT_THAT(json, HasSubstr("\"confidence\": 0.95"));
  EXPECT_THAT(json, HasSubstr("\"kind\": \"undecided\""));
  EXPECT_THAT(json, HasSubstr("\"mean_ci\": [\n"));
  const std::string csv = frontier_csv(spec, records, a);
  EXPECT_THAT(csv, HasSubstr("\nmaybe,maybe,4,4,4,0.018,0.036,0.0036,,,false,,true,0.015,0.024,0.036,0.036,,,,,0.95\n"));
}

// A budget on a metric outside the fixed figures (here shift_logit_err and topk_overlap) shows that
// metric with its interval on each point's line and in its own frontier.csv columns, after the old
// ones: what a point was judged on is visible beside the verdict.
TEST(SweepReport, EveryBudgetTermIsShownWithItsInterval) {
  auto with_terms = [](SweepRecord r, double shift, double overlap) {
    r = with_interval(r, r.metric(Metric::rel_out_err).mean * 0.9, r.metric(Metric::rel_out_err).mean * 1.1);
    Summary& s = r.metrics[size_t(Metric::shift_logit_err)];
    s = {shift, shift * 2, shift * 3, 16};
    s.level = 0.95;
    s.mean_ci = {shift * 0.8, shift * 1.25};
    s.p95_ci = {shift * 2, shift * 2};
    Summary& o = r.metrics[size_t(Metric::topk_overlap)];
    o = {overlap, overlap, 1.0, 16};
    o.level = 0.95;
    o.mean_ci = {overlap - 0.01, overlap + 0.005};
    o.p95_ci = {overlap, overlap};
    return r;
  };
  const std::vector<SweepRecord> records = {with_terms(record("q8_0", "q8_0", 8.5, 8.5, 0.01), 0.02, 0.99)};
  SweepSpec spec = make_spec(records);
  spec.budget.terms = {{Metric::shift_logit_err, Statistic::mean, BoundKind::at_most, 0.05},
                       {Metric::topk_overlap, Statistic::mean, BoundKind::at_least, 0.9},
                       {Metric::rel_out_err, Statistic::mean, BoundKind::at_most, 0.05}};
  spec.budget.confidence = 0.95;
  const SweepAnalysis a = analyze(spec, records);
  const std::string text = summary(spec, records, a);
  EXPECT_THAT(text, HasSubstr("; shift_logit_err 0.02 [0.016, 0.025]; topk_overlap 0.99 [0.98, 0.995]"));
  const std::string csv = frontier_csv(spec, records, a);
  EXPECT_THAT(csv, HasSubstr(",level,shift_logit_err,shift_logit_err_lo,shift_logit_err_hi,topk_overlap,"
                             "topk_overlap_lo,topk_overlap_hi\n"));
  EXPECT_THAT(csv, HasSubstr(",0.95,0.02,0.016,0.025,0.99,0.98,0.995\n"));
}

// An interval's judged end just past its bound prints with the digits that show it: at three or four
// significant digits 0.050003 would read "0.05", the bound itself, beside a point marked undecided.
// Figures no bound applies to keep their digits.
TEST(SweepReport, AJudgedEndBesideItsBoundPrintsTheDigitsThatSeparateThem) {
  const std::vector<SweepRecord> records = {with_interval(record("near", "near", 4, 4, 0.0412), 0.0351, 0.050003)};
  SweepSpec spec = make_spec(records);
  spec.budget.terms = {{Metric::rel_out_err, Statistic::mean, BoundKind::at_most, 0.05}};
  spec.budget.confidence = 0.95;
  const SweepAnalysis a = analyze(spec, records);
  ASSERT_TRUE(a.verdicts[0].undecided);
  const std::string text = summary(spec, records, a);
  EXPECT_THAT(text, HasSubstr("rel_out_err 0.0412 [0.0351, 0.050003] (p95 0.0824"));  // metrics line
  EXPECT_THAT(text, HasSubstr("0.0412 [0.0351, 0.050003]"));
  EXPECT_THAT(text, HasSubstr("its 95 % interval [0.0351, 0.050003] straddles the bound 0.05"));  // violation
  EXPECT_THAT(text, Not(HasSubstr("0.05]")));
  EXPECT_THAT(text, HasSubstr("; attn_kl p95 0.00824;"));  // no bound on it: four digits as before
  const std::string html = sweep_report_html(spec, records, a, {});
  EXPECT_THAT(html, HasSubstr("0.0412 [0.0351, 0.050003]"));
  EXPECT_THAT(html, Not(HasSubstr("0.05]")));
}

// A p95 bound judged on its interval carries the interval's measured shortfall
// (Confidence.TheP95BootstrapCoversLessThanItsLevelOverFewCases); a mean's bound does not.
TEST(SweepReport, AP95BoundJudgedOnItsIntervalSaysTheIntervalCoversLess) {
  const std::vector<SweepRecord> records = {with_interval(record("a", "a", 4, 4, 0.01), 0.008, 0.012)};
  SweepSpec spec = make_spec(records);
  spec.budget.terms = {{Metric::rel_out_err, Statistic::mean, BoundKind::at_most, 0.05}};
  spec.budget.confidence = 0.95;
  const std::string caveat = "a p95's interval (a percentile bootstrap) covers less than its level";
  EXPECT_THAT(summary(spec, records, analyze(spec, records)), Not(HasSubstr(caveat)));
  spec.budget.terms.push_back({Metric::attn_kl, Statistic::p95, BoundKind::at_most, 0.1});
  EXPECT_THAT(summary(spec, records, analyze(spec, records)),
              HasSubstr(caveat + " when the cases differ (0.50 of 95 %"));
  spec.budget.confidence.reset();  // judged on the estimates: no interval to qualify
  EXPECT_THAT(summary(spec, records, analyze(spec, records)), Not(HasSubstr(caveat)));
}

// A violation prints its value, interval and bound with one digit count, enough to keep each apart
// from the bound, so the printed order is the true one: an interval end 0.12346 beside a bound
// 0.12345 does not read "[0.1, 0.1235] straddles the bound 0.1235".
TEST(SweepReport, AViolationPrintsItsFiguresInTheirTrueOrder) {
  Violation v;
  v.kind = Violation::Kind::undecided;
  v.term = {Metric::rel_out_err, Statistic::mean, BoundKind::at_most, 0.12345};
  v.value = 0.12301;
  v.bound = 0.12345;
  v.interval = Interval{0.1, 0.12346};
  v.level = 0.95;
  EXPECT_EQ(violation_text(v),
            "rel_out_err 0.12301: its 95 % interval [0.1, 0.12346] straddles the bound 0.12345 (undecided)");
  // The low end 0.123449 is apart from 0.12345 at 4 digits but equal at 5, the count the high end
  // 0.12351 needs: one count for all, found at once, prints it at 6.
  v.bound = v.term.bound = 0.12345;
  v.value = 0.1234;
  v.interval = Interval{0.123449, 0.12351};
  EXPECT_EQ(violation_text(v),
            "rel_out_err 0.1234: its 95 % interval [0.123449, 0.12351] straddles the bound 0.12345 (undecided)");
  v.kind = Violation::Kind::metric;
  v.value = 0.123452;
  v.interval = Interval{0.123451, 0.2};
  EXPECT_EQ(violation_text(v), "rel_out_err 0.123452 > 0.12345 (95 % interval [0.123451, 0.2])");
}

}  // namespace
}  // namespace kvtune
