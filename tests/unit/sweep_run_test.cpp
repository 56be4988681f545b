// The sweep runner: records streamed to results.jsonl, resume, shards and merge, failing points,
// and the independent pairing's second phase. Specs are built by hand (the parser has its own
// tests), on a small workload so every run takes milliseconds.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "kvtune/error.h"
#include "kvtune/sweep_run.h"
#include "test_support.h"

namespace kvtune {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

SweepSpec points_spec(std::vector<SweepPoint> points) {
  SweepSpec spec;
  spec.name = "small";
  spec.source = "small.toml";
  spec.scenario.workload.tokens = 256;
  spec.scenario.workload.head_dim = 64;
  spec.scenario.workload.queries = 2;
  spec.scenario.workload.keys.outlier_channels = {3, 40};
  spec.scenario.workload.keys.outlier_scale = 10.0;
  spec.scenario.contexts = {256};
  spec.scenario.seeds = {0, 1, 2};
  spec.points = std::move(points);
  spec.hash = 0x1234;
  return spec;
}

// The points' schemes, made by the built-in registry (the parser does this for a sweep file).
SweepSpec typed(SweepSpec spec) {
  for (SweepPoint& p : spec.points) p = make_point(builtin_registry(), p.k, p.v, p.origin);
  spec.registry = std::shared_ptr<const Registry>(std::shared_ptr<const Registry>(), &builtin_registry());
  return spec;
}

std::vector<SweepPoint> grid_points() {
  std::vector<SweepPoint> points;
  for (const char* k : {"int:bits=8,axis=channel", "int:bits=4,axis=channel", "q8_0"}) {
    for (const char* v : {"int:bits=4,axis=token", "q4_0"}) points.push_back({k, v, "search"});
  }
  return points;
}

class SweepRun : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("kvtune-sweep-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  SweepRunOptions options(const std::string& sub = "out") const {
    SweepRunOptions o;
    o.out_dir = (dir_ / sub).string();
    o.threads = 1;
    o.batch_points = 4;
    return o;
  }
  std::string results(const std::string& sub = "out") const { return (dir_ / sub / "results.jsonl").string(); }

  static size_t line_count(const std::string& path) {
    std::ifstream in(path);
    size_t n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  }

  fs::path dir_;
};

// Each sampled layer's cases summarised apart: the layer means, weighted by their sample counts,
// give the record's mean, and the per-layer summaries survive results.jsonl.
TEST_F(SweepRun, RecordsCarryEachSampledLayersSummaries) {
  SweepSpec spec = points_spec({{"q4_0", "q4_0", "search"}});
  spec.scenario.workload.layers = 3;
  spec.scenario.workload.overrides = {{.layers = {2}, .outlier_scale = 40.0}};
  spec.scenario.layers = {0, 2};
  const std::vector<SweepRecord> records = run_sweep(typed(spec), options());
  ASSERT_EQ(records.size(), 1u);
  const SweepRecord& r = records[0];
  ASSERT_EQ(r.layers.size(), 2u);
  EXPECT_EQ(r.layers[0].layer, 0);
  EXPECT_EQ(r.layers[1].layer, 2);
  for (size_t m : {size_t(Metric::rel_out_err), size_t(Metric::attn_kl), size_t(Metric::needle_hit)}) {
    const Summary& all = r.metrics[m];
    const Summary &a = r.layers[0].metrics[m], &b = r.layers[1].metrics[m];
    if (all.count == 0) continue;
    EXPECT_EQ(a.count + b.count, all.count) << kMetricNames[m];
    EXPECT_NEAR((a.mean * double(a.count) + b.mean * double(b.count)) / double(all.count), all.mean, 1e-12)
        << kMetricNames[m];
    EXPECT_EQ(std::max(a.max, b.max), all.max) << kMetricNames[m];
  }
  // Layer 2's keys carry 4x larger outliers, so q4_0 keys err more there.
  EXPECT_GT(r.layers[1].metrics[size_t(Metric::attn_kl)].mean, r.layers[0].metrics[size_t(Metric::attn_kl)].mean);
  const std::vector<SweepRecord> read = read_records(results());
  ASSERT_EQ(read.size(), 1u);
  EXPECT_TRUE(same_result(read[0], r));
  ASSERT_EQ(read[0].layers.size(), 2u);
  EXPECT_EQ(read[0].layers[1].metrics[size_t(Metric::rel_out_err)].mean, r.layers[1].metrics[size_t(Metric::rel_out_err)].mean);
}

// Each sampled KV head summarised apart like a layer, and needle_hit kept per depth (a rate with
// Wilson's interval over its cases): both survive results.jsonl, and the depths' needles add up to
// the record's.
TEST_F(SweepRun, RecordsCarryEachHeadAndEachNeedleDepth) {
  SweepSpec spec = points_spec({{"q4_0", "q4_0", "search"}});
  spec.budget.confidence = 0.95;
  spec.scenario.workload.kv_heads = 2;
  spec.scenario.heads = {0, 1};
  spec.scenario.workload.needles.depths = {0.25, 0.75};
  spec.scenario.workload.needles.mass = 0.5;
  const std::vector<SweepRecord> records = run_sweep(typed(spec), options());
  ASSERT_EQ(records.size(), 1u);
  const SweepRecord& r = records[0];
  ASSERT_EQ(r.heads.size(), 2u);
  EXPECT_EQ(r.heads[0].kv_head, 0);
  EXPECT_EQ(r.heads[1].kv_head, 1);
  const auto err = size_t(Metric::rel_out_err);
  EXPECT_EQ(r.heads[0].metrics[err].count + r.heads[1].metrics[err].count, r.metrics[err].count);
  ASSERT_EQ(r.needle_depths.size(), 2u);
  EXPECT_EQ(r.needle_depths[0].depth, 0.25);
  EXPECT_EQ(r.needle_depths[1].depth, 0.75);
  const Summary& hit = r.metric(Metric::needle_hit);
  ASSERT_GT(hit.count, 0u);
  const Summary &d0 = r.needle_depths[0].needle_hit, &d1 = r.needle_depths[1].needle_hit;
  EXPECT_EQ(d0.count + d1.count, hit.count);
  EXPECT_NEAR((d0.mean * double(d0.count) + d1.mean * double(d1.count)) / double(hit.count), hit.mean, 1e-12);
  ASSERT_EQ(d0.cases.size(), 6u);  // 3 seeds x 2 heads
  Summary from_cases;
  mean_interval_over_cases(d0.cases, 0.95, true, 1.0, from_cases);
  EXPECT_EQ(d0.mean_method, IntervalMethod::wilson_cases);
  EXPECT_DOUBLE_EQ(d0.mean_ci.lo, from_cases.mean_ci.lo);
  EXPECT_DOUBLE_EQ(d0.mean_ci.hi, from_cases.mean_ci.hi);
  const Interval plain = wilson_interval(d0.mean * double(d0.count), double(d0.count), 0.95);
  EXPECT_LE(d0.mean_ci.lo, plain.lo);  // a design effect of at least 1 only widens it
  EXPECT_GE(d0.mean_ci.hi, plain.hi);
  const std::vector<SweepRecord> read = read_records(results());
  ASSERT_EQ(read.size(), 1u);
  EXPECT_TRUE(same_result(read[0], r));
  ASSERT_EQ(read[0].needle_depths.size(), 2u);
  EXPECT_EQ(read[0].needle_depths[1].needle_hit.mean_ci.hi, d1.mean_ci.hi);
  // A record that differs in one depth is another result.
  SweepRecord other = r;
  other.needle_depths[1].needle_hit.mean += 0.25;
  EXPECT_FALSE(same_result(other, r));
}

TEST_F(SweepRun, StreamsOneLinePerPointWithMetricsAndProvenance) {
  const SweepSpec spec = points_spec(grid_points());
  const std::vector<SweepRecord> records = run_sweep(typed(spec), options());
  ASSERT_EQ(records.size(), 6u);
  EXPECT_EQ(line_count(results()), 6u);
  const std::vector<SweepRecord> read = read_records(results());
  ASSERT_EQ(read.size(), 6u);
  for (size_t i = 0; i < read.size(); ++i) {
    EXPECT_EQ(read[i].k, spec.points[i].k);
    EXPECT_EQ(read[i].v, spec.points[i].v);
    EXPECT_TRUE(read[i].ok);
    EXPECT_EQ(read[i].spec_hash, 0x1234u);
    EXPECT_FALSE(read[i].git_commit.empty());
    EXPECT_FALSE(read[i].host.empty());
    EXPECT_THAT(read[i].time, ::testing::MatchesRegex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z"));
    EXPECT_EQ(read[i].metric(Metric::rel_out_err).count, 6u);  // 3 seeds x 2 queries
    EXPECT_DOUBLE_EQ(read[i].metric(Metric::rel_out_err).mean, records[i].metric(Metric::rel_out_err).mean);
    EXPECT_EQ(read[i].metric(Metric::needle_hit).count, 0u);  // no needles: null in the file
  }
  // The bits are the footprint's: 8-bit per channel with f32 scales on 256 tokens, q4_0 = 4.5.
  EXPECT_DOUBLE_EQ(read[0].k_bits, 8.0 + 32.0 / 256.0);
  EXPECT_DOUBLE_EQ(read[1].v_bits, 4.5);
  // A sweep point equals the same pair evaluated by the simulator: 8-bit beats 4-bit keys.
  EXPECT_LT(read[0].metric(Metric::attn_kl).mean, read[2].metric(Metric::attn_kl).mean);
}

TEST_F(SweepRun, ResumeSkipsWhatIsDoneAndRefusesAnotherSpec) {
  SweepSpec spec = points_spec(grid_points());
  SweepRunOptions o = options();
  const std::vector<SweepRecord> first = run_sweep(typed(spec), o);
  EXPECT_THROW(run_sweep(typed(spec), o), InputError);  // exists, no --resume

  // An interrupted run: the last line was cut off mid-write, and two points never ran.
  std::string text;
  {
    std::ifstream in(results());
    std::stringstream s;
    s << in.rdbuf();
    text = s.str();
  }
  size_t cut = 0;
  for (int i = 0; i < 4; ++i) cut = text.find('\n', cut) + 1;
  {
    std::ofstream out(results(), std::ios::trunc);
    out << text.substr(0, cut) << text.substr(cut, 40);  // 4 complete lines + a partial fifth
  }
  o.resume = true;
  size_t calls = 0, last_done = 0;
  o.progress = [&](size_t done, size_t total) {
    ++calls;
    last_done = done;
    EXPECT_EQ(total, 6u);
  };
  const std::vector<SweepRecord> resumed = run_sweep(typed(spec), o);
  EXPECT_EQ(line_count(results()), 6u);  // the partial line dropped, the two missing points added
  EXPECT_GE(calls, 2u);
  EXPECT_EQ(last_done, 6u);
  ASSERT_EQ(resumed.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(resumed[i].metric(Metric::rel_out_err).mean, first[i].metric(Metric::rel_out_err).mean) << i;
  }

  // A changed workload is another sweep: resume refuses to mix them.
  spec.hash = 0x9999;
  try {
    run_sweep(typed(spec), o);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("spec hash 0000000000001234, this one 0000000000009999"));
  }
}

TEST_F(SweepRun, ShardsCoverEveryPointOnceAndMergeToTheUnshardedResult) {
  const SweepSpec spec = points_spec(grid_points());
  const std::vector<SweepRecord> whole = run_sweep(typed(spec), options("whole"));
  for (int64_t i = 0; i < 3; ++i) {
    SweepRunOptions o = options("shard" + std::to_string(i));
    o.shard = i;
    o.shards = 3;
    EXPECT_EQ(run_sweep(typed(spec), o).size(), 2u);
  }
  const std::vector<SweepRecord> merged =
      merge_records({(dir_ / "shard0").string(), (dir_ / "shard1").string(), (dir_ / "shard2").string()});
  ASSERT_EQ(merged.size(), 6u);
  for (const SweepRecord& m : merged) {
    const auto same = std::find_if(whole.begin(), whole.end(), [&](const SweepRecord& w) { return w.k == m.k && w.v == m.v; });
    ASSERT_NE(same, whole.end());
    for (size_t x = 0; x < kMetricCount; ++x) {
      EXPECT_EQ(m.metrics[x].mean, same->metrics[x].mean) << m.k << " / " << m.v;  // deterministic per point
    }
  }
  SweepRunOptions bad = options("bad");
  bad.shard = 3;
  bad.shards = 3;
  EXPECT_THROW(run_sweep(typed(spec), bad), InputError);
}

TEST_F(SweepRun, MergeRefusesShardsOfDifferentSweeps) {
  SweepSpec a = points_spec({{"q8_0", "q8_0", "search"}});
  run_sweep(typed(a), options("a"));
  a.hash = 0x77;
  run_sweep(typed(a), options("b"));
  try {
    merge_records({(dir_ / "a").string(), (dir_ / "b").string()});
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("only shards of one sweep can be merged"));
  }
}

TEST_F(SweepRun, APointWhoseSchemeFailsIsRecordedAndTheSweepGoesOn) {
  SweepSpec spec = points_spec({{"f16", "none", "search"}, {"q8_0", "none", "search"}});
  spec.scenario.workload.keys.scale = 1e4;  // keys beyond f16's range (65504) with the outliers x10
  const std::vector<SweepRecord> records = run_sweep(typed(spec), options());
  ASSERT_EQ(records.size(), 2u);
  EXPECT_FALSE(records[0].ok);
  EXPECT_THAT(records[0].error, HasSubstr("keys through 'f16' are not finite"));
  EXPECT_TRUE(records[1].ok) << records[1].error;
  const std::vector<SweepRecord> read = read_records(results());
  ASSERT_EQ(read.size(), 2u);
  EXPECT_FALSE(read[0].ok);
  EXPECT_EQ(read[0].error, records[0].error);
}

TEST_F(SweepRun, IndependentPairingPairsThePerRoleFrontiers) {
  SweepSpec spec = points_spec({});
  spec.pairing = Pairing::independent;
  // K: 8-bit per channel (better, more bits), 2-bit per channel (worse, fewer bits), and 8-bit
  // per token, which has more bits than 8-bit per channel (a scale per token: 8.5 vs 8.125) and a
  // larger error on outlier channels: dominated.
  for (const char* k : {"int:bits=8,axis=channel", "int:bits=2,axis=channel", "int:bits=8,axis=token"}) {
    spec.points.push_back({k, "none", "search"});
  }
  for (const char* v : {"int:bits=8,axis=token", "int:bits=4,axis=token"}) spec.points.push_back({"none", v, "search"});
  const std::vector<SweepRecord> records = run_sweep(typed(spec), options());
  ASSERT_EQ(records.size(), 5u + 4u);  // phase 1, then 2 K x 2 V
  std::set<std::pair<std::string, std::string>> phase2;
  for (size_t i = 5; i < records.size(); ++i) phase2.insert({records[i].k, records[i].v});
  EXPECT_EQ(phase2.count({"int:bits=8,axis=channel", "int:bits=4,axis=token"}), 1u);
  EXPECT_EQ(phase2.count({"int:bits=2,axis=channel", "int:bits=8,axis=token"}), 1u);
  for (const auto& p : phase2) EXPECT_NE(p.first, "int:bits=8,axis=token");

  SweepRunOptions sharded = options("sharded");
  sharded.shards = 2;
  EXPECT_THROW(run_sweep(typed(spec), sharded), InputError);
}

// Records are only exact for the build that computed them: resume and merge refuse another one's.
TEST_F(SweepRun, ResumeAndMergeRefuseResultsOfAnotherBuild) {
  const SweepSpec spec = points_spec({{"q8_0", "q8_0", "search"}, {"q4_0", "q4_0", "search"}});
  run_sweep(typed(spec), options("a"));
  run_sweep(typed(spec), options("b"));
  const std::vector<SweepRecord> mine = read_records(results("a"));
  std::string text;
  for (SweepRecord r : mine) {
    r.git_commit = "0123456789ab";
    text += record_to_json_line(r);
  }
  {
    std::ofstream out(results("b"), std::ios::trunc);
    out << text;
  }
  SweepRunOptions o = options("b");
  o.resume = true;
  try {
    run_sweep(typed(spec), o);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("(commit 0123456789ab)"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("start a new --out"));
  }
  try {
    merge_records({(dir_ / "a").string(), (dir_ / "b").string()});
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("shards must come from one build"));
  }
}

TEST_F(SweepRun, MalformedResultLinesAreNamedWithTheirLine) {
  fs::create_directories(dir_);
  const std::string path = (dir_ / "results.jsonl").string();
  {
    std::ofstream out(path);
    out << "{\"k\": \"q8_0\"}\n";
  }
  try {
    read_records(path);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr(path + ":1: missing field 'v'"));
  }
  {
    std::ofstream out(path);
    out << "not json\n";
  }
  EXPECT_THROW(read_records(path), InputError);
}

// A spec_hash that is not 1..16 hex digits is a bad input named with its line, not an internal error
// (std::stoull threw std::invalid_argument / out_of_range, which the CLI reported with exit 1).
TEST_F(SweepRun, AMalformedSpecHashIsNamedWithItsLine) {
  run_sweep(typed(points_spec(grid_points())), options());
  std::ifstream in(results());
  std::string first;
  std::getline(in, first);
  in.close();
  const std::string good = "\"spec_hash\":\"";
  const size_t at = first.find(good);
  ASSERT_NE(at, std::string::npos) << first;
  const size_t end = first.find('"', at + good.size());
  for (const std::string bad : {"zz", "", "12345678901234567", "12x4", "-1"}) {
    SCOPED_TRACE(bad);
    {
      std::ofstream out(results());
      out << first.substr(0, at + good.size()) + bad + first.substr(end) << "\n";
    }
    try {
      read_records(results());
      FAIL() << "no error";
    } catch (const InputError& e) {
      EXPECT_THAT(std::string(e.what()), HasSubstr(results() + ":1: field 'spec_hash' must be 1 to 16 hexadecimal"));
    }
  }
}

// Every record carries its metrics' intervals (bootstrap over the cases, Wilson for rates), per
// layer too, and they come back from results.jsonl bit for bit.
TEST_F(SweepRun, RecordsCarryTheirIntervalsThroughResultsJsonl) {
  SweepSpec spec = points_spec(grid_points());
  spec.scenario.workload.layers = 2;
  spec.scenario.layers = {0, 1};
  const std::vector<SweepRecord> records = run_sweep(typed(spec), options());
  const std::vector<SweepRecord> read = read_records(results());
  ASSERT_EQ(read.size(), records.size());
  for (size_t i = 0; i < read.size(); ++i) {
    ASSERT_TRUE(read[i].ok) << read[i].error;
    EXPECT_TRUE(same_result(read[i], records[i]));
    const Summary& err = read[i].metric(Metric::rel_out_err);
    EXPECT_EQ(err.level, kDefaultConfidence);
    EXPECT_EQ(err.mean_method, IntervalMethod::t_cases);  // 3 seeds x 2 layers = 6 cases
    EXPECT_EQ(err.p95_method, IntervalMethod::bootstrap_cases);
    EXPECT_EQ(err.cases, records[i].metric(Metric::rel_out_err).cases);
    EXPECT_EQ(err.cases.size(), 6u);
    EXPECT_LE(err.mean_ci.lo, err.mean);
    EXPECT_GE(err.mean_ci.hi, err.mean);
    EXPECT_EQ(err.mean_ci.hi, records[i].metric(Metric::rel_out_err).mean_ci.hi);
    EXPECT_EQ(read[i].metric(Metric::top1_agree).mean_method, IntervalMethod::wilson_cases);
    ASSERT_EQ(read[i].layers.size(), 2u);
    EXPECT_EQ(read[i].layers[0].metrics[size_t(Metric::rel_out_err)].mean_method, IntervalMethod::t_cases);
  }
}

// A sliding-window layer's cases hold fewer free tokens, so fewer needles than the other layer's:
// here 16 + 24 + 16 + 24 needles over 4 cases, a total that splits evenly. Each layer's summary
// gets its own cases' needles, the same as when that layer is swept alone, and every interval
// stands on the cases as they are.
TEST_F(SweepRun, CasesWithDifferentNeedleCountsKeepTheirOwnNeedles) {
  auto uneven = [](std::vector<int64_t> layers) {
    SweepSpec spec = points_spec({{"q4_0", "q4_0", "search"}});
    spec.budget.confidence = 0.95;
    spec.scenario.workload.tokens = 64;
    spec.scenario.contexts = {64};
    spec.scenario.workload.queries = 24;
    spec.scenario.workload.layers = 2;
    spec.scenario.workload.sliding_window = 16;
    spec.scenario.workload.sliding_layers = {0};
    spec.scenario.workload.needles.depths = {0.1, 0.5, 0.9};
    spec.scenario.workload.needles.mass = 0.3;
    spec.scenario.seeds = {0, 1};
    spec.scenario.layers = std::move(layers);
    return typed(spec);
  };
  const auto hit = size_t(Metric::needle_hit);
  const SweepRecord both = run_sweep(uneven({0, 1}), options()).at(0);
  ASSERT_EQ(both.layers.size(), 2u);
  for (size_t l = 0; l < 2; ++l) {
    fs::remove_all(dir_);
    const SweepRecord alone = run_sweep(uneven({int64_t(l)}), options()).at(0);
    const Summary &part = both.layers[l].metrics[hit], &whole = alone.metric(Metric::needle_hit);
    EXPECT_EQ(part.count, whole.count) << "layer " << l;
    EXPECT_DOUBLE_EQ(part.mean, whole.mean) << "layer " << l;
    EXPECT_EQ(part.cases, whole.cases) << "layer " << l;
  }
  EXPECT_LT(both.layers[0].metrics[hit].count, both.layers[1].metrics[hit].count);  // the window's fewer needles
  ASSERT_EQ(both.metric(Metric::needle_hit).cases.size(), 4u);
  EXPECT_NE(both.metric(Metric::needle_hit).cases[0].count, both.metric(Metric::needle_hit).cases[1].count);
}

TEST_F(SweepRun, AMalformedIntervalIsNamedWithItsLine) {
  const SweepSpec spec = points_spec(grid_points());
  run_sweep(typed(spec), options());
  std::ifstream in(results());
  std::string first;
  std::getline(in, first);
  in.close();
  const std::string path = (dir_ / "broken.jsonl").string();
  auto expect_refused = [&](const std::string& from, const std::string& to, const std::string& message) {
    std::string line = first;
    const size_t at = line.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    line.replace(at, from.size(), to);
    std::ofstream(path) << line << "\n";
    try {
      read_records(path);
      FAIL() << "no error for " << to;
    } catch (const InputError& e) {
      EXPECT_THAT(std::string(e.what()), HasSubstr(path + ":1: " + message));
    }
  };
  expect_refused("\"mean_ci\":[", "\"mean_ci\":[\"low\",", "metric field 'mean_ci' must be [low, high]");
  expect_refused("\"mean_ci_method\":\"", "\"mean_ci_method\":\"jack", "metric field 'mean_ci_method' must be one of");
  expect_refused("\"level\":0.95", "\"level\":1.5", "metric field 'level' must lie in (0, 1)");
  const size_t ci = first.find("\"mean_ci\":[");
  const std::string interval = first.substr(ci, first.find(']', ci) + 1 - ci);
  expect_refused(interval, "\"mean_ci\":[0.5,0.1]", "metric field 'mean_ci' must be [low, high] with low <= high");
  expect_refused("\"cases\":[[", "\"cases\":[[0.1,1],[", "metric field 'cases' must be a list of [mean, count] pairs");
}

}  // namespace
}  // namespace kvtune
